// CpuDevice: host buffers; GEMMs and the transcendental element-wise kernels from the build of
// cpu_kernels for the host's vector instruction set, the simple loops here. Synchronous,
// single-threaded (each MPI rank owns one core).
#include "dtplan/runtime/cpu_device.hpp"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cpu_layer_ops.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/runtime/cpu_kernels.hpp"
#include "dtplan/runtime/host_info.hpp"

namespace dtplan::runtime {
namespace {

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::int64_t capacity) : Device(capacity), k_(cpu_kernels()) {}

  std::string description() const override {
    return "cpu: " + cpu_model_name() + " (Eigen " + eigen_version() + ", " + k_.name +
           " kernels, 1 thread per rank)";
  }
  std::string kind() const override { return "cpu"; }

  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    k_.gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }

  void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < cols; ++j)
        y[r * cols + j] += bias[j];
    }
  }
  void bias_grad(const float* dy, float* g, std::int64_t rows, std::int64_t cols) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < cols; ++j)
        g[j] += dy[r * cols + j];
    }
  }
  void gelu(const float* x, float* y, std::int64_t n) override { k_.gelu(x, y, n); }

  void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) override {
    k_.gelu_backward(x, dy, dx, n);
  }

  void swiglu(const float* g, const float* u, float* y, std::int64_t n,
              cost::ElementType type) override {
    if (type == cost::ElementType::fp32) {
      k_.swiglu(g, u, y, n);
    } else {
      cpu::swiglu_rounded(k_, g, u, y, n, type);
    }
  }

  void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du,
                       std::int64_t n, cost::ElementType type) override {
    if (type == cost::ElementType::fp32) {
      k_.swiglu_backward(g, u, dy, dg, du, n);
    } else {
      cpu::swiglu_rounded_backward(k_, g, u, dy, dg, du, n, type);
    }
  }

  void round_to(float* x, std::int64_t n, cost::ElementType type) override {
    cpu::round_to(x, n, type);
  }

  void dropout_mask(std::uint8_t* mask, const DropoutDraw& d) override {
    cpu::dropout_mask(mask, d);
  }
  void apply_dropout(float* x, const std::uint8_t* mask, std::int64_t n, float scale,
                     cost::ElementType type) override {
    cpu::apply_dropout(x, mask, n, scale, type);
  }

  void attention(const float* qkv, float* probs, float* out, const AttentionShape& a,
                 const AttentionDropout& drop, float* scratch) override {
    cpu::attention(k_, qkv, probs, out, a, drop, scratch);
  }
  void attention_backward(const float* qkv, const float* out, const float* dout, float* probs,
                          float* dqkv, const AttentionShape& a, const AttentionDropout& drop,
                          float* scratch) override {
    cpu::attention_backward(k_, qkv, out, dout, probs, dqkv, a, drop, scratch);
  }
  void norm(const float* x, const float* gamma, const float* beta, float* y, float* stats,
            std::int64_t rows, std::int64_t cols, float eps) override {
    cpu::norm(x, gamma, beta, y, stats, rows, cols, eps);
  }
  void norm_backward(const float* x, const float* gamma, const float* stats, const float* dy,
                     float* dx, float* dgamma, float* dbeta, std::int64_t rows,
                     std::int64_t cols) override {
    cpu::norm_backward(x, gamma, stats, dy, dx, dgamma, dbeta, rows, cols);
  }
  void rotary(float* qkv, const AttentionShape& a, float theta, bool inverse) override {
    cpu::rotary(qkv, a, theta, inverse);
  }
  void add_positions(float* x, const float* table, std::int64_t tokens, std::int64_t seq,
                     std::int64_t dim) override {
    cpu::add_positions(x, table, tokens, seq, dim);
  }
  void positions_backward(const float* dx, float* dtable, std::int64_t tokens, std::int64_t seq,
                          std::int64_t dim) override {
    cpu::positions_backward(dx, dtable, tokens, seq, dim);
  }
  void embedding(const std::int32_t* ids, const float* table, float* out, std::int64_t tokens,
                 std::int64_t dim, std::int64_t first_id, std::int64_t held) override {
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t row = std::int64_t{ids[t]} - first_id;
      float* o = out + t * dim;
      if (row < 0 || row >= held) {
        std::fill(o, o + dim, 0.0f);
      } else {
        std::memcpy(o, table + row * dim, static_cast<std::size_t>(dim) * 4);
      }
    }
  }
  void embedding_backward(const std::int32_t* ids, const float* dout, float* grad,
                          std::int64_t tokens, std::int64_t dim, std::int64_t first_id,
                          std::int64_t held) override {
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t row = std::int64_t{ids[t]} - first_id;
      if (row < 0 || row >= held) continue;
      float* g = grad + row * dim;
      for (std::int64_t i = 0; i < dim; ++i)
        g[i] += dout[t * dim + i];
    }
  }
  double softmax_cross_entropy(float* logits, const std::int32_t* targets, std::int64_t tokens,
                               std::int64_t vocab, float grad_scale) override {
    return k_.softmax_cross_entropy(logits, targets, tokens, vocab, grad_scale);
  }

  void row_max(const float* logits, float* top, std::int64_t tokens, std::int64_t vocab) override {
    k_.row_max(logits, top, tokens, vocab);
  }
  void cross_entropy_sums(const float* logits, const std::int32_t* targets, const float* top,
                          float* sums, std::int64_t tokens, std::int64_t vocab,
                          std::int64_t first_id) override {
    cpu::cross_entropy_sums(k_, logits, targets, top, sums, tokens, vocab, first_id);
  }
  double cross_entropy_finish(float* logits, const std::int32_t* targets, const float* top,
                              const float* sums, std::int64_t tokens, std::int64_t vocab,
                              std::int64_t first_id, float grad_scale) override {
    return cpu::cross_entropy_finish(k_, logits, targets, top, sums, tokens, vocab, first_id,
                                     grad_scale);
  }

  void axpy(float alpha, const float* x, float* y, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i)
      y[i] += alpha * x[i];
  }
  void scale(float* x, float alpha, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i)
      x[i] *= alpha;
  }
  void fill(float* x, float value, std::int64_t n) override { std::fill(x, x + n, value); }
  void copy(const float* from, float* to, std::int64_t n) override {
    std::memmove(to, from, static_cast<std::size_t>(n) * 4);
  }
  double sum_squares(const float* x, std::int64_t n) override {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i)
      s += double{x[i]} * x[i];
    return s;
  }
  bool any_non_finite(const float* x, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(x[i])) return true;
    }
    return false;
  }
  void adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float b1,
            float b2, float eps, float wd, std::int64_t t) override {
    const double c1 = 1.0 - std::pow(double{b1}, static_cast<double>(t));
    const double c2 = 1.0 - std::pow(double{b2}, static_cast<double>(t));
    const auto step = static_cast<float>(lr / c1);
    const auto root_c2 = static_cast<float>(std::sqrt(c2));
    for (std::int64_t i = 0; i < n; ++i) {
      if (wd > 0) w[i] -= lr * wd * w[i];  // decoupled (AdamW)
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= step * m[i] / (std::sqrt(v[i]) / root_c2 + eps);
    }
  }
  void sgd(float* w, const float* g, float* buf, std::int64_t n, float lr,
           float momentum) override {
    for (std::int64_t i = 0; i < n; ++i) {
      if (momentum > 0) {
        buf[i] = momentum * buf[i] + g[i];
        w[i] -= lr * buf[i];
      } else {
        w[i] -= lr * g[i];
      }
    }
  }
  void upload(const void* host, void* dev, std::int64_t bytes) override {
    std::memcpy(dev, host, static_cast<std::size_t>(bytes));
  }
  void download(const void* dev, void* host, std::int64_t bytes) override {
    std::memcpy(host, dev, static_cast<std::size_t>(bytes));
  }
  void synchronize() override {}

 protected:
  // 64-byte aligned (a cache line, an AVX-512 vector): Eigen's vectorised paths depend on
  // the operands' alignment, so equal inputs give equal bits wherever a buffer lands.
  void* raw_allocate(std::int64_t bytes) override {
    const auto size = static_cast<std::size_t>((std::max<std::int64_t>(bytes, 1) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, size);
    if (p != nullptr) std::memset(p, 0, size);
    return p;
  }
  void raw_free(void* p) override { std::free(p); }

 private:
  const CpuKernels& k_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(std::int64_t capacity_bytes, int ranks_on_node) {
  if (capacity_bytes < 0) throw Error("--memory-limit: must not be negative");
  // ZeRO-3 allocates each gathered unit and frees it after use, as PyTorch's caching allocator
  // lets FSDP do cheaply. glibc would mmap and unmap every large block, paying page faults on
  // each gather; keeping freed blocks in the heap makes a reallocation a memset, as on a GPU.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (capacity_bytes == 0) capacity_bytes = host_available_bytes() / std::max(1, ranks_on_node);
  return std::make_unique<CpuDevice>(capacity_bytes);
}

}  // namespace dtplan::runtime
