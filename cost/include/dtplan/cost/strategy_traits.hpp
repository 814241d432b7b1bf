// The strategy registry: one row per data-parallel strategy with everything that differs
// between them -- which model-state components it shards across the data-parallel group,
// which parameters it holds unsharded while it computes, which gradient buffers it needs,
// which offload modes the real implementation offers, whether gradient synchronisation can
// wait for the last micro-step, who runs it (the framework, DeepSpeed's ZeRO stage with the
// same sharding, FSDP's ShardingStrategy), how dtplan-run executes it, and the collectives it
// issues per micro-step and per optimizer step. The memory model, the collectives'
// pricing (training_comm.cpp), the planner, the exports, the runtime and the GUI read this
// table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cost {

enum class GradientBuffer {
  none,            // gradients reduced in place (FSDP NO_SHARD, DataParallel)
  ddp_buckets,     // a second, bucketed copy of the gradients (unless bucket view)
  zero_bucket,     // DeepSpeed's contiguous reduce bucket (reduce_bucket_size)
  unit_gradients,  // FSDP: one unit's unsharded gradients before reduce-scatter
};

// Parameters held unsharded, in the compute type, beyond the persistent copy.
enum class ParamGather {
  none,
  units,           // ZeRO-3: the module in use and the prefetched one
  root_and_units,  // FSDP FULL/HYBRID: the root unit (embeddings, head) stays gathered from
                   // forward to backward, plus the block in use and the prefetched block
  whole_model,     // FSDP SHARD_GRAD_OP: everything, from forward to the end of backward
};

// When a collective runs: every micro-step, once per optimizer step, or every micro-step unless
// no_sync defers it (gradient synchronisation: to the last micro-step; SHARD_GRAD_OP's
// forward all-gather: to the first).
enum class CommWhen { every_micro_step, once_per_step, deferrable };

// What computation a collective can hide behind: none (before forward, after backward, after
// the optimizer step), or the forward or backward pass it runs alongside.
enum class CommPhase { before_forward, forward, backward, after_backward, after_step };

// The messages a collective is issued as.
enum class MessageSplit {
  whole_model,        // one message of every parameter (DataParallel)
  ddp_buckets,        // DDP's buckets: 1 MiB first, then bucket_cap_mb each, in reverse order
  zero_buckets,       // DeepSpeed's reduce / all-gather buckets (zero_reduce_bucket_elements)
  units,              // one per gathered unit (FSDP unit, ZeRO-3 module; gather_units)
  unit_shards,        // 1/g of each unit, g the GPUs of a node (hybrid sharding's shards)
  parameter_tensors,  // one per parameter tensor (DeepSpeed ZeRO-3 before v0.6)
  // What full recomputation gathers again: the block submodules DeepSpeed released after
  // their recomputed forward (their reuse distance beyond stage3_max_reuse_distance), one
  // message per submodule, or per tensor before v0.6.
  recompute_regathers,
  // Megatron-LM's gradient buffer buckets under --overlap-grad-reduce (a layout's): at least
  // bucket_size parameters each, max(40,000,000, 1,000,000 x the data-parallel ranks)
  // (megatron/core/distributed/distributed_data_parallel.py), the rest in the last.
  megatron_buckets,
};

// What a collective moves, in its recipe's communication type: the parameters (gathered,
// broadcast) or the gradients (reduced).
enum class Payload { weights, gradients };

// The GPUs a collective spans: the data-parallel group (a layout's dp x cp ranks holding the
// same weights), hybrid sharding's shard group (a node for the data-parallel strategies, the
// layout's shard group otherwise), or its replicas (the GPUs holding the same shard).
enum class CommGroup { data_parallel, shard_group, replicas };

// One collective a strategy issues in each step.
struct CollectiveRule {
  std::string_view name;  // "gradient all-reduce (DDP buckets)"
  Collective collective;
  Algorithm algorithm;
  MessageSplit messages;
  Payload payload;
  CommWhen when;
  CommPhase phase;
  CommGroup group = CommGroup::data_parallel;
  // Runs once per optimizer step under no_sync (FSDP SHARD_GRAD_OP keeps the parameters
  // gathered between micro-steps), else `when`.
  bool deferred_by_no_sync = false;
  // The framework synchronises the device around each call (torch.cuda.synchronize()), so
  // none of it overlaps compute.
  bool blocking = false;
  // Issued in torch.distributed's list form: ProcessGroupNCCL copies each rank's chunk
  // between the list and its flat buffer, one copy kernel per rank of the group per call.
  bool per_rank_copies = false;
};

// How dtplan-run executes a strategy (trainer.hpp): the runtime's own algorithm with the same
// collectives and memory.
enum class RuntimeMode { ddp, dp, zero1, zero2, zero3 };

struct StrategyTraits {
  Strategy strategy;
  bool shards_optimizer;  // optimizer states and fp32 master weights
  bool shards_gradients;
  bool shards_weights;  // the persistent weights
  ParamGather gather;
  GradientBuffer gradient_buffer;
  bool fsdp;            // PyTorch FSDP: fp32 flat parameters, MixedPrecision casts
  bool single_process;  // torch.nn.DataParallel: rank 0 reduces and steps
  bool hybrid;          // shard group = the GPUs of one node
  bool offload_optimizer_ok;
  bool offload_params_ok;
  // Gradient synchronisation deferrable to the last micro-step (DDP's and FSDP's no_sync,
  // ZeRO-1's boundary-only reduction); DataParallel, ZeRO-2 and ZeRO-3 cannot.
  bool no_sync;
  std::string_view framework;          // torch-dataparallel, torch-ddp, deepspeed, fsdp1
  int zero_stage;                      // DeepSpeed's stage with the same sharding (0: none)
  std::string_view fsdp_sharding;      // FSDP's ShardingStrategy; empty outside FSDP
  std::optional<RuntimeMode> runtime;  // none: dtplan-run does not execute it yet
  // The collectives of one step (training_comm.hpp prices them), and why no_sync cannot defer
  // them when `no_sync` is false.
  std::span<const CollectiveRule> collectives;
  std::string_view no_sync_refusal;
};

const StrategyTraits& traits_of(Strategy s);

// The collectives a configuration issues: its strategy's row, but for DeepSpeed ZeRO-3 the
// release's way of gathering (c.zero3_gathers: per parameter and blocking before v0.6).
std::span<const CollectiveRule> strategy_collectives(const TrainingConfig& c);

// DeepSpeed ZeRO-3 under full recomputation: the recomputed forward of a block runs its
// submodules' pre-forward hooks, which gather them, and their post-forward hooks release
// those whose next use (their backward) lies more than stage3_max_reuse_distance elements
// away, so backward gathers them once more (stage3.py, _keep_for_later). None otherwise.
std::optional<CollectiveRule> recompute_regather(const TrainingConfig& c);

// Every row, in the order of kStrategies (model/training.hpp).
std::span<const StrategyTraits> all_strategy_traits();

// traits_of(s).no_sync.
bool supports_no_sync(Strategy s);

// How a layout's framework (parallel3d.hpp) holds its states, as far as its collectives
// depend on it.
struct LayoutSharding {
  bool fsdp2 = false;               // else Megatron-LM
  bool shards_optimizer = false;    // Megatron's distributed optimizer
  bool gathers_in_backward = true;  // FSDP2 resharding after forward (parameters sharded)
  bool hybrid = false;              // FSDP2: shard groups replicating each other
  // Megatron-LM's --overlap-grad-reduce: each bucket reduced as the last micro-batch's
  // backward fills it; --overlap-param-gather (distributed optimizer): each bucket of updated
  // weights gathered alongside the next step's first forward.
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
};

// The layout's collectives as registry rows: whole_model is the stage's parameters on one
// GPU, units its blocks (and the root's share on the first and last stage), the groups the
// layout's dp x cp ranks, shard group and replicas (parallel3d.cpp prices them).
std::span<const CollectiveRule> layout_collectives(const LayoutSharding& l);

// GPUs that each sharded component is split across: the data-parallel size, or the GPUs of a
// node for hybrid sharding. Throws when the strategy cannot run with this configuration.
std::int64_t shard_degree(const TrainingConfig& c);

// Throws dtplan::Error if the configuration is not one the strategy supports (offload mode,
// hybrid divisibility, single-process limits, autocast outside dp/ddp); the message marks the
// training fields it names as {offload}, {precision}, {gpus}, {gpus_per_node}
// (dtplan::rendered).
void check_supported(const TrainingConfig& c);

}  // namespace dtplan::cost
