// The CPU device's transformer-layer operations (attention, norms, rotary and learned
// positions). Attention's products and softmax run on the vectorised Eigen build the rest of
// the step uses (cpu_kernels.hpp). Semantics are those documented on Device.
#pragma once

#include <cstdint>

#include "dtplan/runtime/cpu_kernels.hpp"
#include "dtplan/runtime/device.hpp"

namespace dtplan::runtime::cpu {

void attention(const CpuKernels& k, const float* qkv, float* probs, float* out,
               const AttentionShape& a, const AttentionDropout& drop, float* scratch);
void attention_backward(const CpuKernels& k, const float* qkv, const float* out, const float* dout,
                        float* probs, float* dqkv, const AttentionShape& a,
                        const AttentionDropout& drop, float* scratch);
// Device::dropout_mask and Device::apply_dropout.
void dropout_mask(std::uint8_t* mask, const DropoutDraw& d);
void apply_dropout(float* x, const std::uint8_t* mask, std::int64_t n, float scale,
                   cost::ElementType type);
void norm(const float* x, const float* gamma, const float* beta, float* y, float* stats,
          std::int64_t rows, std::int64_t cols, float eps);
void norm_backward(const float* x, const float* gamma, const float* stats, const float* dy,
                   float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols);
// Device::round_to, and SwiGLU with its 16-bit intermediates rounded (Device::swiglu).
void round_to(float* x, std::int64_t n, cost::ElementType type);
void swiglu_rounded(const CpuKernels& k, const float* g, const float* u, float* y, std::int64_t n,
                    cost::ElementType type);
void swiglu_rounded_backward(const CpuKernels& k, const float* g, const float* u, const float* dy,
                             float* dg, float* du, std::int64_t n, cost::ElementType type);
// The vocab-parallel loss's second and third passes (Device::cross_entropy_sums and
// cross_entropy_finish).
void cross_entropy_sums(const CpuKernels& k, const float* logits, const std::int32_t* targets,
                        const float* top, float* sums, std::int64_t tokens, std::int64_t vocab,
                        std::int64_t first_id);
double cross_entropy_finish(const CpuKernels& k, float* logits, const std::int32_t* targets,
                            const float* top, const float* sums, std::int64_t tokens,
                            std::int64_t vocab, std::int64_t first_id, float grad_scale);
void rotary(float* qkv, const AttentionShape& a, float theta, bool inverse);
void add_positions(float* x, const float* table, std::int64_t tokens, std::int64_t seq,
                   std::int64_t dim);
void positions_backward(const float* dx, float* dtable, std::int64_t tokens, std::int64_t seq,
                        std::int64_t dim);

}  // namespace dtplan::runtime::cpu
