// The CPU device's vectorised kernels (Eigen GEMMs and array expressions), built once per
// instruction set and chosen at run time, so one build uses AVX-512 or AVX2 where the host has
// them and still runs on any x86-64 (SSE2) or other CPU. Each build of cpu_kernels_isa.cpp
// renames Eigen's namespace, so its template instances can never be merged with another
// build's by the linker (see runtime/exec/CMakeLists.txt).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtplan::runtime {

struct CpuKernels {
  const char* name;      // "avx512", "avx2" or "baseline": the value DTPLAN_CPU_KERNELS takes
  const char* features;  // what the host needs, e.g. "AVX2, FMA, BMI1/2"
  // C = alpha op(A) op(B) + beta C, row-major; op transposes where asked.
  void (*gemm)(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, const float* b, float beta, float* c);
  void (*gelu)(const float* x, float* y, std::int64_t n);
  void (*gelu_backward)(const float* x, const float* dy, float* dx, std::int64_t n);
  void (*swiglu)(const float* g, const float* u, float* y, std::int64_t n);
  void (*swiglu_backward)(const float* g, const float* u, const float* dy, float* dg, float* du,
                          std::int64_t n);
  // Mean-free loss sum over tokens; the logits become their gradient times grad_scale.
  double (*softmax_cross_entropy)(float* logits, const std::int32_t* targets, std::int64_t tokens,
                                  std::int64_t vocab, float grad_scale);
  // The vocab-parallel loss's passes over rows of `vocab` logits (Device::row_max ...):
  // top[t] = the row's maximum; sums[t] = sum of exp(logit - top[t]); the row becomes
  // exp(logit - top[t]) x grad_scale / sums[t].
  void (*row_max)(const float* logits, float* top, std::int64_t tokens, std::int64_t vocab);
  void (*row_exp_sums)(const float* logits, const float* top, float* sums, std::int64_t tokens,
                       std::int64_t vocab);
  void (*softmax_rows)(float* logits, const float* top, const float* sums, std::int64_t tokens,
                       std::int64_t vocab, float grad_scale);
  // Attention's probabilities in place: `rows` rows of `seq` scores, row r of a square
  // keeping entries 0 .. r mod seq (softmax over them) and zero after.
  void (*causal_softmax)(float* p, std::int64_t rows, std::int64_t seq);
  // gemm over matrices whose rows lie lda, ldb, ldc elements apart (a head's columns inside a
  // row of the fused QKV).
  void (*gemm_ld)(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                  const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
                  float* c, std::int64_t ldc);
  // s = silu(g) = g sigmoid(g); d *= silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
  void (*silu)(const float* g, float* s, std::int64_t n);
  void (*silu_grad)(const float* g, float* d, std::int64_t n);
  // Each element rounded to the nearest bf16 / fp16 value, kept in fp32 (Device::round_to).
  void (*round_bf16)(float* x, std::int64_t n);
  void (*round_fp16)(float* x, std::int64_t n);
  // x *= mask ? factor : 0 (a dropout, Device::apply_dropout before rounding).
  void (*drop)(float* x, const std::uint8_t* mask, std::int64_t n, float factor);
  // mask[j] = dropout_keep(stream, first + j, threshold) for j < n (dropout.hpp).
  void (*dropout_draw)(std::uint8_t* mask, std::uint64_t stream, std::uint64_t first,
                       std::int64_t n, std::uint32_t threshold);
};

// The kernels this process uses: DTPLAN_CPU_KERNELS when set, else the widest the host runs.
const CpuKernels& cpu_kernels();

// Every build this binary holds that the host can run, widest first.
std::vector<const CpuKernels*> cpu_kernels_runnable();

// The choice behind cpu_kernels(): `requested` is DTPLAN_CPU_KERNELS's value (null or empty:
// the widest runnable). A name not built, or one the host cannot run, is an error naming both.
const CpuKernels& choose_cpu_kernels(const char* requested);

// "3.4.0": the version of Eigen the kernels were built with.
std::string eigen_version();

}  // namespace dtplan::runtime
