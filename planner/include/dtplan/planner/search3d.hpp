// The tensor x context x pipeline x data-parallel search (Megatron-style layouts): every tp
// (dividing the heads and the key/value heads, inside a node) x cp (splitting the sequence)
// x pp (dividing the layers) with dp = GPUs / (tp x cp x pp) dividing the global batch, every
// micro-batch and the micro-batches per pipeline it leaves, interleaving (chunks dividing the
// layers; micro-batches divisible by pp), sequence parallelism on or off (tp > 1), each
// recompute mode, and for a mixture of experts every expert-parallel size and expert
// tensor-parallel size (tp or 1) Megatron-LM's parallel folding allows; memory checked against the
// GPU, ranked by step time (cost/parallel3d.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/planner/planner.hpp"

namespace dtplan::planner {

struct Request3D {
  std::int64_t global_batch = 0;
  std::int64_t seq_len = 0;  // 0: the model's maximum
  std::int64_t gpus = 0;     // 0: every GPU of the cluster
  // The GPU counts tried (each at most the cluster's); empty: `gpus` alone. A plan tries
  // fewer GPUs too (gpu_counts()), as the data-parallel search does.
  std::vector<std::int64_t> gpu_counts;
  std::vector<std::int64_t> micro_batches;          // empty: every divisor of the batch
  std::vector<std::int64_t> tps, pps, interleaves;  // empty: every valid value
  // Context-parallel sizes; empty: powers of two leaving each rank at least
  // kMinTokensPerContextRank tokens (1 alone for short sequences).
  std::vector<std::int64_t> cps;
  std::vector<cost::CpComm> cp_comms;  // empty: p2p (Megatron-LM's default ring attention)
  // A mixture of experts: expert-parallel sizes (empty: every divisor of the experts that
  // folds into tp x cp x dp) and expert tensor-parallel sizes (empty: tp, and 1 when tp > 1).
  std::vector<std::int64_t> eps, etps;
  // Who runs the layout; empty: both -- Megatron-LM with its distributed optimizer, and
  // FSDP2 (torchtitan) with parameters sharded (reshard after forward) or kept gathered from
  // forward to backward.
  std::vector<cost::Framework> frameworks;
  std::vector<bool> sequence_parallel;   // empty: both
  std::vector<Checkpointing> recompute;  // empty: all three
  // Megatron-LM's selective recomputation: the module sets tried (training.hpp); empty: its
  // default (core_attn) and, for a model with latent attention or experts, the modules whose
  // tensors are discarded and rebuilt cheaply (discarding_modules), together and each alone.
  std::vector<RecomputeModules> recompute_modules;
  // Megatron-LM's overlapped expert all-to-alls and DeepEP dispatch, on every layout that can
  // run them (expert parallelism; the overlap with interleaving under a pipeline and without
  // full recomputation, DeepEP over whole experts).
  bool overlap_ep_comm = false, deepep = false;
  // Megatron-LM's --overlap-grad-reduce and --overlap-param-gather, on every Megatron-LM
  // layout (param gather where the distributed optimizer runs).
  bool overlap_grad_reduce = false, overlap_param_gather = false;
  std::int64_t ddp_bucket_params = 0;  // with overlap_grad_reduce, per bucket; 0: Megatron-LM's
  bool grad_reduce_bf16 = false;       // Megatron-LM's --grad-reduce-in-bf16 (bf16 layouts)
  bool fp8_param_gather = false;       // Megatron-LM's --fp8-param-gather (FP8, dist. optimizer)
  bool tp_comm_overlap = false;        // Megatron-LM's --tp-comm-overlap (tp > 1 with sp)
  // Pipeline schedules tried when pp > 1; empty: what Megatron-LM runs (1F1B, interleaved
  // 1F1B with v > 1). The zero-bubble ones need the schedule's own fork, so they are opt-in.
  std::vector<cost::PipelineSchedule> schedules;
  Precision precision = Precision::bf16;
  Fp8Recipe fp8 = Fp8Recipe::none;  // FP8 Linear GEMMs; frameworks that do not run it are left out
  // The attention kernel; context parallelism (cp > 1) needs flash.
  Attention attention = Attention::flash;
  AttentionKernel attention_kernel = AttentionKernel::framework;  // which fused kernel runs
  // Its states; frameworks that do not run it (cost::optimizer_problem) are left out.
  Optimizer optimizer = Optimizer::adamw;
  OptimizerImpl optimizer_impl = OptimizerImpl::framework;  // foreach: torchtitan only
  ZeroGrad zero_grad = ZeroGrad::set_to_none;               // FSDP2's training loop
  // Offload modes tried; empty: all, as the data-parallel search. Each framework tries none
  // and the mode it runs (Megatron-LM the optimizer, FSDP2 parameters, gradients and optimizer
  // together), its offloaded states within host_per_node for the GPUs of a node.
  std::vector<Offload> offloads;
  Bytes host_per_node{0};  // a node's host memory; 0: not checked
  double headroom = 0.10;
  std::int64_t top_k = 5;
  RunGoal goal;  // what layouts are ranked by (planner.hpp); default: seconds per sample
  // Rejected layouts kept in Result3D::rejected: -1, every one; n >= 0, per reason the n nearest
  // (least over memory, least behind) and the nearest of each expert layout and recompute mode,
  // the others only counted (Result3D::rejected_omitted). A report that lists the nearest few
  // needs no more, and a large search rejects 10^5 layouts.
  std::int64_t rejected_kept = -1;
  // Threads pricing the layouts' memory: 0, the host's hardware threads (at most 8). The
  // result is the same on any number.
  std::int64_t threads = 0;
};

// The modules NVIDIA's recipes recompute to fit a mixture or latent attention (Megatron-Bridge
// perf_recipes: GPT-OSS layernorm and moe_act, DeepSeek-V3 mla_up_proj with them): those that
// discard tensors and rebuild them with element-wise work or the small up-projections --
// layernorm (where a norm runs on its own), mla_up_proj, moe_act -- less what the FP8 recipe
// refuses (delayed scaling: layernorm, moe_act). Empty for a dense model without latent
// attention, where layernorm discards nothing.
RecomputeModules discarding_modules(const TransformerSpec& s, Fp8Recipe fp8);

// Below this many tokens per rank the attention of a chunk is too short to hide the ring's
// K/V pass, and Megatron-LM's guidance is to use context parallelism from about 8K-token
// sequences up (Megatron Core docs, "Context parallel": "CP ... for long sequences"): the
// default search tries cp only down to 4,096 tokens per rank.
inline constexpr std::int64_t kMinTokensPerContextRank = 4096;

struct Candidate3D {
  cost::Layout3D layout;
  cost::Memory3D memory;
  cost::Time3D time;
  double objective = 0;  // lower is better (RunGoal)
};

// A layout the search priced and did not rank first: out of GPU or host memory (amount: GiB
// over; its time is not computed), past the deadline (hours over) or slower than the best (%
// behind). Kept as the search priced it, in figures: a search rejects 10^5 layouts and
// prices them without explanations, and the time of one over memory is never computed. Its
// time leaves out the list of its data-parallel collectives, which no rejected entry reports.
struct RejectedLayout {
  RejectedLayout(const cost::Layout3D& l, const cost::Memory3DFigures& m, Reason why, double by)
      : layout(l), memory(m), reason(why), amount(by) {}
  RejectedLayout(Candidate3D&& c, Reason why, double by);
  cost::Layout3D layout;
  cost::Memory3DFigures memory;
  std::shared_ptr<const cost::Time3D> time;  // none: over memory, not timed
  double objective = 0;
  Reason reason = Reason::slower;
  double amount = 0;
  Candidate3D candidate() const;  // the layout as the search priced it
};

struct Result3D {
  // Best objective first, up to top_k, one per shape (GPUs, tp, cp, ep, etp, pp, v, sp, schedule,
  // framework): the best micro-batch and recompute mode of each.
  std::vector<Candidate3D> ranked;
  std::optional<Candidate3D> nearest_miss;  // the least over memory, when nothing fits
  // The best layout each framework runs (ranked or not): what its export describes.
  std::map<cost::Framework, Candidate3D> best_of_framework;
  // For each framework with no layout in memory: the one least over.
  std::map<cost::Framework, Candidate3D> nearest_miss_of_framework;
  // Fewest bytes first, each with a better objective than every layout using less memory.
  std::vector<Candidate3D> pareto;
  // Layouts priced: evaluated = fit + out_of_memory + host_out_of_memory + past_deadline.
  std::int64_t evaluated = 0;
  std::int64_t fit = 0;  // within memory and the deadline (ranked keeps the best of each shape)
  std::int64_t out_of_memory = 0;
  std::int64_t host_out_of_memory = 0;  // offloaded states over the node's host memory
  std::int64_t past_deadline = 0;
  // Expert layouts not priced: their all-to-all spans more GPUs than it is modelled on
  // (cost::expert_exchange_problem); the first one's reason.
  std::int64_t exchange_unpriced = 0;
  std::string exchange_unpriced_why;
  // Every priced layout but the best, as Request3D::rejected_kept keeps them, in the order
  // rejected (those over memory or past the deadline as priced, then the slower ones best
  // first): evaluated = rejected.size() + the omitted + (1 if one fits). UnifiedPlan::rejected
  // names them by index. A deque: a vector's growth held two copies at once.
  std::deque<RejectedLayout> rejected;
  std::map<Reason, std::int64_t> rejected_omitted;  // per reason, rejected and not kept
  std::string no_layout;  // when the rules and restrictions leave no layout at all: why
  double usable_bytes = 0;
  double elapsed_s = 0;
};

// `comm`: shared routes and rings, as for plan().
Result3D search_3d(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                   const GpuSpec& gpu, const Request3D& r, const cost::ComputeConstants& k,
                   const cost::OverheadConstants& overheads,
                   std::shared_ptr<cost::CommContext> comm = nullptr);

}  // namespace dtplan::planner
