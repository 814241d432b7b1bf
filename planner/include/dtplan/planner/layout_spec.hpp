// A layout as a front end names it: sizes, and the framework, sharding, schedule and CP
// exchange by name (the flags of `dtplan estimate`/`dtplan memory`, the GUI's inputs). Turned
// into a cost::Layout3D here, once, so the CLI and the GUI agree on defaults and on what is
// refused; problems are FieldErrors naming the LayoutSpec field (tp, pp, cp, ep, etp,
// interleave, cp_comm, framework, sharding, dp_shard, schedule, pp_layers, sequence_parallel,
// recompute_modules) or
// the training field (gpus) they concern.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::planner {

struct LayoutSpec {
  std::int64_t tp = 1, pp = 1, cp = 1, interleave = 1;
  std::int64_t ep = 1;         // expert parallel (a mixture of experts)
  std::int64_t etp = 0;        // expert tensor parallel; 0: tp
  double capacity_factor = 0;  // experts' padded capacity over the balanced share; 0: dropless
  std::string cp_comm = "p2p";
  std::string framework;      // empty: megatron, or the strategy when it names a framework
  std::string sharding;       // empty: the framework's own (optimizer; FSDP2 parameters)
  std::int64_t dp_shard = 0;  // ranks a state is sharded over; 0: all dp x cp
  std::string schedule;       // empty: Megatron's own (1F1B, interleaved when interleave > 1)
  std::vector<std::int64_t> pp_layers;  // layers of each stage; empty: the rule
  bool sequence_parallel = false;
  bool overlap_ep_comm = false;       // Megatron-LM's --overlap-moe-expert-parallel-comm
  bool deepep = false;                // Megatron-LM's flex dispatcher with the DeepEP backend
  bool overlap_grad_reduce = false;   // Megatron-LM's --overlap-grad-reduce
  bool overlap_param_gather = false;  // Megatron-LM's --overlap-param-gather
  std::int64_t ddp_bucket_size = 0;   // Megatron-LM's --ddp-bucket-size (parameters); 0: its own
  bool grad_reduce_in_bf16 = false;   // Megatron-LM's --grad-reduce-in-bf16
  bool fp8_param_gather = false;      // Megatron-LM's --fp8-param-gather
  bool tp_comm_overlap = false;       // Megatron-LM's --tp-comm-overlap
  // Megatron-LM's --recompute-modules under selective checkpointing, comma-separated (or
  // "none"); empty: its default, core_attn.
  std::string recompute_modules;
};

// Whether a strategy name is a layout framework (megatron, fsdp2) rather than a data-parallel
// strategy (ddp, zero3, fsdp-full, ...).
bool is_layout_framework(std::string_view strategy);

// Whether the spec (or a framework named as the strategy) describes a layout rather than a
// data-parallel strategy on its own.
bool wants_layout(const LayoutSpec& s, std::string_view strategy);

// The data-parallel size the spec leaves of `gpus`: gpus / (tp x cp x pp). Throws a
// FieldError when a size is not positive or does not divide.
std::int64_t layout_dp(const LayoutSpec& s, std::int64_t gpus);

// The layout of `c` (its GPUs, GPUs per node, micro-batch, sequence, checkpointing and
// precision) under the spec, with `micro_batches` per pipeline per step, its stage split
// resolved. `strategy`: empty, or the framework (megatron, fsdp2); a data-parallel
// strategy's name is refused (field strategies), as is an autocast precision (field
// precision), which the layouts do not model; an offload is the framework's own (Megatron-LM
// optimizer, FSDP2 optimizer+params; cost::check_layout). Throws a FieldError naming
// the field that breaks a rule (sizes, GPUs not divisible by tp x cp x pp, a framework named
// twice), or dtplan::Error for the model's and the schedule's own rules (cost::check_layout).
// Why a layout is not priced with --layer-kernels eager (layout_of refuses it, plan leaves the
// layouts out).
inline constexpr std::string_view kEagerLayouts =
    "eager is modelled for the data-parallel strategies and for FSDP2 layouts at tp 1 "
    "(torchtitan without torch.compile); Megatron-LM and tensor-parallel layouts run fused "
    "kernels";

cost::Layout3D layout_of(const LayoutSpec& s, std::string_view strategy, const ModelDesc& m,
                         const TrainingConfig& c, std::int64_t micro_batches);

}  // namespace dtplan::planner
