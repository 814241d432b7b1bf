// The element-wise work of one transformer block as eager PyTorch runs it: op by op, with the
// data types between the Linears that torch.autocast leaves (an fp32 residual stream) or that
// one type of weights and activations gives (fp32; bf16 or fp16 weights, as FSDP2's
// MixedPrecisionPolicy or model.to(bfloat16) make them).
#pragma once

#include <optional>

#include "dtplan/model/training.hpp"
#include "dtplan/model/transformer.hpp"

namespace dtplan::cost {

// Bytes moved by element-wise kernels, by the bandwidth class of the kernels that move them
// (data/measurements/h200-torch-profile: PyTorch's TensorIterator reaches different rates).
struct EagerTraffic {
  double same_type_bytes = 0;   // operands and result of one type: vectorized kernels
  double widening_bytes = 0;    // 16-bit to fp32 copies
  double mixed_type_bytes = 0;  // a 16-bit and an fp32 operand: the cast-on-load path
  double kernels = 0;
  EagerTraffic& operator+=(const EagerTraffic& o);
};

struct EagerBlock {
  EagerTraffic forward;
  EagerTraffic backward;
};

// The data types of an eager block: under autocast an fp32 residual stream and 16-bit Linears;
// without, every tensor of one type of element_bytes (4 fp32, 2 bf16 or fp16).
struct EagerFlow {
  bool autocast = false;
  double element_bytes = 4;  // without autocast: weights' and activations' type
  // The residual stream's element: what a block's input (a checkpoint) holds.
  double stream_bytes() const { return autocast ? 4 : element_bytes; }
};

// How the blocks' element-wise work is priced: op by op as eager PyTorch runs it (a value), or
// as fused kernels (none). Eager under amp-fp16 or amp-bf16 unless --layer-kernels fused; for
// fp32, bf16 and fp16 only when --layer-kernels eager names it. Throws dtplan::Error naming
// {layer-kernels} for eager with an FP8 recipe (its casts are Transformer Engine's, fused).
std::optional<EagerFlow> eager_layers(const TrainingConfig& c);

// The attention that runs for `c`: c.attention, except --attention flash in fp32, where no
// FlashAttention kernel exists and PyTorch's scaled_dot_product_attention takes its
// memory-efficient kernel (still Attention::flash: what it keeps is the same, its speed is
// fp32_attention_*_efficiency) or, for grouped key/value heads (transformers passes enable_gqa,
// which that kernel lacks), the math path: two batched GEMMs and a softmax whose probabilities
// it keeps, Attention::eager.
Attention attention_as_run(const TransformerSpec& t, const TrainingConfig& c);

// True when the eager inventory prices `t`'s blocks: dense MLP, no latent attention.
bool eager_inventory_covers(const TransformerSpec& t);

// One block of `t` on `tokens` tokens as `flow` runs it (eager_autocast_block or
// eager_uniform_block), and the bytes per token its autograd keeps.
EagerBlock eager_block(const TransformerSpec& t, double tokens, const EagerFlow& flow);
double eager_saved_bytes_per_token(const TransformerSpec& t, const EagerFlow& flow);

// The kernels eager PyTorch launches for one block of `t` as `flow` runs it: the element-wise
// inventory's, each Linear's GEMM (two in backward: the input's and the weight's gradients) and
// the attention kernel (one each way). The host spends its time per launch (ComputeConstants).
struct EagerLaunches {
  double forward = 0;
  double backward = 0;
};
EagerLaunches eager_block_launches(const TransformerSpec& t, const EagerFlow& flow);

// One block of `t` on `tokens` tokens in eager PyTorch under autocast with a 16-bit compute
// type: the fp32 residual stream and norms, autocast's casts of every Linear's input and
// weight, the activation as the module writes it, rotary embedding with fp32 cos and sin,
// dropout; and in backward the gradient of every one of those ops as autograd runs it. GEMMs
// and the attention kernel are not included.
EagerBlock eager_autocast_block(const TransformerSpec& t, double tokens);

// The bytes per token that autograd keeps for one such block's backward: each op's saved
// tensors as transformers' modules create them (fp32 norm inputs, every Linear's own 16-bit
// input copy, attention's inputs and output, the activation's intermediates, dropout masks).
// The attention kernel's per-row statistics are not included (they are its own term).
double eager_autocast_saved_bytes_per_token(const TransformerSpec& t);

// One block of `t` on `tokens` tokens in eager PyTorch with weights and activations of one type
// of `element_bytes`: no casts around the Linears; LlamaRMSNorm still computes in fp32, so a
// 16-bit stream is widened and narrowed around each norm. GEMMs and attention not included.
EagerBlock eager_uniform_block(const TransformerSpec& t, double tokens, double element_bytes);

// What autograd keeps per token for one such block: every tensor once (the three projections
// of the attention share one input), the norms' fp32 intermediates.
double eager_uniform_saved_bytes_per_token(const TransformerSpec& t, double element_bytes);

}  // namespace dtplan::cost
