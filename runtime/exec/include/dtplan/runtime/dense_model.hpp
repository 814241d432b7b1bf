// Forward and backward of the dense stack (cost/dense_stack.hpp) on a Device, one unit at a
// time, against parameter and gradient pointers the caller provides -- so the same code runs
// replicated (DDP), on gathered units (ZeRO-3) or in a single process. Activations of one
// micro-step are kept in buffers allocated once (MemoryComponent::activations), backward's
// temporaries in scratch buffers (MemoryComponent::buffers).
//
// Under 16-bit compute (stack.compute bf16 or fp16) the arithmetic is that of torch.autocast on
// these blocks, values held in fp32 buffers: a Linear reads its input and weights (and bias)
// rounded to the 16-bit type, accumulates in fp32 and rounds its output; in backward the
// gradient reaching a 16-bit tensor is rounded (the projections' outputs, the logits), and the
// input, weight and bias gradients are rounded before they are added to fp32 ones. Norms,
// softmax, the loss, rotary (rounded after) and the residual stream stay fp32, the weights,
// gradients and optimizer states too (autocast's recipe). Attention rounds as
// Device::attention says; SwiGLU as Device::swiglu; GELU's output and gradient are rounded.
//
// A unit's parameters, weights out x in row-major as torch.nn.Linear keeps them, in the order
// Hugging Face's GPT-2 and Llama declare them (biases and the norms' shifts where the model
// has them):
//   embedding: E[vocab x hidden], [P[max_positions x hidden]], [final norm if tied]
//   block:     norm1 (gamma, beta), Wqkv, bqkv, Wo, bo, norm2, [Wgate, bgate], Wup, bup,
//              Wdown, bdown
//   head (untied): W[vocab x hidden], [final norm]
//
// Under tensor parallelism (DenseStack::tp > 1) the stack is one rank's share and the model
// runs Megatron-LM's split (tensor_parallel.hpp) over the `tp` communicator: the embedding
// looks up the rank's vocabulary slice and the slices are summed (all-reduce); a row-parallel
// projection's partial output is summed before its bias, dropout and residual add; the input
// gradients of the column-parallel projections (QKV; gate and up) and of the head are summed
// before the norms' backward; the loss is vocab-parallel (Device::row_max, two all-reduces).
// Norms, the residual stream and the hidden dropout masks are whole and equal on every rank;
// a rank draws the attention-probability masks of its own heads.
#pragma once

#include <cstdint>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/device.hpp"

namespace dtplan::runtime {

class DenseModel {
 public:
  // `tp`: the tensor-parallel group, of stack.tp ranks (null when stack.tp is 1). The model
  // keeps a reference to `stack`, which must outlive it.
  DenseModel(const cost::DenseStack& stack, Device& device, std::int64_t tokens,
             Communicator* tp = nullptr);

  // The samples the next micro-step computes (numbered as make_batch numbers them), from which
  // its dropout masks are drawn (dropout.hpp); seed 0, step 0, sample 0 until set.
  void set_samples(std::uint64_t seed, std::int64_t step, std::int64_t first_sample);

  // x0 = E[ids] (+ P[position]).
  void forward_embedding(const float* table, const std::int32_t* ids);
  // x(l+1) = block l (x(l)) with the block's parameters at p.
  void forward_block(std::int64_t layer, const float* p);
  // logits = norm(x(L)) W^T, the summed loss; logits become d loss / d logits x grad_scale.
  // `w` is the head's unit (the embedding unit when tied).
  double forward_head(const float* w, const std::int32_t* targets, float grad_scale);
  // From d logits: d x(L), and the head unit's gradients added into dw.
  void backward_head(const float* w, float* dw);
  // From d x(l+1): d x(l) and the block's gradients added into dp; first reruns what the
  // stack's recomputation discarded (the block's forward, or its attention core).
  void backward_block(std::int64_t layer, const float* p, float* dp);
  // dE[ids] += d x(0) (and dP[position] += d x(0)).
  void backward_embedding(const std::int32_t* ids, float* dtable);

  // A pipeline stage (DenseStack::pp > 1) without the embedding receives x(0) into input(); one
  // without the head sends output(), x(L), and receives its gradient into output_grad() before
  // backward; after backward input_grad() holds d x(0) for the stage before.
  float* input() const { return x_.front().f(); }
  const float* output() const { return x_.back().f(); }
  float* output_grad() const { return dx_.f(); }
  const float* input_grad() const { return dx_.f(); }
  std::int64_t activation_elements() const { return tokens_ * s_.hidden; }

  // Deterministic initial values of unit `unit` (the layout of ParamLayout/units_of):
  // weights uniform with standard deviation 0.02 (output projections / sqrt(2 layers), as
  // GPT-2 does), biases and norm shifts zero, norm scales one; the same for any world size.
  static std::vector<float> initial_unit(const cost::DenseStack& stack, std::int64_t unit,
                                         std::uint64_t seed);

 private:
  AttentionShape shape() const;
  // The buffer set layer l uses: its own, or the one set that full recomputation reruns into
  // (probabilities: also the one set under selective recomputation).
  std::size_t slot(std::int64_t l) const;
  std::size_t probs_slot(std::int64_t l) const;
  const float* head_norm(const float* w) const;  // the final norm inside the head's unit
  float* head_input() const;                     // norm(x(L)), or x(L) without a final norm

  // Dropout: the draw of one mask of the micro-step, and the attention's (no mask when the
  // model has no attention dropout). dropped_grad: dy (rounded under 16-bit compute) passed
  // back through a hidden-sized mask into tmp_, or rounded_copy(dy) without one.
  DropoutDraw draw(std::int64_t layer, DropoutSite site, double p) const;
  AttentionDropout attention_dropout(std::int64_t l);
  void draw_attention_mask(std::int64_t l);
  const float* dropped_grad(const float* dy, const Buffer& mask);

  // 16-bit compute (cost::DenseStack::compute): every helper is the plain fp32 operation
  // otherwise. round: in place. gemm_weights: the unit's n parameters rounded into w16_.
  // rounded_copy: x rounded into tmp_.
  bool half() const;
  void round(float* x, std::int64_t n);
  const float* gemm_weights(const float* p, std::int64_t n);
  const float* rounded_copy(const float* x, std::int64_t n);
  // A Linear over the micro-step's tokens: y = r(x W^T + b); y = residual + r(x W^T + b)
  // (out = hidden; the projection dropped first where `mask` is not empty); dx = r(dy W), or dx +=
  // r(dy W); dW += r(dy^T x), db += r(colsum dy).
  void linear(const float* x, const float* w, const float* b, float* y, std::int64_t out,
              std::int64_t in);
  void linear_residual(const float* x, const float* w, const float* b, const float* residual,
                       float* y, std::int64_t in, const Buffer& mask);
  void input_grad(const float* dy, const float* w, float* dx, std::int64_t out, std::int64_t in,
                  bool accumulate);
  void weight_grad(const float* dy, const float* x, float* dw, float* db, std::int64_t out,
                   std::int64_t in);
  // Tensor parallelism (nothing at tp 1): x[n] summed over the group (then rounded under
  // 16-bit compute, as a 16-bit all-reduce leaves it); a row-parallel projection, y = residual
  // + drop(r(r(sum of the ranks' r(x W^T)) + b)); the vocab-parallel loss.
  void tp_sum(float* x, std::int64_t n);
  void row_parallel_residual(const float* x, const float* w, const float* b, const float* residual,
                             float* y, std::int64_t in, const Buffer& mask);
  double vocab_parallel_loss(const std::int32_t* targets, float grad_scale);
  std::int64_t first_id() const { return tp_rank_ * s_.vocab; }  // of this rank's slice

  const cost::DenseStack& s_;
  Device& dev_;
  std::int64_t tokens_;
  Communicator* tp_;
  std::int64_t tp_rank_ = 0;
  std::vector<Buffer> x_;  // x(0) .. x(L)
  // Per block (per slot): norm outputs and statistics, QKV after rotary, probabilities,
  // attention output, residual after attention, MLP pre-activations and activated output.
  std::vector<Buffer> ln1_, st1_, qkv_, probs_, attn_, mid_, ln2_, st2_, up_, gate_, act_;
  Buffer lnf_, stf_, logits_;
  Buffer dx_, dmid_, dln_, dact_, dup_, dgate_, dattn_, dqkv_, scratch_;
  // 16-bit compute only: one unit's rounded weights, one weight gradient before rounding;
  // one hidden-sized temporary (cost::mixed_precision_elements), also with hidden dropout.
  Buffer w16_, grad16_, tmp_;
  // Tensor parallelism only: the loss's row maxima and sums (tokens, 2 x tokens).
  Buffer top_, sums_;
  // Dropout masks (one byte an element): per slot the probabilities' (per probs slot) and
  // the two projections'; the embeddings'.
  std::vector<Buffer> drop_probs_, drop_attn_out_, drop_mlp_out_;
  Buffer drop_emb_;
  std::uint64_t seed_ = 0;
  std::int64_t step_ = 0, first_sample_ = 0;
};

}  // namespace dtplan::runtime
