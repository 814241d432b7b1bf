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
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/routing.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/planner/plan_decisions.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/published_accuracy.hpp"
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

// The memory of the session's sizes (tp, cp, pp, dp, micro-batches, recompute) under one
// framework and sharding of model states over dp x cp.
struct LayoutMemoryBar {
  cost::Framework framework = cost::Framework::megatron;
  cost::DpSharding sharding = cost::DpSharding::none;
  cost::Memory3D memory;       // zero when not applicable
  std::string not_applicable;  // why the framework cannot shard that way here
};

// A session that describes a layout (tensor, pipeline or context parallel, or megatron/fsdp2
// as the strategy), computed as dtplan estimate --tp/--pp/--cp computes it.
struct LayoutAnalysis {
  cost::Layout3D layout;  // its stage split resolved
  cost::Memory3D memory;  // the heaviest stage's GPU
  cost::Time3D time;
  std::vector<cost::TimelineEvent> timeline;  // cost::timeline_3d: a stream per kind of work
  // Megatron-LM without and with its distributed optimizer, FSDP2 sharding gradients and
  // parameters: the shardings each framework offers.
  std::vector<LayoutMemoryBar> by_sharding;
};

// The plan view lists the nearest rejected entries of each reason, up to this many; the search
// keeps no more (a plan over thousands of GPUs rejects 10^5 layouts).
inline constexpr std::int64_t kRejectedListed = 500;

struct Analysis {
  Session session;
  ModelDesc model;
  std::int64_t params = 0;
  double capacity_bytes = 0;      // the GPU's memory
  std::vector<MemoryBar> memory;  // every strategy, the session's configuration (data-parallel)
  TopologyPicture topology;
  // The data-parallel strategies (a data-parallel session; empty for a layout).
  cost::StepEstimate step;  // the session's strategy; empty (and a problem) when it cannot run
  std::optional<LayoutAnalysis> layout;  // a layout session's figures
  planner::UnifiedPlan plan;             // data-parallel strategies and layouts, ranked together
  planner::PlanRequest plan_request;
  // What the plan says beyond its ranking: the planner's notes (exports holding another plan,
  // idle GPUs) and, when nothing fits, its suggestions; {field} marks name request fields
  // (labels.hpp renders them as the form's labels).
  std::vector<std::string> plan_notes;
  std::int64_t gpus_per_node = 1;
  std::vector<ValidationRow> validation;
  std::vector<std::string> problems;  // per view, what could not be computed and why
  // How far dtplan was from published runs of the session's kind (data/error_bands.json):
  // the band's group, and the band when the file has one for it.
  std::string band_group;
  std::optional<planner::ErrorBand> band;
};

// Throws dtplan::Error naming the input when the session is unusable (unknown model, GPU,
// topology, strategy...); a failing optional part (a measurement file) lands in `problems`.
Analysis analyse(const Session& s);

// The Plan of one of the planner's candidates (for exports and --save-plan).
Plan plan_file_of(const Analysis& a, const planner::Candidate& c);

// The components of a memory bar, in stacking order, with their names.
using NamedComponents = std::vector<std::pair<std::string, Bytes>>;
NamedComponents components_of(const cost::MemoryComponents& m);
NamedComponents components_of(const cost::Memory3D& m);

// One column of the memory view: a data-parallel strategy, or the session's layout with one
// sharding of its model states.
struct MemoryColumn {
  std::string label;
  NamedComponents components;  // all zero when not applicable
  std::string not_applicable;
  Bytes total() const;
};
std::vector<MemoryColumn> memory_columns(const Analysis& a);

// The step the timeline view draws: the layout's, or the data-parallel strategy's.
const std::vector<cost::TimelineEvent>& timeline_of(const Analysis& a);
double step_seconds(const Analysis& a);
double samples_per_second(const Analysis& a);

}  // namespace dtplan::gui
