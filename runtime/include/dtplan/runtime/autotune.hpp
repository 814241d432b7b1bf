// Autotuning as a library workflow (dtplan autotune, the GUI's Autotune dialog): the planner's
// candidates for the global batch on `np` ranks (checkpointing and offload off: the runtime
// executes neither), merged where the runtime executes them the same way, tried through
// dtplan-run in the calibrated model's order with early stopping (autotune_search.hpp); every
// trial appended to a JSON-lines results file (autotune_log.hpp) as it finishes.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/interconnect.hpp"
#include "dtplan/model/topology.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/runtime/autotune_log.hpp"
#include "dtplan/runtime/autotune_search.hpp"

namespace dtplan::runtime {

struct AutotuneRequest {
  std::string model_name;  // preset name or path, as the trials' plans name it
  ModelDesc model;
  double scale = 1;          // the runtime runs the model at this width
  std::int64_t seq_len = 0;  // 0: the model's maximum
  std::int64_t global_batch = 0;
  std::int64_t np = 2;
  std::string backend = "cpu";
  std::int64_t steps = 5, warmup = 1;  // per trial
  Precision precision = Precision::bf16;
  Optimizer optimizer = Optimizer::adamw;
  std::vector<Strategy> strategies;         // empty: all
  std::vector<std::int64_t> micro_batches;  // empty: all
  // Activation recomputation to search (dtplan-run executes none, selective -- the attention
  // core -- and full); empty: none only, layouts that fit without recomputation.
  std::vector<Checkpointing> checkpointings;
  std::string topology_name, gpu_name;  // the planner's cluster, as the header records it
  std::int64_t max_trials = 0;          // 0: no limit
  double time_budget_s = 0;             // 0: none
  bool exhaustive = false;
  std::string work_dir;  // empty: a fresh temporary directory
  std::string data_dir;
};

// The planner's inputs for the cluster the candidates are checked on (memory, exports).
struct PlannerInputs {
  const Topology& topology;
  const InterconnectTable& table;
  const GpuSpec& gpu;
  const cost::ComputeConstants& compute;
  const cost::OverheadConstants& overheads;
};

struct TuneSpace {
  std::vector<TuneCandidate> candidates;
  std::map<std::string, std::vector<planner::Candidate>> planned;  // by key, planner order
  planner::PlanRequest request;
  std::int64_t gpus_per_node = 1;
  std::int64_t planner_configs = 0;
  ModelDesc model;
};

// Throws FieldError naming the first field out of range. Resolves seq_len 0 to the model's
// maximum, so the trials' plans and the results header record the length actually run.
AutotuneRequest checked(AutotuneRequest r);

// The profile the trials are predicted with: `path`, or the bundled one for the request's
// backend and ranks when empty. FieldError on "profile" when it cannot be read or was
// measured on another backend.
cost::HardwareProfile autotune_profile(const std::string& path, const AutotuneRequest& r);

// The trials' settings (ranks, backend, steps) in `work_dir`.
TrialSettings trial_settings(const AutotuneRequest& r, const std::filesystem::path& work_dir);

// The distinct executions of the planner's configurations; throws Error when none fits.
TuneSpace search_space(const AutotuneRequest& r, const PlannerInputs& in, const TrialSettings& s);

// The results file's header: what is tuned (a resume must match it field by field).
nlohmann::json results_header(const AutotuneRequest& r, const std::string& created);

// Tries the space's candidates; appends each finished trial to `results`. `progress` is
// called before every trial (it may throw Interrupted to stop between trials; a signal stops
// the trial in flight, which is neither logged nor counted).
TuneOutcome autotune(const AutotuneRequest& r, const TuneSpace& space,
                     const cost::HardwareProfile& profile, const TrialSettings& s,
                     ResultsFile& results, const ProgressFn& progress);

}  // namespace dtplan::runtime
