// CudaDevice: the Device of one GPU. cudaMalloc'ed buffers (zeroed on the compute stream),
// cuBLAS SGEMM and the kernels of kernels.cu, all ordered on one non-blocking compute stream.
// Private to the runtime; the NCCL communicator uses stream() and index().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "dtplan/runtime/device.hpp"

namespace dtplan::runtime {

// Throws dtplan::Error "<call> failed on CUDA device <device>: <CUDA's error string>" unless
// `code` is cudaSuccess.
void cuda_check(cudaError_t code, std::string_view call, int device);

class CudaDevice final : public Device {
 public:
  // The device local_rank % cudaGetDeviceCount(); capacity_bytes = 0 uses its free memory.
  CudaDevice(int local_rank, std::int64_t capacity_bytes);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string description() const override;
  std::string kind() const override { return "cuda"; }

  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override;
  void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) override;
  void bias_grad(const float* dy, float* grad_bias, std::int64_t rows, std::int64_t cols) override;
  void gelu(const float* x, float* y, std::int64_t n) override;
  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override;
  void swiglu(const float* g, const float* u, float* y, std::int64_t n,
              cost::ElementType type) override;
  void round_to(float* x, std::int64_t n, cost::ElementType type) override;
  void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du,
                       std::int64_t n, cost::ElementType type) override;
  void dropout_mask(std::uint8_t* mask, const DropoutDraw& d) override;
  void apply_dropout(float* x, const std::uint8_t* mask, std::int64_t n, float scale,
                     cost::ElementType type) override;
  void attention(const float* qkv, float* probs, float* out, const AttentionShape& a,
                 const AttentionDropout& drop, float* scratch) override;
  void attention_backward(const float* qkv, const float* out, const float* dout, float* probs,
                          float* dqkv, const AttentionShape& a, const AttentionDropout& drop,
                          float* scratch) override;
  void norm(const float* x, const float* gamma, const float* beta, float* y, float* stats,
            std::int64_t rows, std::int64_t cols, float eps) override;
  void norm_backward(const float* x, const float* gamma, const float* stats, const float* dy,
                     float* dx, float* dgamma, float* dbeta, std::int64_t rows,
                     std::int64_t cols) override;
  void rotary(float* qkv, const AttentionShape& a, float theta, bool inverse) override;
  void add_positions(float* x, const float* table, std::int64_t tokens, std::int64_t seq,
                     std::int64_t dim) override;
  void positions_backward(const float* dx, float* dtable, std::int64_t tokens, std::int64_t seq,
                          std::int64_t dim) override;
  void embedding(const std::int32_t* ids, const float* table, float* out, std::int64_t tokens,
                 std::int64_t dim, std::int64_t first_id, std::int64_t held) override;
  void embedding_backward(const std::int32_t* ids, const float* dout, float* grad_table,
                          std::int64_t tokens, std::int64_t dim, std::int64_t first_id,
                          std::int64_t held) override;
  // The vocab-parallel loss is not implemented here: dtplan-run refuses tensor parallelism
  // on the CUDA backend before a device is made; these throw if reached.
  void row_max(const float* logits, float* top, std::int64_t tokens, std::int64_t vocab) override;
  void cross_entropy_sums(const float* logits, const std::int32_t* targets, const float* top,
                          float* sums, std::int64_t tokens, std::int64_t vocab,
                          std::int64_t first_id) override;
  double cross_entropy_finish(float* logits, const std::int32_t* targets, const float* top,
                              const float* sums, std::int64_t tokens, std::int64_t vocab,
                              std::int64_t first_id, float grad_scale) override;
  double softmax_cross_entropy(float* logits, const std::int32_t* targets, std::int64_t tokens,
                               std::int64_t vocab, float grad_scale) override;
  void axpy(float alpha, const float* x, float* y, std::int64_t n) override;
  void scale(float* x, float alpha, std::int64_t n) override;
  void fill(float* x, float value, std::int64_t n) override;
  void copy(const float* from, float* to, std::int64_t n) override;
  double sum_squares(const float* x, std::int64_t n) override;
  bool any_non_finite(const float* x, std::int64_t n) override;
  void adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1,
            float beta2, float eps, float weight_decay, std::int64_t t) override;
  void sgd(float* w, const float* g, float* buf, std::int64_t n, float lr, float momentum) override;
  void upload(const void* host, void* device, std::int64_t bytes) override;
  void download(const void* device, void* host, std::int64_t bytes) override;
  void synchronize() override;
  void release_cached() override { drop_cache(); }

  cudaStream_t stream() const { return stream_; }
  int index() const { return index_; }

 protected:
  void* raw_allocate(std::int64_t bytes) override;
  void raw_free(void* p) override;

 private:
  struct Selected {
    int index;
    std::int64_t capacity_bytes;
  };
  static Selected select(int local_rank, std::int64_t capacity_bytes);
  explicit CudaDevice(Selected s);
  void release() noexcept;
  void check(cudaError_t code, std::string_view call) const { cuda_check(code, call, index_); }
  void check_launch(std::string_view kernel) const;
  double fetch_result();
  // A cached block of exactly `bytes`, or nullptr.
  void* reuse(std::int64_t bytes);
  void drop_cache() noexcept;

  int index_ = 0;
  // Freed blocks by size, reused in stream order (as PyTorch's caching allocator does for
  // FSDP): ZeRO-3 frees and reallocates every gathered unit, and cudaFree synchronises the
  // whole device. Every block's size, cached or live.
  std::multimap<std::int64_t, void*> cache_;
  std::map<void*, std::int64_t> sizes_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  // Reduction scratch (partials, result, flag): a few KiB outside the accounted components,
  // allocated once so that sum_squares and friends never allocate.
  void* scratch_ = nullptr;
};

}  // namespace dtplan::runtime
