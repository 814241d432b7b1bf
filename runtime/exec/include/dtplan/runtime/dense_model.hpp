// Forward and backward of the dense stack (cost/dense_stack.hpp) on a Device, one unit at a
// time, against parameter and gradient pointers the caller provides -- so the same code runs
// replicated (DDP), on gathered units (ZeRO-3) or in a single process. Activations of one
// micro-step are kept in buffers allocated once (MemoryComponent::activations), backward's
// temporaries in scratch buffers (MemoryComponent::buffers).
//
// A unit's parameters, weights out x in row-major as torch.nn.Linear keeps them:
//   embedding: E[vocab x hidden]          head (untied): W[vocab x hidden]
//   block:     Wqkv, bqkv, Wo, bo, [Wgate, bgate], Wup, bup, Wdown, bdown  (biases if any)
#pragma once

#include <cstdint>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/runtime/device.hpp"

namespace dtplan::runtime {

class DenseModel {
 public:
  DenseModel(const cost::DenseStack& stack, Device& device, std::int64_t tokens);

  // x0 = E[ids].
  void forward_embedding(const float* table, const std::int32_t* ids);
  // x(l+1) = block l (x(l)) with the block's parameters at p.
  void forward_block(std::int64_t layer, const float* p);
  // logits = x(L) W^T, the summed loss; logits become d loss / d logits x grad_scale.
  double forward_head(const float* w, const std::int32_t* targets, float grad_scale);
  // From d logits: d x(L) and dW += ...
  void backward_head(const float* w, float* dw);
  // From d x(l+1): d x(l) and the block's gradients added into dp.
  void backward_block(std::int64_t layer, const float* p, float* dp);
  // dE[ids] += d x(0).
  void backward_embedding(const std::int32_t* ids, float* dtable);

  // Deterministic initial values of unit `unit` (the layout of ParamLayout/units_of):
  // weights uniform with standard deviation 0.02 (output projections / sqrt(2 layers), as
  // GPT-2 does), biases zero; the same for any world size.
  static std::vector<float> initial_unit(const cost::DenseStack& stack, std::int64_t unit,
                                         std::uint64_t seed);

 private:
  const cost::DenseStack& s_;
  Device& dev_;
  std::int64_t tokens_;
  std::vector<Buffer> x_;  // x(0) .. x(L)
  std::vector<Buffer> attn_, mid_, up_, gate_, act_;
  Buffer logits_;
  Buffer qkv_, dx_, dmid_, dact_, dup_, dgate_, dattn_;
};

}  // namespace dtplan::runtime
