// One build of the CPU kernels (cpu_kernels.hpp), compiled once per instruction set with
// DTPLAN_CPU_ISA set to its name and the compiler's flags for it. Eigen's namespace is renamed
// to one per build before Eigen is included: every template this file instantiates then has
// its own symbol, and the linker cannot pick, say, the AVX-512 instance of a GEMM kernel for
// a call from the baseline build. Nothing here may have dynamic initialisation or use inline
// functions outside that namespace with vector code (tests/tools/cpu_kernels_isolated.sh checks
// the object's weak symbols).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "dtplan/runtime/cpu_kernels.hpp"
#include "dtplan/runtime/dropout.hpp"

#ifndef DTPLAN_CPU_ISA
#error "compile with DTPLAN_CPU_ISA=<name> (runtime/exec/CMakeLists.txt)"
#endif
#define DTPLAN_CAT2(a, b) a##b
#define DTPLAN_CAT(a, b) DTPLAN_CAT2(a, b)
#define Eigen DTPLAN_CAT(dtplan_eigen_, DTPLAN_CPU_ISA)
#include <Eigen/Core>

namespace dtplan::runtime {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
using ConstVec = Eigen::Map<const Array>;
using Vec = Eigen::Map<Array>;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// Eigen's vectorised tanh / exp take the same time for any input (libm's scalar ones are ten
// times faster on zeros than on real activations, which made microbenchmarks lie).
template <class X>
auto gelu_inner(const X& x) {
  return (kGeluC * (x + kGeluA * x.cube())).tanh();
}

template <class X>
auto sigmoid_of(const X& x) {
  return 1.0f / (1.0f + (-x).exp());
}

using Stride = Eigen::OuterStride<>;
using ConstStrided = Eigen::Map<const RowMajor, 0, Stride>;
using Strided = Eigen::Map<RowMajor, 0, Stride>;

void gemm_ld(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
             const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
             float* c, std::int64_t ldc) {
  const ConstStrided A(a, ta ? k : m, ta ? m : k, Stride(lda));
  const ConstStrided B(b, tb ? n : k, tb ? k : n, Stride(ldb));
  Strided C(c, m, n, Stride(ldc));
  if (beta == 0.0f) {
    C.setZero();
  } else if (beta != 1.0f) {
    C *= beta;
  }
  if (!ta && !tb) C.noalias() += alpha * (A * B);
  if (ta && !tb) C.noalias() += alpha * (A.transpose() * B);
  if (!ta && tb) C.noalias() += alpha * (A * B.transpose());
  if (ta && tb) C.noalias() += alpha * (A.transpose() * B.transpose());
}

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  gemm_ld(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

void gelu(const float* x, float* y, std::int64_t n) {
  const ConstVec a(x, n);
  Vec(y, n) = 0.5f * a * (1.0f + gelu_inner(a));
}

void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
  const ConstVec a(x, n);
  const Array t = gelu_inner(a);
  Vec(dx, n) = ConstVec(dy, n) * (0.5f * (1.0f + t) + 0.5f * a * (1.0f - t.square()) * kGeluC *
                                                          (1.0f + 3 * kGeluA * a.square()));
}

void swiglu(const float* g, const float* u, float* y, std::int64_t n) {
  const ConstVec a(g, n);
  Vec(y, n) = a * sigmoid_of(a) * ConstVec(u, n);
}

void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du,
                     std::int64_t n) {
  const ConstVec a(g, n), d(dy, n);
  const Array s = sigmoid_of(a);
  Vec(du, n) = d * a * s;
  Vec(dg, n) = d * ConstVec(u, n) * s * (1.0f + a * (1.0f - s));
}

void silu(const float* g, float* s, std::int64_t n) {
  const ConstVec a(g, n);
  Vec(s, n) = a * sigmoid_of(a);
}

void silu_grad(const float* g, float* d, std::int64_t n) {
  const ConstVec a(g, n);
  const Array sg = sigmoid_of(a);
  Vec(d, n) *= sg * (1.0f + a * (1.0f - sg));
}

double softmax_cross_entropy(float* logits, const std::int32_t* targets, std::int64_t tokens,
                             std::int64_t vocab, float grad_scale) {
  double loss = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    Vec row(logits + t * vocab, vocab);
    const float top = row.maxCoeff();
    const std::int64_t target = targets[t];
    const double target_logit = double{row[target]} - top;
    row = (row - top).exp();
    const double sum = row.sum();
    loss += std::log(sum) - target_logit;
    row *= static_cast<float>(grad_scale / sum);
    row[target] -= grad_scale;
  }
  return loss;
}

void row_max(const float* logits, float* top, std::int64_t tokens, std::int64_t vocab) {
  for (std::int64_t t = 0; t < tokens; ++t)
    top[t] = ConstVec(logits + t * vocab, vocab).maxCoeff();
}

void row_exp_sums(const float* logits, const float* top, float* sums, std::int64_t tokens,
                  std::int64_t vocab) {
  for (std::int64_t t = 0; t < tokens; ++t)
    sums[t] = (ConstVec(logits + t * vocab, vocab) - top[t]).exp().sum();
}

void softmax_rows(float* logits, const float* top, const float* sums, std::int64_t tokens,
                  std::int64_t vocab, float grad_scale) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    Vec row(logits + t * vocab, vocab);
    row = (row - top[t]).exp() * (grad_scale / sums[t]);
  }
}

// Row r of each seq x seq square keeps its first r + 1 entries: softmax over them, zeros after.
void causal_softmax(float* p, std::int64_t rows, std::int64_t seq) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t keep = r % seq + 1;
    Vec row(p + r * seq, keep);
    row = (row - row.maxCoeff()).exp();
    row *= 1.0f / row.sum();
    Vec(p + r * seq + keep, seq - keep).setZero();
  }
}

float from_bits(std::uint32_t bits) {
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint32_t bits_of(float f) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// Round to nearest even on the bit pattern, a loop the compiler vectorises: add 0x7fff plus
// the lowest kept bit, clear the 16 dropped bits. NaNs are kept as they are (the addition could
// carry one into infinity).
void round_bf16(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = bits_of(x[i]);
    const std::uint32_t up = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    x[i] = from_bits(nan ? bits : up);
  }
}

// fp16 the same way, a branch-free loop on the bit patterns: normal values keep 10 of fp32's
// 23 fraction bits (ties to even on the pattern); below 2^-14 fp16 is subnormal in steps of
// 2^-24, which adding and taking away 0.5 (whose fp32 step is 2^-24) rounds to; from 65520,
// halfway past the largest value 65504, it overflows to infinity. NaNs are kept.
void round_fp16(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = bits_of(x[i]);
    const std::uint32_t sign = bits & 0x80000000u, magnitude = bits & 0x7fffffffu;
    const float a = from_bits(magnitude);
    const std::uint32_t normal = (bits + 0xfffu + ((bits >> 13) & 1u)) & 0xffffe000u;
    const std::uint32_t subnormal = bits_of((a + 0.5f) - 0.5f) | sign;
    const std::uint32_t big = 0x7f800000u | sign;  // infinity
    const std::uint32_t r = a < 0x1p-14f ? subnormal : (a >= 65520.0f ? big : normal);
    x[i] = from_bits(magnitude > 0x7f800000u ? bits : r);
  }
}

// mask[j] = 1 where dropout_keep keeps element first + j of the stream (dropout.hpp).
void dropout_draw(std::uint8_t* mask, std::uint64_t stream, std::uint64_t first, std::int64_t n,
                  std::uint32_t threshold) {
  for (std::int64_t j = 0; j < n; ++j) {
    mask[j] = dropout_keep(stream, first + static_cast<std::uint64_t>(j), threshold) ? 1 : 0;
  }
}

// x times 0 or the factor, as PyTorch multiplies by its dropout noise tensor.
void drop(float* x, const std::uint8_t* mask, std::int64_t n, float factor) {
  for (std::int64_t i = 0; i < n; ++i)
    x[i] *= mask[i] != 0 ? factor : 0.0f;
}

}  // namespace

// Constant-initialised: nothing of this build runs before the dispatcher chooses it.
extern const CpuKernels DTPLAN_CAT(kCpuKernels_, DTPLAN_CPU_ISA);
const CpuKernels DTPLAN_CAT(kCpuKernels_, DTPLAN_CPU_ISA){DTPLAN_CPU_ISA_NAME,
                                                          DTPLAN_CPU_ISA_FEATURES,
                                                          &gemm,
                                                          &gelu,
                                                          &gelu_backward,
                                                          &swiglu,
                                                          &swiglu_backward,
                                                          &softmax_cross_entropy,
                                                          &row_max,
                                                          &row_exp_sums,
                                                          &softmax_rows,
                                                          &causal_softmax,
                                                          &gemm_ld,
                                                          &silu,
                                                          &silu_grad,
                                                          &round_bf16,
                                                          &round_fp16,
                                                          &drop,
                                                          &dropout_draw};

}  // namespace dtplan::runtime
