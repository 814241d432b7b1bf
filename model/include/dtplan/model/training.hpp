// How a model is trained: precision, optimizer, data-parallel strategy, batch shape,
// checkpointing and offload. Each enumeration has one table of names (used for parsing,
// printing and help), so adding a value is one row.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/model/named_value.hpp"

namespace dtplan {

// One byte each: the planner keeps 10^4-10^5 configurations that name them.
enum class Precision : std::uint8_t { fp32, fp16, bf16, amp_fp16, amp_bf16 };
enum class Optimizer { adam, adamw, sgd, sgd_momentum, adam8bit };
enum class Strategy : std::uint8_t {
  dp,             // single-process torch.nn.DataParallel
  ddp,            // DistributedDataParallel
  zero1,          // DeepSpeed ZeRO stage 1: optimizer states (and fp32 master) sharded
  zero2,          // + gradients sharded
  zero3,          // + parameters sharded
  fsdp_full,      // FSDP FULL_SHARD (ZeRO-3 semantics)
  fsdp_grad_op,   // FSDP SHARD_GRAD_OP (ZeRO-2 semantics)
  fsdp_hybrid,    // FSDP HYBRID_SHARD: full shard inside a node, replicate across nodes
  fsdp_no_shard,  // FSDP NO_SHARD (DDP semantics, no separate bucket copy)
};
enum class Offload : std::uint8_t { none, optimizer, optimizer_and_params };
enum class Checkpointing : std::uint8_t { none, selective, full };
enum class Attention { flash, eager, hf_eager };

inline constexpr std::array<NamedValue<Precision>, 5> kPrecisions{{
    {Precision::fp32, "fp32", "fp32 weights, gradients and activations"},
    {Precision::fp16, "fp16",
     "fp16 mixed precision: 16-bit weights and gradients, fp32 master (DeepSpeed, Megatron); "
     "FSDP: MixedPrecision over fp32 shards"},
    {Precision::bf16, "bf16", "bf16 mixed precision, as fp16"},
    {Precision::amp_fp16, "amp-fp16",
     "PyTorch autocast: fp32 weights and gradients, fp16 compute (dp, ddp)"},
    {Precision::amp_bf16, "amp-bf16", "PyTorch autocast with bf16 compute (dp, ddp)"},
}};

inline constexpr std::array<NamedValue<Optimizer>, 5> kOptimizers{{
    {Optimizer::adam, "adam", "Adam: fp32 first and second moments"},
    {Optimizer::adamw, "adamw", "AdamW: fp32 first and second moments"},
    {Optimizer::sgd, "sgd", "SGD without momentum: no state"},
    {Optimizer::sgd_momentum, "sgd-momentum", "SGD with momentum: one fp32 buffer"},
    {Optimizer::adam8bit, "adam8bit", "8-bit Adam (bitsandbytes): int8 moments + block scales"},
}};

inline constexpr std::array<NamedValue<Strategy>, 9> kStrategies{{
    {Strategy::dp, "dp", "single-process DataParallel (replicas on one node, rank 0 reduces)"},
    {Strategy::ddp, "ddp", "DistributedDataParallel (replicated, bucketed all-reduce)"},
    {Strategy::zero1, "zero1", "ZeRO-1: optimizer states and master weights sharded"},
    {Strategy::zero2, "zero2", "ZeRO-2: + gradients sharded"},
    {Strategy::zero3, "zero3", "ZeRO-3: + parameters sharded, gathered per unit"},
    {Strategy::fsdp_full, "fsdp-full", "FSDP FULL_SHARD (as ZeRO-3)"},
    {Strategy::fsdp_grad_op, "fsdp-grad-op", "FSDP SHARD_GRAD_OP (as ZeRO-2)"},
    {Strategy::fsdp_hybrid, "fsdp-hybrid", "FSDP HYBRID_SHARD: shard in node, replicate across"},
    {Strategy::fsdp_no_shard, "fsdp-no-shard", "FSDP NO_SHARD (replicated like DDP)"},
}};

inline constexpr std::array<NamedValue<Offload>, 3> kOffloads{{
    {Offload::none, "none", "everything on the GPU"},
    {Offload::optimizer, "optimizer", "optimizer states and fp32 master weights in host memory"},
    {Offload::optimizer_and_params, "optimizer+params", "parameters too (ZeRO-3 / FSDP)"},
}};

inline constexpr std::array<NamedValue<Checkpointing>, 3> kCheckpointings{{
    {Checkpointing::none, "none", "every activation kept for backward"},
    {Checkpointing::selective, "selective",
     "attention core recomputed (Korthikanti et al.); fsdp2 layouts: torchtitan's per-op policy"},
    {Checkpointing::full, "full", "only each layer's input kept; layers recomputed"},
}};

inline constexpr std::array<NamedValue<Attention>, 3> kAttentions{{
    {Attention::flash, "flash",
     "FlashAttention / PyTorch SDPA kernels: no s^2 scores, an fp32 log-sum-exp kept"},
    {Attention::eager, "eager",
     "scores materialised in 16 bits with a fused softmax (Megatron; Korthikanti et al.)"},
    {Attention::hf_eager, "hf-eager",
     "Hugging Face eager attention: fp32 softmax output and 16-bit probabilities kept, K and V "
     "repeated to every query head"},
}};

// How the optimizer step runs on the GPU. `fused` is one kernel pass over the parameters
// (torch.optim's fused=True, DeepSpeed's and Apex/Transformer Engine's FusedAdam): it reads and
// writes the parameter and each state and reads the gradient once. `foreach` is torch.optim's
// multi-tensor path, PyTorch's default on CUDA when neither flag is given
// (torch/optim/optimizer.py, _default_to_fused_or_foreach): one kernel per element-wise op,
// each reading and writing whole tensor lists; a for-loop step makes the same passes tensor by
// tensor. `framework` is what the strategy's framework does by default.
enum class OptimizerImpl { framework, fused, foreach, for_loop };

inline constexpr std::array<NamedValue<OptimizerImpl>, 4> kOptimizerImpls{{
    {OptimizerImpl::framework, "framework",
     "the framework's default: torch.optim's foreach for dp, ddp and FSDP; fused under DeepSpeed "
     "ZeRO, Megatron-LM and torchtitan"},
    {OptimizerImpl::fused, "fused", "one fused kernel (fused=True, FusedAdam)"},
    {OptimizerImpl::foreach, "foreach",
     "torch.optim's multi-tensor ops, PyTorch's default on CUDA"},
    {OptimizerImpl::for_loop, "for-loop",
     "tensor by tensor (foreach=False; transformers' own AdamW before 4.x's adamw_torch): "
     "foreach's passes, one tensor's temporaries at a time"},
}};

// How a block's non-GEMM work runs. `eager` is PyTorch eager mode running the model's module
// code op by op, as Hugging Face transformers' modules do without torch.compile: every
// element-wise op, cast and norm step is its own kernel, and under torch.autocast the residual
// stream, the norms and autocast's fp32 ops (pow, rsqrt, the loss) stay in fp32, so the 16-bit
// outputs of the Linears are widened and mixed with fp32 on the way. `fused` is what
// Megatron-LM, Transformer Engine and FlashAttention's training kernels run: fused norms,
// activations, bias-dropout-add, a 16-bit residual. `framework`: eager under autocast
// (amp-fp16, amp-bf16), fused otherwise.
enum class LayerKernels { framework, fused, eager };

// How a PyTorch training loop clears the gradients after the optimizer step:
// zero_grad(set_to_none=True), the default since PyTorch 2.0 (and Hugging Face's Trainer with
// it), frees them, so the next step allocates each one when backward reaches it; `zeros`
// (set_to_none=False, the default before 2.0) keeps them allocated, filled with zeros.
enum class ZeroGrad { set_to_none, zeros };

inline constexpr std::array<NamedValue<ZeroGrad>, 2> kZeroGrads{{
    {ZeroGrad::set_to_none, "set-to-none",
     "zero_grad(set_to_none=True), PyTorch 2.0 and later: the gradients are freed"},
    {ZeroGrad::zeros, "zeros",
     "zero_grad(set_to_none=False), PyTorch before 2.0: the gradients stay allocated"},
}};

inline constexpr std::array<NamedValue<LayerKernels>, 3> kLayerKernels{{
    {LayerKernels::framework, "framework", "eager under autocast (amp-*), fused otherwise"},
    {LayerKernels::fused, "fused",
     "fused norms, activations and bias-dropout-add (Megatron-LM, Transformer Engine, "
     "FlashAttention's training kernels, torch.compile)"},
    {LayerKernels::eager, "eager",
     "PyTorch eager mode: one kernel per op of the module code (Hugging Face transformers); "
     "with autocast, an fp32 residual stream; with fp32, bf16 or fp16, every tensor of that "
     "type (bf16: FSDP2's MixedPrecisionPolicy, model.to(bfloat16))"},
}};

// Which fused attention kernel runs under Attention::flash. `framework` is the one the
// training framework calls: PyTorch's scaled_dot_product_attention (its flash back end,
// FlashAttention-2) for the data-parallel strategies and FSDP2 layouts, Transformer Engine's
// cuDNN fused attention for Megatron-LM layouts. The others name a kernel a run chose itself.
enum class AttentionKernel { framework, flash_attn_1, flash_attn_2, cudnn, flash_attn_triton };

inline constexpr std::array<NamedValue<AttentionKernel>, 5> kAttentionKernels{{
    {AttentionKernel::framework, "framework",
     "the framework's own: PyTorch SDPA's FlashAttention-2, or cuDNN under Megatron-LM"},
    {AttentionKernel::flash_attn_1, "flash-attn-1", "FlashAttention (Dao et al. 2022), CUDA"},
    {AttentionKernel::flash_attn_2, "flash-attn-2", "FlashAttention-2 (Dao 2023), CUDA"},
    {AttentionKernel::cudnn, "cudnn", "cuDNN's fused attention (Transformer Engine, SDPA cudnn)"},
    {AttentionKernel::flash_attn_triton, "flash-attn-triton",
     "the Triton FlashAttention of 2022 (llm-foundry attn_impl=triton)"},
}};

// FP8 (or FP4) GEMMs in the transformer blocks' Linear layers on top of bf16 mixed precision,
// as Transformer Engine (Megatron-LM's --fp8-recipe) and torchao (torchtitan's float8
// converter) run them: each Linear's input, weight and output gradient are quantized and the
// GEMM runs at the GPU's FP8 peak; attention, norms, the embedding, the LM head and the
// optimizer stay as they were. The recipes differ in their scales:
//   delayed     one scale per tensor from an amax history, the amax taken in the cast kernel
//   tensorwise  one scale per tensor from the current amax: a pass to find it, then the cast
//   rowwise     one scale per row (torchao); the amax and cast in one pass per row
//   blockwise   1 x 128 activation and 128 x 128 weight blocks (DeepSeek-V3's recipe)
//   mxfp8       32-element blocks with E8M0 scales, native on Blackwell tensor cores
enum class Fp8Recipe { none, delayed, tensorwise, rowwise, blockwise, mxfp8 };

inline constexpr std::array<NamedValue<Fp8Recipe>, 6> kFp8Recipes{{
    {Fp8Recipe::none, "none", "no FP8: the GEMMs run in the precision's own type"},
    {Fp8Recipe::delayed, "delayed", "per-tensor scales from an amax history (TE's default)"},
    {Fp8Recipe::tensorwise, "tensorwise", "per-tensor scales from the current amax"},
    {Fp8Recipe::rowwise, "rowwise", "per-row scales (torchao rowwise)"},
    {Fp8Recipe::blockwise, "blockwise", "1x128 activation, 128x128 weight blocks (DeepSeek-V3)"},
    {Fp8Recipe::mxfp8, "mxfp8", "MXFP8: 32-element blocks, Blackwell tensor cores"},
}};

// Megatron-LM's selective recomputation (--recompute-granularity selective
// --recompute-modules, megatron/core/transformer/transformer_config.py): the parts of each
// block whose tensors backward rebuilds instead of keeping. Checkpointing::selective with
// the default set is Megatron-LM's default, core_attn (Korthikanti et al.'s selective
// recomputation); an empty set recomputes nothing.
//   core_attn       the attention core: its scores (eager) or log-sum-exp (fused) rebuilt
//   layernorm       the outputs of the norms before attention and the MLP (the inputs of the
//                   QKV or latent down-projections and of the MLP or router) discarded
//   mla_up_proj     latent attention's up-projections: every head's Q, K and V discarded
//   mlp             the dense MLP of each dense block rebuilt from its input
//   moe_act         the experts' activation function: its output and inner tensors
//                   discarded, only the up-projection's output kept
//   moe             the whole mixture-of-experts layer rebuilt, its token exchange included
//   shared_experts  the shared expert rebuilt from its input
enum class RecomputeModule { core_attn, layernorm, mla_up_proj, mlp, moe_act, moe, shared_experts };

inline constexpr std::array<NamedValue<RecomputeModule>, 7> kRecomputeModules{{
    {RecomputeModule::core_attn, "core_attn", "the attention core (scores or log-sum-exp)"},
    {RecomputeModule::layernorm, "layernorm", "the pre-attention and pre-MLP norms' outputs"},
    {RecomputeModule::mla_up_proj, "mla_up_proj", "latent attention's up-projected Q, K and V"},
    {RecomputeModule::mlp, "mlp", "the dense MLP of dense blocks"},
    {RecomputeModule::moe_act, "moe_act", "the experts' activation function"},
    {RecomputeModule::moe, "moe", "the whole mixture-of-experts layer, all-to-alls included"},
    {RecomputeModule::shared_experts, "shared_experts", "the shared expert"},
}};

// A set of RecomputeModules; by default Megatron-LM's {core_attn}.
struct RecomputeModules {
  unsigned bits = 1U << static_cast<unsigned>(RecomputeModule::core_attn);
  static RecomputeModules empty() { return RecomputeModules{0}; }
  bool has(RecomputeModule m) const { return (bits >> static_cast<unsigned>(m) & 1U) != 0; }
  void add(RecomputeModule m) { bits |= 1U << static_cast<unsigned>(m); }
  bool is_default() const { return bits == RecomputeModules{}.bits; }
  bool operator==(const RecomputeModules&) const = default;
};

// Which tensors Checkpointing::selective rebuilds:
//   modules  Megatron-LM's: those of the RecomputeModules (by default the attention core)
//   per_op   torchtitan's per-op policy (--activation_checkpoint.mode selective
//            --activation_checkpoint.selective_ac_option op; torchtitan/distributed/
//            activation_checkpoint.py, and in 2024 parallelisms/parallelize_llama.py): each
//            block keeps its input and the outputs of its matrix multiplies, of its fused
//            attention kernel and of its reduce-scatters, except every second aten.mm of the
//            block's forward in call order; backward reruns the rest of the forward -- the
//            element-wise ops, the all-gathers, those GEMMs (for a Llama block the K, output
//            and up projections), the router and the routed experts' grouped GEMMs (not in the
//            saved list). FP8 Linears run as torch._scaled_mm, which the list saves and the
//            every-second rule, counting aten.mm alone, never recomputes.
enum class SelectivePolicy { modules, per_op };

// "core_attn,moe_act" in the table's order; "none" for the empty set.
std::string text_of(RecomputeModules m);
// A comma-separated list of module names, or "none"; throws dtplan::Error naming the unknown,
// repeated or empty name (the caller names the input).
RecomputeModules parse_recompute_modules(std::string_view text);

// Name of a value; parse throws dtplan::Error naming `what` and the known names.
std::string_view name_of(Fp8Recipe v);
Fp8Recipe parse_fp8_recipe(std::string_view text);
std::string_view name_of(Precision v);
std::string_view name_of(Optimizer v);
std::string_view name_of(Strategy v);
std::string_view name_of(Offload v);
std::string_view name_of(Checkpointing v);
std::string_view name_of(Attention v);
std::string_view name_of(AttentionKernel v);
std::string_view name_of(OptimizerImpl v);
std::string_view name_of(LayerKernels v);
std::string_view name_of(ZeroGrad v);

Precision parse_precision(std::string_view text);
Optimizer parse_optimizer(std::string_view text);
Strategy parse_strategy(std::string_view text);
Offload parse_offload(std::string_view text);
Checkpointing parse_checkpointing(std::string_view text);
Attention parse_attention(std::string_view text);
AttentionKernel parse_attention_kernel(std::string_view text);
OptimizerImpl parse_optimizer_impl(std::string_view text);
LayerKernels parse_layer_kernels(std::string_view text);
ZeroGrad parse_zero_grad(std::string_view text);
// Throws dtplan::Error (naming {attention-kernel} and {attention}) when a fused kernel is named
// for an attention that runs none.
void check_attention_kernel(Attention attention, AttentionKernel kernel);

std::vector<std::string> strategy_names();

// True for every precision that computes in 16 bits (activations are 16-bit).
bool is_mixed(Precision p);
// True for torch.autocast (amp-fp16, amp-bf16): fp32 weights, 16-bit compute.
bool is_autocast(Precision p);
// The 16-bit compute type of a mixed precision ("bf16" for bf16 and amp-bf16), else "fp32".
std::string_view compute_type(Precision p);

// How DeepSpeed ZeRO-3 gathers and reduces parameters; the code changed with the release
// (deepspeed/runtime/zero/stage3.py and partition_parameters.py):
//   coalesced (v0.6.0, March 2022, and later): a module's parameters in one flat all-gather,
//     prefetched on a side stream while the previous module computes;
//   per_parameter_list (v0.3.12, when ZeRO-3 arrived, to v0.5.4): one all-gather per
//     parameter tensor, issued after torch.cuda.synchronize() and waited for with another,
//     in torch.distributed's list form (ProcessGroupNCCL copies each rank's chunk out: one
//     copy per rank); gradients reduce-scattered per tensor in list form alike;
//   per_parameter_flat (v0.5.5 to v0.5.10): as above, but through _all_gather_base (one
//     flat output, no per-rank copies) where PyTorch has it.
enum class Zero3Gathers { coalesced, per_parameter_list, per_parameter_flat };

// The ZeRO-3 gathers of a DeepSpeed release "MAJOR.MINOR[.PATCH]"; throws dtplan::Error
// naming the version when it is malformed or older than ZeRO-3 (v0.3.12).
Zero3Gathers zero3_gathers_of_deepspeed(std::string_view version);
// The DeepSpeed releases that gather so: "v0.3.12 to v0.5.4", ...
std::string_view releases_of(Zero3Gathers v);

// The configuration one memory or time estimate is made for.
struct TrainingConfig {
  Strategy strategy = Strategy::ddp;
  Precision precision = Precision::bf16;
  Optimizer optimizer = Optimizer::adamw;
  OptimizerImpl optimizer_impl = OptimizerImpl::framework;
  LayerKernels layer_kernels = LayerKernels::framework;  // how non-GEMM work runs
  std::int64_t dp_size = 1;                              // data-parallel GPUs
  std::int64_t gpus_per_node = 8;  // sets the hybrid-sharding group and per-node host totals
  // GPUs per host where a node spans several (an NVL72 rack's 4-GPU trays): the ranks that
  // share one host's CPUs for an offloaded optimizer. 0: the node is one host.
  std::int64_t gpus_per_host = 0;
  std::int64_t micro_batch = 1;  // samples per GPU per micro-step
  std::int64_t seq_len = 0;      // tokens per sample; 0 = the model's maximum positions
  Checkpointing checkpointing = Checkpointing::none;
  RecomputeModules recompute_modules;  // what selective checkpointing rebuilds
  SelectivePolicy selective_policy = SelectivePolicy::modules;  // whose selective policy
  // Full checkpointing of every Nth block only (torchtitan's layer-wise selective_ac_option
  // "N": a process's blocks counted in order, the Nth, 2Nth, ... wrapped), the others keeping
  // every activation; 1: every block.
  std::int64_t checkpoint_every = 1;
  Attention attention = Attention::flash;
  AttentionKernel attention_kernel = AttentionKernel::framework;  // Attention::flash only
  Fp8Recipe fp8 = Fp8Recipe::none;  // FP8 Linear GEMMs on top of bf16 or fp16 mixed precision
  Offload offload = Offload::none;
  bool grad_bucket_view = false;                   // DDP gradient_as_bucket_view=True
  ZeroGrad zero_grad = ZeroGrad::set_to_none;      // PyTorch strategies: gradients between steps
  std::int64_t bucket_cap_bytes = 25LL * 1048576;  // DDP bucket_cap_mb default 25
  bool fp32_grad_accumulation = false;             // Megatron-style fp32 main_grad buffer
  std::int64_t grad_accum = 1;                     // micro-steps per optimizer step
  bool no_sync = true;  // gradients synchronised in the last micro-step only
  Zero3Gathers zero3_gathers = Zero3Gathers::coalesced;  // strategy zero3 only
};

}  // namespace dtplan
