// Compute time of one micro-step on one GPU, from FLOPs and bytes moved: GEMMs at the GPU's
// dense peak for the precision times a calibratable efficiency (with a roofline on memory
// bandwidth and a fixed per-kernel cost, so small GEMMs are slow), attention at its own
// efficiency, element-wise work and the optimizer step at HBM bandwidth.
//
// Model FLOPs follow PaLM (Chowdhery et al. 2022, App. B): per token 6 N + 12 L q s, with N the
// matmul parameters (blocks and the LM head) and the attention term counted without causal
// masking; they give MFU. Hardware FLOPs add what checkpointing recomputes; they give HFU.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cost {

// One fused attention kernel's forward + backward speed on one GPU architecture at one head
// dimension, measured by a kernel benchmark and written as
//     efficiency(s) = plateau_efficiency x s / (s + half_efficiency_tokens):
// besides its s^2 work, every (sequence, head) pays work linear in s (loading its query rows and
// writing its outputs, the softmax statistics, the partly masked tiles on a causal diagonal),
// which equals the s^2 work at s = half_efficiency_tokens. s is the length of the query and key
// blocks one kernel call sees (the sequence, or its chunk under context parallelism).
struct AttentionCurve {
  AttentionKernel kernel = AttentionKernel::flash_attn_2;
  std::string architecture;           // as GpuSpec::architecture ("ampere", "hopper")
  double head_dim = 0;                // the curve holds at this head dimension
  double plateau_efficiency = 0;      // of the dense peak, as s grows without bound
  double half_efficiency_tokens = 0;  // s at which half the plateau is reached
  // The forward alone, where the benchmark timed it (0: unknown, the forward runs at the
  // forward + backward curve). It sets what recomputation costs; the backward is the rest.
  double forward_plateau_efficiency = 0;
  double forward_half_efficiency_tokens = 0;
  std::string source;  // where the curve was measured
};

// data/compute.json, documented in docs/step-time-model.md; calibration refits them.
struct ComputeConstants {
  double gemm_efficiency = 0;                // achieved fraction of dense peak for large GEMMs
  double hopper_gemm_efficiency = 0;         // the same on a Hopper GPU; 0: gemm_efficiency
  double fp8_gemm_efficiency = 0;            // achieved fraction of the FP8 dense peak, large GEMMs
  double fp8_blockwise_gemm_efficiency = 0;  // the same with 1x128 / 128x128 block scales
  double mxfp8_gemm_efficiency = 0;          // the same with MXFP8's 1x32 scales (Blackwell)
  // A 16-bit GEMM on a Hopper GPU whose K or N (the operands' and the result's leading
  // dimensions) is not a multiple of 8 elements, 16 bytes: cuBLAS runs kernels without 16-byte
  // loads (a GPT-2 vocabulary of 50257). Of dense peak; 0: no slower than an aligned GEMM.
  double hopper_odd_gemm_forward_efficiency = 0;     // K or N odd: a Linear's forward product
  double hopper_odd_gemm_gradient_efficiency = 0;    // K or N odd: its two gradient products
  double hopper_even_unaligned_gemm_efficiency = 0;  // K and N even, one not a multiple of 8
  // The maximum achievable matmul fraction (MAMF over dense peak) of the GPU each bf16 GEMM
  // efficiency above was fitted on; a GPU with its own MAMF scales the efficiency by the ratio
  // of the two (A100 SXM for gemm_efficiency, H100 SXM for hopper_gemm_efficiency). 0: no
  // scaling.
  double gemm_reference_mamf_fraction = 0;
  double hopper_gemm_reference_mamf_fraction = 0;
  // Of dense peak: eager attention's batched GEMMs, and a framework's fused attention on a GPU
  // architecture with no measured curve in attention_kernels.
  double attention_efficiency = 0;
  double memory_efficiency = 0;  // achieved fraction of HBM bandwidth
  // Of HBM bandwidth, PyTorch's element-wise kernels whose operands differ in type (they load
  // through a cast, unvectorized): a 16-bit to fp32 copy, and an fp32 + 16-bit binary op. They
  // price eager autocast's kernels (LayerKernels::eager); 0: memory_efficiency.
  double widening_copy_memory_efficiency = 0;
  double mixed_type_memory_efficiency = 0;
  // PyTorch's memory-efficient attention kernel in fp32 (what scaled_dot_product_attention runs
  // for --attention flash in fp32): fractions of the fp32 peak, forward and backward (the
  // backward doing 2.5 x the forward's work). 0: the flash curves at the fp32 peak.
  double fp32_attention_forward_efficiency = 0;
  double fp32_attention_backward_efficiency = 0;
  double kernel_overhead_s = 0;              // fixed time per kernel (launch, tail, small tiles)
  double elementwise_kernels_per_layer = 0;  // forward; backward launches twice as many
  // Host time per kernel an eager PyTorch step launches (LayerKernels::eager): the Python of a
  // transformers forward (module calls, views, the op's dispatch and launch), and autograd's
  // C++ engine per backward op. A phase takes max(GPU time, kernels x this). 0: not modelled.
  double eager_forward_host_s_per_kernel = 0;
  double autograd_backward_host_s_per_kernel = 0;
  // PyTorch FSDP's own host work in an eager step, beyond the modules' launches: its hooks
  // around each wrapped module (the blocks and the root) in forward, and in backward (gather
  // again, reduce-scatter, the gradients' casts and copies), and torch.optim's foreach step
  // dispatched on DTensors, per parameter tensor. Added to the host's side of max(GPU time,
  // host time) of each phase. 0: not modelled.
  double fsdp_forward_host_s_per_module = 0;
  double fsdp_backward_host_s_per_module = 0;
  double fsdp_optimizer_host_s_per_tensor = 0;
  double overlap_compute_slowdown = 0;   // compute slowdown while communication overlaps it
  double cpu_optimizer_bytes_per_s = 0;  // host memory traffic of a CPU optimizer step
  double host_transfer_efficiency = 0;   // achieved fraction of the GPU's PCIe link
  std::vector<AttentionCurve> attention_kernels;  // measured fused-attention curves
};

ComputeConstants load_compute_constants(const std::filesystem::path& path);
// "key=value"; throws naming the key or value when either is wrong.
void apply_compute_override(ComputeConstants& k, std::string_view assignment);
// The keys of the scalar constants (those --compute key=value can set).
std::vector<std::string> compute_constant_keys();
// {"gemm_efficiency": ..., ..., "attention_kernels": [...]}, every constant by its key.
nlohmann::json to_json(const ComputeConstants& k);

struct ComputeTime {
  double forward_s = 0;
  double backward_s = 0;             // including recomputation
  double recompute_s = 0;            // the part of backward_s spent recomputing
  double model_flops = 0;            // per micro-step per GPU, forward + backward, PaLM convention
  double hardware_flops = 0;         // + recomputed forward work
  double gemm_s = 0;                 // forward + backward time in GEMMs
  double attention_s = 0;            // ... in attention kernels
  double attention_forward_s = 0;    // the forward part of attention_s
  double attention_recompute_s = 0;  // the recomputed part of attention_s
  double elementwise_s = 0;          // ... in element-wise kernels
  double host_wait_s = 0;            // ... waiting for the host to launch eager kernels
  // Eager PyTorch only: the kernels the modules launch (the inventory, pace_by_host), and the
  // host time of FSDP's hooks (forward and backward, recomputation included).
  double eager_forward_launches = 0;
  double eager_backward_launches = 0;
  double fsdp_hooks_host_s = 0;
  double parameter_tensors = 0;  // of the model (or stage) priced, as its modules register them
  std::int64_t layers = 0;       // units whose compute the communication overlaps with
};

// Who provides the fused attention kernel: PyTorch (scaled_dot_product_attention's flash back
// end, FlashAttention-2) or Transformer Engine (cuDNN's fused attention), as Megatron-LM runs.
enum class AttentionLibrary { pytorch, transformer_engine };

// The fraction of the s x s query-key pairs attention computes over a sequence of `s` tokens:
// 1 without a causal mask, 1/2 with one (the fused kernel skips blocks above the diagonal),
// (w (w + 1) / 2 + (s - w) w) / s^2 under a sliding window of w < s tokens; averaged over the
// layers where only some use the window.
double attended_fraction(const TransformerSpec& t, double s);
// The keys each query counts in PaLM's model FLOPs, averaged over the layers: s, or min(s, w)
// on the layers with a sliding window of w tokens.
double attended_keys(const TransformerSpec& t, double s);
// The share of `layers` blocks that full checkpointing of every Nth one wraps: floor(layers /
// every) / layers (torchtitan counts a process's blocks in order); throws a FieldError naming
// checkpoint_every when `every` < 1.
double checkpointed_share(std::int64_t layers, std::int64_t every);

// The kernel that runs: `requested`, or the library's own for AttentionKernel::framework.
AttentionKernel kernel_of(AttentionKernel requested, AttentionLibrary lib);

// The fraction of `gpu`'s dense peak a fused attention kernel reaches, forward + backward, on
// query and key blocks of `seq_tokens` tokens with heads of `head_dim`: the curve of
// attention_kernels for the kernel and the GPU's architecture (interpolated linearly between
// the head dimensions measured, held at the nearest outside them). With no curve, the
// framework's own kernel runs at attention_efficiency; a kernel the user named throws
// dtplan::Error naming the kernel and the architecture.
double attention_efficiency(const GpuSpec& gpu, const ComputeConstants& k,
                            AttentionKernel requested, AttentionLibrary lib, double seq_tokens,
                            double head_dim);
// The same for the forward alone: the curve's forward where it has one, else the above.
double attention_forward_efficiency(const GpuSpec& gpu, const ComputeConstants& k,
                                    AttentionKernel requested, AttentionLibrary lib,
                                    double seq_tokens, double head_dim);

// One micro-step (forward and backward) of micro_batch samples on one GPU.
ComputeTime estimate_compute(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                             const ComputeConstants& k,
                             AttentionLibrary lib = AttentionLibrary::pytorch);

// The forward GEMM times of one block's Linear groups on one micro-batch of `c` (b x s tokens)
// as the block's compute prices them: the query, key and value projections, the attention's
// output projection, the MLP's first Linear(s) (gate and up) and its last; the MLP's are 0 for
// a mixture of experts (its experts are grouped GEMMs). Each backward product (input and
// weight gradients) takes about as long again.
struct BlockLinearTimes {
  double qkv_s = 0, proj_s = 0, fc1_s = 0, fc2_s = 0;
};
BlockLinearTimes block_linear_times(const TransformerSpec& t, const TrainingConfig& c,
                                    const GpuSpec& gpu, const ComputeConstants& k);

// How much slower `slow` computes one micro-step of `c` than `gpu` (the pace a slower GPU in
// the set sets for every rank of a synchronous step): the ratio of their forward + backward
// times, at least 1 when `slow` is the slower one.
double compute_slowdown(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                        const GpuSpec& slow, const ComputeConstants& k);

// The optimizer step over `elements` parameters on the GPU (memory-bound), or on the host
// when offloaded: cpu_optimizer_bytes_per_s is the server's memory bandwidth, which the ranks
// of a node (min(dp, GPUs per node); one for DataParallel's single process) share, stepping
// at the same time.
double optimizer_time(std::int64_t elements, const TrainingConfig& c, const GpuSpec& gpu,
                      const ComputeConstants& k);
// Whether the step runs as torch.optim's multi-tensor (foreach) ops, and for which optimizer:
// only Adam and AdamW are priced pass by pass; the others as a fused step.
struct ForeachStep {
  bool on = false;
  Optimizer optimizer = Optimizer::adamw;
};
// The same under an explicit numeric recipe (a layout's framework), `ranks_on_host` ranks of
// a node stepping on its CPUs at once when offloaded.
double optimizer_time(std::int64_t elements, const NumericRecipe& r, Offload offload,
                      const GpuSpec& gpu, const ComputeConstants& k, std::int64_t ranks_on_host = 1,
                      ForeachStep foreach_step = {});
// The host's time of an eager FSDP optimizer step: torch.optim's foreach ops on DTensors
// dispatch tensor by tensor, fsdp_optimizer_host_s_per_tensor for each parameter tensor the
// model registers (every rank holds a shard of each). 0 outside eager layers, FSDP, a foreach
// step on the GPU, or a transformer.
double fsdp_optimizer_host_s(const ModelDesc& m, const TrainingConfig& c,
                             const ComputeConstants& k);
// The parameter tensors a transformer's modules register (layer_parameter_tensors of every
// block, root_parameter_tensors).
double parameter_tensor_count(const TransformerSpec& t);
// Bytes the step reads and writes per parameter: 28 for a fused AdamW over fp32 weights and
// states with bf16 gradients and a bf16 copy; 80 for torch.optim's foreach AdamW with fp32
// gradients (docs/step-time-model.md).
double optimizer_bytes_per_param(const NumericRecipe& r, ForeachStep foreach_step);
// Whether the configuration's optimizer step runs as foreach ops (or for-loop, the same passes):
// --optimizer-impl, or the framework's default (torch.optim's foreach for dp, ddp and FSDP;
// DeepSpeed's fused Adam for ZeRO).
bool foreach_optimizer(const TrainingConfig& c);
// The kernels an Adam or AdamW step was priced as running: fused, foreach, or for-loop (given
// as --optimizer-impl: foreach's passes, one tensor's temporaries at a time); nullopt for the
// other optimizers, priced as one fused pass whatever runs them.
std::optional<OptimizerImpl> priced_optimizer_impl(const TrainingConfig& c);

// The achieved fraction of dense peak of large GEMMs on `gpu` in precision `p`, or in FP8 with
// `fp8`: the fitted constant, scaled by the GPU's measured maximum over the reference GPU's
// where both are known (bf16/fp16 and FP8 tensor-core GEMMs; fp32 is not scaled).
double gemm_efficiency_of(const GpuSpec& gpu, const ComputeConstants& k, Precision p,
                          Fp8Recipe fp8 = Fp8Recipe::none);

// Bytes per second of the GPU's link to its host, as transfers achieve it: PCIe (generation x
// lanes), or the catalogue's host link (NVLink-C2C) where it states one.
double host_link_Bps(const GpuSpec& gpu, const ComputeConstants& k);
// One PCIe lane's data rate per direction, in bytes/s, after line coding.
double pcie_lane_Bps(std::int64_t generation);

}  // namespace dtplan::cost
