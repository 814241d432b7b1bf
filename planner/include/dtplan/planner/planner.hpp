// The planner: searches strategy x precision x data-parallel size x checkpointing x offload x
// micro-batch (gradient accumulation follows from the global batch) for the configuration
// that best meets an objective, keeps the rejected configurations with their reasons, and
// reports the ranking and the memory/throughput Pareto front. Deterministic.
//
// Everything that does not change between candidates is computed once and cached: ring
// plans per group size, communication per (strategy, precision, GPUs), memory per
// (strategy, precision, GPUs, checkpointing, offload) as a line in the micro-batch, compute
// per (precision, checkpointing, micro-batch); a candidate is then a few dozen flops.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/model/topology.hpp"

namespace dtplan::planner {

enum class Objective { throughput, time, cost };
std::string_view name_of(Objective o);
Objective parse_objective(std::string_view text);

enum class Sync { both, no_sync, every_micro_step };

// The precisions searched when none are asked for: bf16 (fp16 on a GPU without bf16 tensor
// cores, such as V100 and T4) and fp32.
std::vector<Precision> default_precisions(const GpuSpec& gpu);
// Throws naming the first precision `gpu` has no tensor-core peak for, and what it does have.
void check_precisions(const GpuSpec& gpu, const std::vector<Precision>& precisions);

struct PlanRequest {
  std::int64_t global_batch = 0;
  std::int64_t seq_len = 0;                  // 0: the model's maximum
  std::int64_t max_gpus = 0;                 // 0: every GPU of the topology
  std::vector<Strategy> strategies;          // empty: all
  std::vector<Precision> precisions;         // empty: bf16 (or fp16 without bf16), and fp32
  std::vector<Checkpointing> checkpointing;  // empty: all that apply
  std::vector<Offload> offloads;             // empty: all that apply
  Optimizer optimizer = Optimizer::adamw;
  OptimizerImpl optimizer_impl = OptimizerImpl::framework;  // the 1-D strategies' step
  LayerKernels layer_kernels = LayerKernels::framework;     // the candidates' layer kernels
  ZeroGrad zero_grad = ZeroGrad::set_to_none;  // PyTorch's loops (dp, ddp, FSDP, FSDP2 layouts)
  Attention attention = Attention::flash;
  AttentionKernel attention_kernel = AttentionKernel::framework;  // which fused kernel runs
  Zero3Gathers zero3_gathers = Zero3Gathers::coalesced;           // the DeepSpeed release's ZeRO-3
  double headroom = 0.10;  // fraction of GPU memory kept free
  // Host RAM per node for offloaded states; nullopt: the topology's (or kDefaultHostMemory).
  std::optional<Bytes> host_memory;
  Objective objective = Objective::throughput;
  double price_per_gpu_hour = 0;  // for the cost objective
  // The run's length for the time and cost objectives: optimizer steps, or samples (dataset
  // x epochs) which give steps per candidate batch. Neither: time per sample.
  std::int64_t steps = 0;
  double samples = 0;
  double max_run_s = 0;  // a deadline for the whole run (needs steps or samples); 0: none
  std::vector<std::int64_t> micro_batches;  // empty: every divisor of the per-GPU batch
  // Only the requested batch; otherwise GPU counts it does not divide are searched at the
  // nearest batches they reach, and compete.
  bool exact_batch = false;
  std::int64_t top_k = 5;
  // Gradient accumulation with no_sync (less communication; FSDP then holds unsharded
  // gradients) or synchronising every micro-step: both searched, or one.
  Sync sync = Sync::both;
  // Rejected configurations kept in PlanResult::rejected: -1, every one; n >= 0, every
  // combination never evaluated, per reason the n nearest evaluated ones (least over memory,
  // least behind) and the nearest of each strategy, the others only counted
  // (PlanResult::rejected_omitted).
  std::int64_t rejected_kept = -1;
  // Threads the layout search prices memory on (Request3D::threads): 0, the host's hardware
  // threads (at most 8). The result is the same on any number.
  std::int64_t threads = 0;
  // Told as the search goes: `done` of `total` steps (one per strategy and GPU count prepared,
  // one for the search itself) and what runs now; for a progress display. Empty: not told.
  std::function<void(std::int64_t done, std::int64_t total, const std::string& what)> progress;
};

// What a run is judged by, lower is better: seconds per sample (throughput), the run's seconds
// (time), or its price (cost). The run's length is its optimizer steps, or its samples (which
// give steps per candidate batch); with neither, one sample.
struct RunGoal {
  Objective objective = Objective::throughput;
  double price_per_gpu_hour = 0;
  std::int64_t steps = 0;
  double samples = 0;
  double max_run_s = 0;  // 0: no deadline
};
RunGoal goal_of(const PlanRequest& r);
// Seconds of the whole run (per sample when its length is not known).
double run_seconds(const RunGoal& g, double step_s, std::int64_t global_batch);
double objective_value(const RunGoal& g, double step_s, std::int64_t global_batch,
                       std::int64_t gpus);

struct Candidate {
  Strategy strategy = Strategy::ddp;
  Precision precision = Precision::bf16;
  Checkpointing checkpointing = Checkpointing::none;
  Offload offload = Offload::none;
  bool no_sync = true;  // gradients synchronised in the last micro-step only
  std::int64_t dp = 1;
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  std::int64_t global_batch = 0;
  Bytes memory;       // peak per GPU
  Bytes host_memory;  // host RAM per node (offloaded states of the node's ranks)
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double objective = 0;  // lower is better
};

enum class Reason : std::uint8_t {
  out_of_memory,
  host_out_of_memory,
  batch_unreachable,
  unsupported,
  past_deadline,
  slower
};
std::string_view name_of(Reason r);

struct Rejected {
  Candidate config;  // micro_batch 0: every micro-batch (and accumulation) of that kind
  Reason reason = Reason::slower;
  // GiB over (out_of_memory: per GPU; host_out_of_memory: per node), hours over
  // (past_deadline), % behind (slower)
  double amount = 0;
  std::string detail;  // unsupported: why; unreachable: the batch the shape gives
};

struct PlanResult {
  std::optional<Candidate> best;
  std::vector<Candidate> ranked;   // best first, up to top_k
  std::vector<Candidate> pareto;   // fewest bytes first; each faster than all that use less
  std::vector<Rejected> rejected;  // as PlanRequest::rejected_kept keeps them
  std::map<Reason, std::int64_t> rejected_omitted;  // per reason, rejected and not kept
  bool exact_batch = true;              // whether the best plan reaches the requested batch exactly
  std::optional<Candidate> best_exact;  // the best that does, when the best does not
  std::int64_t configs_evaluated = 0;
  double elapsed_s = 0;
  double search_s = 0;  // after the caches were built
  Bytes capacity;
  Bytes usable;         // capacity minus headroom
  Bytes host_capacity;  // host RAM per node the offloaded states must fit
  // When nothing fits: what would. {name} marks a request or input field (render_fields).
  std::vector<std::string> suggestions;
};

// Whether a rejection stands for one evaluated configuration (out of memory, past the
// deadline, slower) or for combinations never evaluated (unsupported: a whole strategy x
// precision x GPUs x offload family; batch_unreachable: one GPU count).
bool was_evaluated(Reason r);

// How a search's numbers add up:
//   evaluated = chosen + rejected_evaluated          (every evaluated configuration)
//   rejected entries = rejected_evaluated + not_evaluated
struct SearchCounts {
  std::int64_t evaluated = 0;           // configurations priced: memory, then time
  std::int64_t chosen = 0;              // 1 when something fits, else 0
  std::int64_t rejected_evaluated = 0;  // evaluated and rejected (slower ones included)
  std::int64_t not_evaluated = 0;       // rejected entries for combinations never evaluated
  bool unsupported = false, batch_unreachable = false;  // the reasons among those
  // "unsupported", "batch unreachable" or both, as not_evaluated holds them.
  std::string not_evaluated_why() const;
};
SearchCounts search_counts(const PlanResult& r);

// `comm` shares routes, rings and collective patterns with the caller's other estimates on
// the same topology (one is made when none is given).
PlanResult plan(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                const GpuSpec& gpu, const PlanRequest& r, const cost::ComputeConstants& k,
                const cost::OverheadConstants& overheads,
                std::shared_ptr<cost::CommContext> comm = nullptr);

// How each strategy fared: its best configuration that fits and how far behind the plan's
// best it is, or, when none fits, its nearest miss (least over memory) or why it cannot run.
struct StrategyOutcome {
  Strategy strategy = Strategy::ddp;
  std::optional<Candidate> best;
  double behind_pct = 0;
  std::optional<Rejected> nearest_miss;
};
std::vector<StrategyOutcome> by_strategy(const PlanResult& r);
// The best outcome among some strategies (those a framework runs), if any fits.
std::optional<StrategyOutcome> best_among(const PlanResult& r,
                                          const std::vector<Strategy>& strategies);

// The configuration a candidate stands for, with the request's fixed choices.
// gpus_per_host: where a node spans several hosts (NodeTemplate::gpus_per_host), else 0.
TrainingConfig training_config(const Candidate& c, const PlanRequest& r, std::int64_t gpus_per_node,
                               std::int64_t gpus_per_host = 0);

// Where a plan runs and under which names the Plan file records it.
struct PlanTarget {
  std::string model;     // preset name or path, as given
  std::string topology;  // preset name or path, as given
  std::int64_t nodes = 1;
  std::int64_t gpus_per_node = 1;
  std::string gpu;
};

// A Plan of `m` on `target` training as `training` says, its shape and prediction left to the
// caller. A zero sequence length becomes the model's maximum.
Plan plan_for(const ModelDesc& m, const PlanTarget& target, const TrainingConfig& training);

// The Plan file of a candidate (dtplan-run executes it; the exports read it). A zero sequence
// length becomes the model's maximum.
Plan plan_file(const Candidate& c, const PlanRequest& r, const ModelDesc& m,
               const PlanTarget& target);

// The data-parallel sizes searched: powers of two up to a node, then whole nodes in powers of
// two and the full count.
std::vector<std::int64_t> gpu_counts(std::int64_t gpus_per_node, std::int64_t nodes,
                                     std::int64_t max_gpus);

}  // namespace dtplan::planner
