// The compute side of one rank: memory counted per component, GEMMs, and the element-wise
// kernels a training step needs. Two implementations: CpuDevice (host memory, Eigen) and
// CudaDevice (cudaMalloc, cuBLAS, a few CUDA kernels). All matrices are row-major fp32; every
// operation is ordered on the device's compute stream, so a caller sees results after
// synchronize() (the CPU device is synchronous).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/runtime/dropout.hpp"

namespace dtplan::runtime {

// What a buffer holds; names match the cost model's memory components.
enum class MemoryComponent { weights, gradients, optimizer_states, activations, buffers, data };
inline constexpr int kMemoryComponents = 6;
std::string_view name_of(MemoryComponent c);

struct MemoryUse {
  std::array<std::int64_t, kMemoryComponents> bytes{};
  std::int64_t total() const;
  std::int64_t& operator[](MemoryComponent c) { return bytes[static_cast<int>(c)]; }
  std::int64_t operator[](MemoryComponent c) const { return bytes[static_cast<int>(c)]; }
};

class Device;

// The shape attention runs over: `batch` sequences of `seq` tokens, grouped-query heads, and
// the type its products compute in (Device::attention).
struct AttentionShape {
  std::int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  cost::ElementType compute = cost::ElementType::fp32;
  std::int64_t tokens() const { return batch * seq; }
  std::int64_t row() const { return (heads + 2 * kv_heads) * head_dim; }  // qkv's row width
};

// Dropout of the attention probabilities (Device::attention): mask[batch, heads, seq, seq]
// (one byte an element, 1 = kept) and the kept elements' factor 1 / (1 - p); none when mask
// is null.
struct AttentionDropout {
  const std::uint8_t* mask = nullptr;
  float scale = 1;
};

// A device allocation of `count` elements (float, or int32 for token ids); freed, and its
// bytes returned to the component's account, on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device* owner, void* data, std::int64_t bytes, MemoryComponent c)
      : owner_(owner), data_(data), bytes_(bytes), component_(c) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  float* f() const { return static_cast<float*>(data_); }
  std::int32_t* i() const { return static_cast<std::int32_t*>(data_); }
  std::uint8_t* bytes_ptr() const { return static_cast<std::uint8_t*>(data_); }
  std::int64_t bytes() const { return bytes_; }
  std::int64_t floats() const { return bytes_ / 4; }
  bool empty() const { return data_ == nullptr; }

 private:
  Device* owner_ = nullptr;
  void* data_ = nullptr;
  std::int64_t bytes_ = 0;
  MemoryComponent component_ = MemoryComponent::buffers;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string description() const = 0;  // "cpu: Intel Xeon ... (Eigen 3.4.0)"
  virtual std::string kind() const = 0;         // "cpu" or "cuda"
  std::int64_t capacity_bytes() const { return capacity_bytes_; }

  // Zero-filled allocation of `bytes` for `c`; throws dtplan::Error (out of memory, naming
  // the component) when the total would pass the capacity or the allocator fails.
  Buffer allocate(std::int64_t bytes, MemoryComponent c);
  Buffer allocate_floats(std::int64_t count, MemoryComponent c) { return allocate(count * 4, c); }
  const MemoryUse& in_use() const { return in_use_; }
  const MemoryUse& at_peak() const { return at_peak_; }  // by component at the total's peak
  std::int64_t peak_bytes() const { return at_peak_.total(); }

  // C[m x n] = alpha * op(A) op(B) + beta * C, row-major; op(A) is m x k, op(B) is k x n.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, const float* b, float beta, float* c) = 0;
  // y[rows x cols] += bias[cols] on every row.
  virtual void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) = 0;
  // grad_bias[cols] += column sums of dy[rows x cols].
  virtual void bias_grad(const float* dy, float* grad_bias, std::int64_t rows,
                         std::int64_t cols) = 0;
  // y = gelu(x) (tanh form); dx = dy * gelu'(x).
  virtual void gelu(const float* x, float* y, std::int64_t n) = 0;
  virtual void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) = 0;
  // y = silu(g) * u; dg, du from dy. With a 16-bit `type` every intermediate a 16-bit
  // tensor would hold is rounded as PyTorch's element-wise kernels do: y = r(r(silu(g)) u),
  // du = r(dy r(silu(g))), dg = r(silu'(g) r(dy u)).
  virtual void swiglu(const float* g, const float* u, float* y, std::int64_t n,
                      cost::ElementType type) = 0;
  virtual void swiglu_backward(const float* g, const float* u, const float* dy, float* dg,
                               float* du, std::int64_t n, cost::ElementType type) = 0;
  // Rounds each element to the nearest value of `type` (bf16 or fp16; ties to even, fp16
  // past 65504 to infinity), kept in fp32: what a 16-bit tensor would hold. fp32: nothing.
  virtual void round_to(float* x, std::int64_t n, cost::ElementType type) = 0;
  // mask[0 .. d.elements()) = 1 where dropout_keep keeps the element, else 0 (dropout.hpp).
  virtual void dropout_mask(std::uint8_t* mask, const DropoutDraw& d) = 0;
  // x = mask ? x * scale : 0, the forward and the backward of a dropout. With a 16-bit `type`
  // x holds a 16-bit tensor's values: the factor and each product are rounded.
  virtual void apply_dropout(float* x, const std::uint8_t* mask, std::int64_t n, float scale,
                             cost::ElementType type) = 0;
  // Causal softmax attention of batch x seq tokens over qkv[tokens x (q + 2 kv)] (queries,
  // keys, values side by side; head h reads key/value group h / (heads / kv_heads)), scores
  // scaled by 1/sqrt(head_dim). probs[batch, heads, seq, seq] receives the probabilities (zero
  // above the diagonal), out[tokens x q] the heads' outputs side by side. `scratch` holds
  // attention_scratch_elements (cost/dense_stack.hpp) floats. With a 16-bit a.compute (qkv
  // already holding 16-bit values), scores and softmax stay fp32 and what a 16-bit tensor
  // would hold is rounded: the probabilities entering p v (not those kept), the output; in
  // backward dp = r(do v^T), dv and dk per head, then their sum over the group, and dq.
  // With dropout p v reads the kept probabilities scaled (apply_dropout's rounding under
  // 16-bit compute), and backward passes dp through the same mask.
  virtual void attention(const float* qkv, float* probs, float* out, const AttentionShape& a,
                         const AttentionDropout& drop, float* scratch) = 0;
  // From dout[tokens x q]: dqkv (overwritten) for the queries, keys and values. `out` is the
  // forward output; `probs` is consumed (it holds scratch values afterwards).
  virtual void attention_backward(const float* qkv, const float* out, const float* dout,
                                  float* probs, float* dqkv, const AttentionShape& a,
                                  const AttentionDropout& drop, float* scratch) = 0;
  // y = norm(x) * gamma (+ beta) over rows of `cols`: LayerNorm, or RMSNorm when beta is null.
  // stats[rows x 2] keeps each row's mean (0 for RMSNorm) and 1/sqrt(variance (or mean
  // square) + eps) for backward.
  virtual void norm(const float* x, const float* gamma, const float* beta, float* y, float* stats,
                    std::int64_t rows, std::int64_t cols, float eps) = 0;
  // dx += the input gradient; dgamma (and dbeta when not null: LayerNorm) += theirs.
  virtual void norm_backward(const float* x, const float* gamma, const float* stats,
                             const float* dy, float* dx, float* dgamma, float* dbeta,
                             std::int64_t rows, std::int64_t cols) = 0;
  // Rotates the query and key heads of qkv in place by position (token index mod seq) x
  // theta^(-2i/head_dim), pairing element i with i + head_dim/2 (Llama's rotate_half);
  // `inverse` rotates back, which is the backward of the rotation.
  virtual void rotary(float* qkv, const AttentionShape& a, float theta, bool inverse) = 0;
  // x[t] += table[t mod seq] (learned positions); dtable[t mod seq] += dx[t].
  virtual void add_positions(float* x, const float* table, std::int64_t tokens, std::int64_t seq,
                             std::int64_t dim) = 0;
  virtual void positions_backward(const float* dx, float* dtable, std::int64_t tokens,
                                  std::int64_t seq, std::int64_t dim) = 0;
  // out[t] = table[ids[t] - first_id] (rows of `dim`); grad_table[ids[t] - first_id] += dout[t].
  // The table holds the `held` ids from first_id (a tensor-parallel rank's vocabulary slice): a
  // token outside them gives a zero row and no gradient.
  virtual void embedding(const std::int32_t* ids, const float* table, float* out,
                         std::int64_t tokens, std::int64_t dim, std::int64_t first_id,
                         std::int64_t held) = 0;
  virtual void embedding_backward(const std::int32_t* ids, const float* dout, float* grad_table,
                                  std::int64_t tokens, std::int64_t dim, std::int64_t first_id,
                                  std::int64_t held) = 0;
  // Softmax cross-entropy over logits[tokens x vocab] in place: logits become
  // (softmax - onehot(target)) * grad_scale; returns the summed loss (natural log).
  virtual double softmax_cross_entropy(float* logits, const std::int32_t* targets,
                                       std::int64_t tokens, std::int64_t vocab,
                                       float grad_scale) = 0;
  // The same loss with the vocabulary split over tensor-parallel ranks (Megatron-LM's
  // vocab-parallel cross-entropy): logits[tokens x vocab] are this rank's ids from first_id.
  // Three passes around two collectives over the ranks:
  //   row_max:               top[t] = max of the row               -> all-reduce max
  //   cross_entropy_sums:    sums[t] = sum of exp(logit - top[t]); sums[tokens + t] = the
  //                          target's logit - top[t] if the target is here, else 0
  //                                                                -> all-reduce sum
  //   cross_entropy_finish:  logits become (softmax - onehot(target)) * grad_scale; returns
  //                          the summed loss, log(sum) - (target logit - top), over all tokens
  virtual void row_max(const float* logits, float* top, std::int64_t tokens,
                       std::int64_t vocab) = 0;
  virtual void cross_entropy_sums(const float* logits, const std::int32_t* targets,
                                  const float* top, float* sums, std::int64_t tokens,
                                  std::int64_t vocab, std::int64_t first_id) = 0;
  virtual double cross_entropy_finish(float* logits, const std::int32_t* targets, const float* top,
                                      const float* sums, std::int64_t tokens, std::int64_t vocab,
                                      std::int64_t first_id, float grad_scale) = 0;
  // y += alpha * x; x *= alpha; fill.
  virtual void axpy(float alpha, const float* x, float* y, std::int64_t n) = 0;
  virtual void scale(float* x, float alpha, std::int64_t n) = 0;
  virtual void fill(float* x, float value, std::int64_t n) = 0;
  virtual void copy(const float* from, float* to, std::int64_t n) = 0;
  // Sum of squares (for the gradient norm) and whether any element is inf or NaN.
  virtual double sum_squares(const float* x, std::int64_t n) = 0;
  virtual bool any_non_finite(const float* x, std::int64_t n) = 0;
  // Adam(W) with bias correction at step `t` (1-based): m, v updated in place.
  virtual void adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, std::int64_t t) = 0;
  // SGD, with momentum buffer `buf` when momentum > 0 (PyTorch's form: buf = mu buf + g).
  virtual void sgd(float* w, const float* g, float* buf, std::int64_t n, float lr,
                   float momentum) = 0;
  // Host <-> device copies of n bytes.
  virtual void upload(const void* host, void* device, std::int64_t bytes) = 0;
  virtual void download(const void* device, void* host, std::int64_t bytes) = 0;
  // Waits for all queued work.
  virtual void synchronize() = 0;
  // Returns memory the device keeps for reuse (the CUDA block cache) to the system, so that
  // libraries allocating on their own (cuBLAS, NCCL) find it free. Nothing to do on the CPU.
  virtual void release_cached() {}

 protected:
  explicit Device(std::int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  // Raw allocation (zero-filled) and release; nullptr when the allocator fails.
  virtual void* raw_allocate(std::int64_t bytes) = 0;
  virtual void raw_free(void* p) = 0;

 private:
  friend class Buffer;
  void release(void* p, std::int64_t bytes, MemoryComponent c);
  std::int64_t capacity_bytes_ = 0;
  MemoryUse in_use_;
  MemoryUse at_peak_;
};

}  // namespace dtplan::runtime
