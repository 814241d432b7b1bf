// The element-wise work of one transformer block as eager PyTorch runs it under torch.autocast:
// op by op, with the data types autocast leaves between the Linears.
#pragma once

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

// Whether the blocks' element-wise work is priced op by op as eager PyTorch under autocast
// runs it: under amp-fp16 or amp-bf16 unless --layer-kernels fused. Throws dtplan::Error naming
// {layer-kernels} when eager is asked for without autocast (only autocast's dtype flow is
// modelled).
bool eager_autocast_layers(const TrainingConfig& c);

// True when eager_autocast_block prices `t`'s blocks: dense MLP, no latent attention.
bool eager_inventory_covers(const TransformerSpec& t);

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

}  // namespace dtplan::cost
