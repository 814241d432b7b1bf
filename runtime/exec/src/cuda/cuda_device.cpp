// CudaDevice: device selection, memory, cuBLAS GEMMs and kernel launches on one compute
// stream; reductions come back to the host through a small scratch area.
#include "cuda_device.hpp"

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <sstream>
#include <string>

#include "dtplan/model/error.hpp"
#include "kernels.hpp"

namespace dtplan::runtime {

void cuda_check(cudaError_t code, std::string_view call, int device) {
  if (code == cudaSuccess) return;
  throw Error(std::string(call) + " failed on CUDA device " + std::to_string(device) + ": " +
              cudaGetErrorString(code) + " (" + cudaGetErrorName(code) + ")");
}

namespace {

// Scratch layout: kReduceBlocks partial sums, the final sum, the non-finite flag.
constexpr std::size_t kResultOffset = kernels::kReduceBlocks * sizeof(double);
constexpr std::size_t kFlagOffset = kResultOffset + sizeof(double);
constexpr std::size_t kScratchBytes = kFlagOffset + sizeof(int);

double* partials(void* scratch) {
  return static_cast<double*>(scratch);
}
double* result(void* scratch) {
  return reinterpret_cast<double*>(static_cast<char*>(scratch) + kResultOffset);
}
int* flag(void* scratch) {
  return reinterpret_cast<int*>(static_cast<char*>(scratch) + kFlagOffset);
}

int to_int(std::int64_t v, std::string_view what) {
  if (v < 0 || v > INT_MAX) {
    throw Error("cublasSgemm: " + std::string(what) + " = " + std::to_string(v) +
                " is outside the 32-bit range cuBLAS takes");
  }
  return static_cast<int>(v);
}

}  // namespace

CudaDevice::Selected CudaDevice::select(int local_rank, std::int64_t capacity_bytes) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(std::string("no CUDA device is visible to this process (cudaGetDeviceCount: ") +
                (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) + ")");
  }
  const int index = local_rank % count;
  cuda_check(cudaSetDevice(index), "cudaSetDevice", index);
  if (capacity_bytes <= 0) {
    std::size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", index);
    capacity_bytes = static_cast<std::int64_t>(free_bytes);
  }
  return {index, capacity_bytes};
}

CudaDevice::CudaDevice(int local_rank, std::int64_t capacity_bytes)
    : CudaDevice(select(local_rank, capacity_bytes)) {}

CudaDevice::CudaDevice(Selected s) : Device(s.capacity_bytes), index_(s.index) {
  // A throwing constructor runs no destructor: release what was made before rethrowing.
  try {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    const cublasStatus_t status = cublasCreate(&cublas_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublas_ = nullptr;
      throw Error("cublasCreate failed on CUDA device " + std::to_string(index_) + ": " +
                  cublasGetStatusString(status));
    }
    cublasSetStream(cublas_, stream_);
    check(cudaMalloc(&scratch_, kScratchBytes), "cudaMalloc (reduction scratch)");
  } catch (...) {
    release();
    throw;
  }
}

CudaDevice::~CudaDevice() {
  release();
}

void CudaDevice::release() noexcept {
  // Errors are ignored here: this runs in the destructor, and a failing device has already
  // reported through the call that failed.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  drop_cache();
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  scratch_ = nullptr;
  cublas_ = nullptr;
  stream_ = nullptr;
}

std::string CudaDevice::description() const {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index_), "cudaGetDeviceProperties");
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << "cuda: " << prop.name << ", " << static_cast<double>(prop.totalGlobalMem) / 1073741824.0
    << " GiB, compute capability " << prop.major << "." << prop.minor;
  return s.str();
}

void* CudaDevice::reuse(std::int64_t bytes) {
  const auto it = cache_.find(bytes);
  if (it == cache_.end()) return nullptr;
  void* p = it->second;
  cache_.erase(it);
  return p;
}

void CudaDevice::drop_cache() noexcept {
  if (cache_.empty()) return;
  cudaDeviceSynchronize();
  for (const auto& [bytes, p] : cache_) {
    sizes_.erase(p);
    cudaFree(p);
  }
  cache_.clear();
}

void* CudaDevice::raw_allocate(std::int64_t bytes) {
  void* p = reuse(bytes);
  if (p == nullptr) {
    cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
    if (e == cudaErrorMemoryAllocation && !cache_.empty()) {
      cudaGetLastError();  // not sticky; give the cached blocks back and try once more
      drop_cache();
      e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
    }
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so the next call does not report it
      return nullptr;
    }
    check(e, "cudaMalloc");
    sizes_[p] = bytes;
  }
  // Zeroed in stream order: work still queued on a reused block finishes first.
  const cudaError_t zeroed = cudaMemsetAsync(p, 0, static_cast<std::size_t>(bytes), stream_);
  if (zeroed != cudaSuccess) cache_.emplace(bytes, p);
  check(zeroed, "cudaMemsetAsync");
  return p;
}

void CudaDevice::raw_free(void* p) {
  // Called from Buffer's destructor, so nothing is thrown. The block goes back to the cache;
  // the next user of it is ordered after this one's work on the compute stream (collectives
  // on the communication stream are waited for before their buffers are released).
  const auto it = sizes_.find(p);
  if (it == sizes_.end()) return;
  cache_.emplace(it->second, p);
}

void CudaDevice::check_launch(std::string_view kernel) const {
  check(cudaGetLastError(), std::string("launching the ") + std::string(kernel) + " kernel");
}

double CudaDevice::fetch_result() {
  double host = 0;
  check(cudaMemcpyAsync(&host, result(scratch_), sizeof host, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (reduction result)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return host;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same cuBLAS call with
// the operands swapped, the transposes kept, and each matrix's row length as its leading
// dimension (A is stored m x k, or k x m when transposed; B k x n, or n x k).
void CudaDevice::gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                      float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int mi = to_int(m, "m"), ni = to_int(n, "n"), ki = to_int(k, "k");
  const int lda = trans_a ? mi : ki, ldb = trans_b ? ki : ni;
  const cublasStatus_t status =
      cublasSgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                  ni, mi, ki, &alpha, b, ldb > 0 ? ldb : 1, a, lda > 0 ? lda : 1, &beta, c, ni);
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error("cublasSgemm (m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                ", k=" + std::to_string(k) + ") failed on CUDA device " + std::to_string(index_) +
                ": " + cublasGetStatusString(status));
  }
}

void CudaDevice::add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) {
  kernels::add_bias(stream_, y, bias, rows, cols);
  check_launch("add_bias");
}

void CudaDevice::bias_grad(const float* dy, float* grad_bias, std::int64_t rows,
                           std::int64_t cols) {
  kernels::bias_grad(stream_, dy, grad_bias, rows, cols);
  check_launch("bias_grad");
}

void CudaDevice::gelu(const float* x, float* y, std::int64_t n) {
  kernels::gelu(stream_, x, y, n);
  check_launch("gelu");
}

void CudaDevice::gelu_backward(const float* x, const float* dy, float* dx, std::int64_t n) {
  kernels::gelu_backward(stream_, x, dy, dx, n);
  check_launch("gelu_backward");
}

namespace {

// dtplan-run computes in fp32 on this backend (run_job.cpp); 16-bit compute is the CPU
// backend's rounding emulation until the CUDA kernels take 16-bit operands.
void require_fp32(cost::ElementType type, const char* what) {
  if (type != cost::ElementType::fp32) {
    throw Error(std::string("CUDA backend: ") + what + " in " + std::string(cost::name_of(type)) +
                " is not implemented (this backend computes in fp32)");
  }
}

}  // namespace

void CudaDevice::round_to(float* /*x*/, std::int64_t /*n*/, cost::ElementType type) {
  require_fp32(type, "rounding");
}

void CudaDevice::swiglu(const float* g, const float* u, float* y, std::int64_t n,
                        cost::ElementType type) {
  require_fp32(type, "swiglu");
  kernels::swiglu(stream_, g, u, y, n);
  check_launch("swiglu");
}

void CudaDevice::swiglu_backward(const float* g, const float* u, const float* dy, float* dg,
                                 float* du, std::int64_t n, cost::ElementType type) {
  require_fp32(type, "swiglu backward");
  kernels::swiglu_backward(stream_, g, u, dy, dg, du, n);
  check_launch("swiglu_backward");
}

namespace {

kernels::Heads heads_of(const AttentionShape& a) {
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) {
    throw Error("attention: " + std::to_string(a.heads) + " heads cannot be grouped over " +
                std::to_string(a.kv_heads) + " key/value heads");
  }
  return {a.batch, a.seq, a.heads, a.kv_heads, a.head_dim};
}

}  // namespace

void CudaDevice::dropout_mask(std::uint8_t* mask, const DropoutDraw& d) {
  kernels::dropout_mask(stream_, mask, d);
  check_launch("dropout_mask");
}

void CudaDevice::apply_dropout(float* x, const std::uint8_t* mask, std::int64_t n, float scale,
                               cost::ElementType type) {
  require_fp32(type, "dropout");
  kernels::apply_dropout(stream_, x, mask, n, scale);
  check_launch("apply_dropout");
}

// The CUDA kernels need no workspace: `scratch` is the CPU device's (the same size on both, so
// that memory is predicted alike).
void CudaDevice::attention(const float* qkv, float* probs, float* out, const AttentionShape& a,
                           const AttentionDropout& drop, float* /*scratch*/) {
  require_fp32(a.compute, "attention");
  kernels::attention(stream_, qkv, probs, out, heads_of(a), {drop.mask, drop.scale});
  check_launch("attention");
}

void CudaDevice::attention_backward(const float* qkv, const float* out, const float* dout,
                                    float* probs, float* dqkv, const AttentionShape& a,
                                    const AttentionDropout& drop, float* /*scratch*/) {
  require_fp32(a.compute, "attention backward");
  kernels::attention_backward(stream_, qkv, out, dout, probs, dqkv, heads_of(a),
                              {drop.mask, drop.scale});
  check_launch("attention_backward");
}

void CudaDevice::norm(const float* x, const float* gamma, const float* beta, float* y, float* stats,
                      std::int64_t rows, std::int64_t cols, float eps) {
  kernels::norm(stream_, x, gamma, beta, y, stats, rows, cols, eps);
  check_launch("norm");
}

void CudaDevice::norm_backward(const float* x, const float* gamma, const float* stats,
                               const float* dy, float* dx, float* dgamma, float* dbeta,
                               std::int64_t rows, std::int64_t cols) {
  kernels::norm_backward(stream_, x, gamma, stats, dy, dx, dgamma, dbeta, rows, cols);
  check_launch("norm_backward");
}

void CudaDevice::rotary(float* qkv, const AttentionShape& a, float theta, bool inverse) {
  kernels::rotary(stream_, qkv, heads_of(a), theta, inverse);
  check_launch("rotary");
}

void CudaDevice::add_positions(float* x, const float* table, std::int64_t tokens, std::int64_t seq,
                               std::int64_t dim) {
  kernels::add_positions(stream_, x, table, tokens, seq, dim);
  check_launch("add_positions");
}

void CudaDevice::positions_backward(const float* dx, float* dtable, std::int64_t tokens,
                                    std::int64_t seq, std::int64_t dim) {
  kernels::positions_backward(stream_, dx, dtable, tokens, seq, dim);
  check_launch("positions_backward");
}

void CudaDevice::embedding(const std::int32_t* ids, const float* table, float* out,
                           std::int64_t tokens, std::int64_t dim, std::int64_t first_id,
                           std::int64_t held) {
  kernels::embedding(stream_, ids, table, out, tokens, dim, first_id, held);
  check_launch("embedding");
}

void CudaDevice::embedding_backward(const std::int32_t* ids, const float* dout, float* grad_table,
                                    std::int64_t tokens, std::int64_t dim, std::int64_t first_id,
                                    std::int64_t held) {
  kernels::embedding_backward(stream_, ids, dout, grad_table, tokens, dim, first_id, held);
  check_launch("embedding_backward");
}

namespace {

Error no_vocab_parallel_loss() {
  return Error("the vocab-parallel loss of tensor parallelism runs on the CPU backend only");
}

}  // namespace

void CudaDevice::row_max(const float*, float*, std::int64_t, std::int64_t) {
  throw no_vocab_parallel_loss();
}

void CudaDevice::cross_entropy_sums(const float*, const std::int32_t*, const float*, float*,
                                    std::int64_t, std::int64_t, std::int64_t) {
  throw no_vocab_parallel_loss();
}

double CudaDevice::cross_entropy_finish(float*, const std::int32_t*, const float*, const float*,
                                        std::int64_t, std::int64_t, std::int64_t, float) {
  throw no_vocab_parallel_loss();
}

double CudaDevice::softmax_cross_entropy(float* logits, const std::int32_t* targets,
                                         std::int64_t tokens, std::int64_t vocab,
                                         float grad_scale) {
  kernels::softmax_cross_entropy(stream_, logits, targets, tokens, vocab, grad_scale,
                                 partials(scratch_), result(scratch_));
  check_launch("softmax_cross_entropy");
  return fetch_result();
}

void CudaDevice::axpy(float alpha, const float* x, float* y, std::int64_t n) {
  kernels::axpy(stream_, alpha, x, y, n);
  check_launch("axpy");
}

void CudaDevice::scale(float* x, float alpha, std::int64_t n) {
  kernels::scale(stream_, x, alpha, n);
  check_launch("scale");
}

void CudaDevice::fill(float* x, float value, std::int64_t n) {
  kernels::fill(stream_, x, value, n);
  check_launch("fill");
}

void CudaDevice::copy(const float* from, float* to, std::int64_t n) {
  if (n <= 0) return;
  check(cudaMemcpyAsync(to, from, static_cast<std::size_t>(n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync (device copy)");
}

double CudaDevice::sum_squares(const float* x, std::int64_t n) {
  kernels::sum_squares(stream_, x, n, partials(scratch_), result(scratch_));
  check_launch("sum_squares");
  return fetch_result();
}

bool CudaDevice::any_non_finite(const float* x, std::int64_t n) {
  check(cudaMemsetAsync(flag(scratch_), 0, sizeof(int), stream_), "cudaMemsetAsync (flag)");
  kernels::flag_non_finite(stream_, x, n, flag(scratch_));
  check_launch("flag_non_finite");
  int host = 0;
  check(cudaMemcpyAsync(&host, flag(scratch_), sizeof host, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (non-finite flag)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return host != 0;
}

void CudaDevice::adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, std::int64_t t) {
  if (t < 1) throw Error("adam: the step must be 1 or more (got " + std::to_string(t) + ")");
  const double steps = static_cast<double>(t);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), steps);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), steps);
  kernels::adam(stream_, w, g, m, v, n, lr, beta1, beta2, eps, weight_decay,
                static_cast<float>(lr / bc1), static_cast<float>(std::sqrt(bc2)));
  check_launch("adam");
}

void CudaDevice::sgd(float* w, const float* g, float* buf, std::int64_t n, float lr,
                     float momentum) {
  if (momentum > 0.0f && buf == nullptr) throw Error("sgd: momentum needs a buffer");
  kernels::sgd(stream_, w, g, buf, n, lr, momentum);
  check_launch("sgd");
}

void CudaDevice::upload(const void* host, void* device, std::int64_t bytes) {
  if (bytes <= 0) return;
  check(cudaMemcpyAsync(device, host, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice,
                        stream_),
        "cudaMemcpyAsync (upload)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (upload)");
}

void CudaDevice::download(const void* device, void* host, std::int64_t bytes) {
  if (bytes <= 0) return;
  check(cudaMemcpyAsync(host, device, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost,
                        stream_),
        "cudaMemcpyAsync (download)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (download)");
}

void CudaDevice::synchronize() {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace dtplan::runtime
