// Everything the views show for one session, computed by the same library calls as the CLI
// (memory: dtplan memory; rings and bottleneck: dtplan topo; step and timeline: dtplan
// estimate; ranking, Pareto front and rejections: dtplan plan; predicted against measured:
// dtplan validate). Plain data, no Qt: the GUI computes it off the UI thread and the tests
// compare it with direct library calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/routing.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/unified_plan.hpp"
#include "session.hpp"

namespace dtplan::gui {

struct MemoryBar {
  Strategy strategy = Strategy::ddp;
  cost::MemoryComponents gpu;  // per GPU; zero when not applicable
  // Why the strategy cannot run this session (DataParallel across nodes, ...); empty when it
  // can. The views show such a strategy as not applicable, not as an error.
  std::string not_applicable;
};

struct TopoDevice {
  std::string name;
  DeviceKind kind = DeviceKind::gpu;
  std::int64_t host = -1;
  std::int64_t gpu_rank = -1;
};

struct TopoLink {
  std::size_t from = 0, to = 0;  // indices into devices
  std::string link_class;
  double bandwidth_Bps = 0;    // achieved, one direction
  std::int64_t ring_hops = 0;  // hops of the first ring routed over it (both directions)
  bool bottleneck = false;
};

struct TopologyPicture {
  std::vector<TopoDevice> devices;
  std::vector<TopoLink> links;     // one per physical link
  std::vector<std::int64_t> ring;  // the first ring's GPU ranks
  std::size_t channels = 0;
  double ring_bandwidth_Bps = 0;
  cost::Bottleneck bottleneck;
};

struct ValidationRow {
  std::string file;
  std::string label;  // model, strategy, ranks
  double predicted_step_s = 0, measured_step_s = 0;
  double predicted_peak_bytes = 0, measured_peak_bytes = 0;
  double error() const { return (predicted_step_s - measured_step_s) / measured_step_s; }
};

struct Analysis {
  Session session;
  ModelDesc model;
  std::int64_t params = 0;
  double capacity_bytes = 0;      // the GPU's memory
  std::vector<MemoryBar> memory;  // every strategy, the session's configuration
  TopologyPicture topology;
  cost::StepEstimate step;    // the session's strategy; empty (and a problem) when it cannot run
  planner::UnifiedPlan plan;  // data-parallel strategies and layouts, ranked together
  planner::PlanRequest plan_request;
  std::int64_t gpus_per_node = 1;
  std::vector<ValidationRow> validation;
  std::vector<std::string> problems;  // per view, what could not be computed and why
};

// Throws dtplan::Error naming the input when the session is unusable (unknown model, GPU,
// topology, strategy...); a failing optional part (a measurement file) lands in `problems`.
Analysis analyse(const Session& s);

// The Plan of one of the planner's candidates (for exports and --save-plan).
Plan plan_file_of(const Analysis& a, const planner::Candidate& c);

// The components of a memory bar, in stacking order, with their names.
std::vector<std::pair<std::string, Bytes>> components_of(const cost::MemoryComponents& m);

}  // namespace dtplan::gui
