// Host launchers for the CUDA kernels of CudaDevice (kernels.cu). Each enqueues its work on
// `stream` and returns at once; the caller checks cudaGetLastError() after the launch. All
// matrices are row-major fp32, sizes are element counts. Semantics are those documented on
// dtplan::runtime::Device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "dtplan/runtime/dropout.hpp"

namespace dtplan::runtime::kernels {

// Reductions write one partial per block into `partials` (kReduceBlocks doubles of device
// memory), then sum them in a fixed order into `*result`: the same input always gives the
// same bits, whatever the scheduling of blocks.
inline constexpr int kReduceBlocks = 256;

void add_bias(cudaStream_t stream, float* y, const float* bias, std::int64_t rows,
              std::int64_t cols);
void bias_grad(cudaStream_t stream, const float* dy, float* grad_bias, std::int64_t rows,
               std::int64_t cols);
void gelu(cudaStream_t stream, const float* x, float* y, std::int64_t n);
void gelu_backward(cudaStream_t stream, const float* x, const float* dy, float* dx, std::int64_t n);
void swiglu(cudaStream_t stream, const float* g, const float* u, float* y, std::int64_t n);
void swiglu_backward(cudaStream_t stream, const float* g, const float* u, const float* dy,
                     float* dg, float* du, std::int64_t n);
// Attention's geometry (dtplan::runtime::AttentionShape's fields).
struct Heads {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
};
// Dropout of the probabilities: mask[batch, heads, seq, seq] (null: none) and the kept
// elements' factor.
struct ProbsDropout {
  const std::uint8_t* mask;
  float scale;
};
void attention(cudaStream_t stream, const float* qkv, float* probs, float* out, const Heads& a,
               const ProbsDropout& drop);
void attention_backward(cudaStream_t stream, const float* qkv, const float* out, const float* dout,
                        float* probs, float* dqkv, const Heads& a, const ProbsDropout& drop);
void dropout_mask(cudaStream_t stream, std::uint8_t* mask, const DropoutDraw& d);
void apply_dropout(cudaStream_t stream, float* x, const std::uint8_t* mask, std::int64_t n,
                   float scale);
void norm(cudaStream_t stream, const float* x, const float* gamma, const float* beta, float* y,
          float* stats, std::int64_t rows, std::int64_t cols, float eps);
void norm_backward(cudaStream_t stream, const float* x, const float* gamma, const float* stats,
                   const float* dy, float* dx, float* dgamma, float* dbeta, std::int64_t rows,
                   std::int64_t cols);
void rotary(cudaStream_t stream, float* qkv, const Heads& a, double theta, bool inverse);
void add_positions(cudaStream_t stream, float* x, const float* table, std::int64_t tokens,
                   std::int64_t seq, std::int64_t dim);
void positions_backward(cudaStream_t stream, const float* dx, float* dtable, std::int64_t tokens,
                        std::int64_t seq, std::int64_t dim);
void embedding(cudaStream_t stream, const std::int32_t* ids, const float* table, float* out,
               std::int64_t tokens, std::int64_t dim, std::int64_t first_id, std::int64_t held);
void embedding_backward(cudaStream_t stream, const std::int32_t* ids, const float* dout,
                        float* grad_table, std::int64_t tokens, std::int64_t dim,
                        std::int64_t first_id, std::int64_t held);
// Summed loss into *result (device double); logits become (softmax - onehot) * grad_scale.
void softmax_cross_entropy(cudaStream_t stream, float* logits, const std::int32_t* targets,
                           std::int64_t tokens, std::int64_t vocab, float grad_scale,
                           double* partials, double* result);
void axpy(cudaStream_t stream, float alpha, const float* x, float* y, std::int64_t n);
void scale(cudaStream_t stream, float* x, float alpha, std::int64_t n);
void fill(cudaStream_t stream, float* x, float value, std::int64_t n);
void sum_squares(cudaStream_t stream, const float* x, std::int64_t n, double* partials,
                 double* result);
// Sets *flag to 1 when some element is inf or NaN (the caller zeroes it first).
void flag_non_finite(cudaStream_t stream, const float* x, std::int64_t n, int* flag);
// bias_correction1/2 = 1 - beta^t, computed by the caller in double.
void adam(cudaStream_t stream, float* w, const float* g, float* m, float* v, std::int64_t n,
          float lr, float beta1, float beta2, float eps, float weight_decay, float bias_correction1,
          float bias_correction2);
void sgd(cudaStream_t stream, float* w, const float* g, float* buf, std::int64_t n, float lr,
         float momentum);

}  // namespace dtplan::runtime::kernels
