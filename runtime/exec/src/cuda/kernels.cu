// The CUDA kernels of CudaDevice: element-wise maps (one functor each, run by one grid-stride
// kernel template), a column reduction for bias gradients, the row-wise softmax
// cross-entropy, and deterministic sum reductions. Kept in one file so that nvcc compiles
// once per architecture.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels.hpp"

namespace dtplan::runtime::kernels {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 8192;  // grid-stride loops cover the rest

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <typename F>
__global__ void map_kernel(std::int64_t n, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(i);
  }
}

template <typename F>
void for_each(cudaStream_t stream, std::int64_t n, F f) {
  if (n <= 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, f);
}

// ---- reductions ----------------------------------------------------------------------------

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Every thread of the block gets the reduction of all threads' `v` (blockDim.x a multiple of
// 32). Safe to call repeatedly: the leading barrier protects the shared slots of the last call.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T slots[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_reduce(lane < blockDim.x / 32 ? slots[lane] : identity, op);
    if (lane == 0) slots[0] = v;
  }
  __syncthreads();
  return slots[0];
}

__global__ void finish_sum_kernel(const double* partials, int count, double* result) {
  const double v = threadIdx.x < count ? partials[threadIdx.x] : 0.0;
  const double total = block_reduce(v, Sum{}, 0.0);
  if (threadIdx.x == 0) *result = total;
}

__global__ void sum_squares_kernel(const float* x, std::int64_t n, double* partials) {
  double acc = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double xi = x[i];
    acc += xi * xi;
  }
  acc = block_reduce(acc, Sum{}, 0.0);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// One block per row (rows strided over the grid). Thread 0 accumulates its rows' losses in
// row order, so the per-block partials, and the total, are deterministic.
__global__ void softmax_ce_kernel(float* logits, const std::int32_t* targets, std::int64_t tokens,
                                  std::int64_t vocab, float grad_scale, double* partials) {
  double loss = 0;
  for (std::int64_t row = blockIdx.x; row < tokens; row += gridDim.x) {
    float* x = logits + row * vocab;
    const std::int32_t target = targets[row];
    float local_max = -INFINITY;
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
      local_max = fmaxf(local_max, x[j]);
    const float row_max = block_reduce(local_max, Max{}, -INFINITY);
    float local_sum = 0;
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
      local_sum += expf(x[j] - row_max);
    const float row_sum = block_reduce(local_sum, Sum{}, 0.0f);
    if (threadIdx.x == 0) {
      // An out-of-range target makes the loss NaN rather than reading past the row.
      const bool valid = target >= 0 && target < vocab;
      loss += valid ? static_cast<double>(row_max) + log(static_cast<double>(row_sum)) - x[target]
                    : NAN;
    }
    __syncthreads();  // x[target] is read before the row is overwritten
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float p = expf(x[j] - row_max) / row_sum;
      x[j] = (p - (j == target ? 1.0f : 0.0f)) * grad_scale;
    }
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = loss;
}

// grad_bias[c] += sum over rows of dy[r, c]: 32 columns per block, 8 row lanes per column,
// combined in shared memory in a fixed order.
constexpr int kBiasCols = 32, kBiasLanes = 8;

__global__ void bias_grad_kernel(const float* dy, float* grad_bias, std::int64_t rows,
                                 std::int64_t cols) {
  __shared__ float partial[kBiasLanes][kBiasCols];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kBiasCols + threadIdx.x;
  float acc = 0;
  if (c < cols) {
    for (std::int64_t r = threadIdx.y; r < rows; r += kBiasLanes)
      acc += dy[r * cols + c];
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0;
    for (int lane = 0; lane < kBiasLanes; ++lane)
      total += partial[lane][threadIdx.x];
    grad_bias[c] += total;
  }
}

// ---- element-wise functors -----------------------------------------------------------------

__device__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

struct AddBias {
  float* y;
  const float* bias;
  std::int64_t cols;
  __device__ void operator()(std::int64_t i) const { y[i] += bias[i % cols]; }
};

struct Gelu {
  const float* x;
  float* y;
  __device__ void operator()(std::int64_t i) const {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
  }
};

// d/dx [x/2 (1 + tanh u)] with u = c (x + a x^3): (1 + tanh u)/2 + x/2 (1 - tanh^2 u) c (1 + 3 a
// x^2)
struct GeluBackward {
  const float* x;
  const float* dy;
  float* dx;
  __device__ void operator()(std::int64_t i) const {
    const float v = x[i];
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
};

struct Swiglu {
  const float* g;
  const float* u;
  float* y;
  __device__ void operator()(std::int64_t i) const { y[i] = g[i] * sigmoid(g[i]) * u[i]; }
};

// silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g).
struct SwigluBackward {
  const float* g;
  const float* u;
  const float* dy;
  float* dg;
  float* du;
  __device__ void operator()(std::int64_t i) const {
    const float gi = g[i], s = sigmoid(gi);
    const float d = dy[i];
    dg[i] = d * u[i] * s * (1.0f + gi * (1.0f - s));
    du[i] = d * gi * s;
  }
};

// qkv row: [q: heads*hd | k: kv_heads*hd | v: kv_heads*hd]; head h reads kv group h / group.
struct ValueHeads {
  const float* qkv;
  float* out;
  std::int64_t heads, kv_heads, head_dim;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t out_width = heads * head_dim;
    const std::int64_t width = (heads + 2 * kv_heads) * head_dim;
    const std::int64_t t = i / out_width, h = (i % out_width) / head_dim, d = i % head_dim;
    const std::int64_t kv = h / (heads / kv_heads);
    out[i] = qkv[t * width + (heads + kv_heads + kv) * head_dim + d];
  }
};

struct ValueHeadsBackward {
  const float* dout;
  float* dqkv;
  std::int64_t heads, kv_heads, head_dim;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t width = (heads + 2 * kv_heads) * head_dim;
    const std::int64_t t = i / width, col = i % width;
    const std::int64_t v_begin = (heads + kv_heads) * head_dim;
    if (col < v_begin) {
      dqkv[i] = 0.0f;
      return;
    }
    const std::int64_t kv = (col - v_begin) / head_dim, d = (col - v_begin) % head_dim;
    const std::int64_t group = heads / kv_heads;
    const float* row = dout + t * heads * head_dim;
    float acc = 0;
    for (std::int64_t h = kv * group; h < (kv + 1) * group; ++h)
      acc += row[h * head_dim + d];
    dqkv[i] = acc;
  }
};

// A negative id yields a NaN row (forward) and no update (backward) rather than a read or
// write before the table. (The table's row count is not part of the Device API.)
struct Embedding {
  const std::int32_t* ids;
  const float* table;
  float* out;
  std::int64_t dim;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t id = ids[i / dim];
    out[i] = id >= 0 ? table[id * dim + i % dim] : NAN;
  }
};

struct EmbeddingBackward {
  const std::int32_t* ids;
  const float* dout;
  float* grad_table;
  std::int64_t dim;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t id = ids[i / dim];
    if (id >= 0) atomicAdd(grad_table + id * dim + i % dim, dout[i]);
  }
};

struct Axpy {
  float alpha;
  const float* x;
  float* y;
  __device__ void operator()(std::int64_t i) const { y[i] += alpha * x[i]; }
};

struct Scale {
  float* x;
  float alpha;
  __device__ void operator()(std::int64_t i) const { x[i] *= alpha; }
};

struct Fill {
  float* x;
  float value;
  __device__ void operator()(std::int64_t i) const { x[i] = value; }
};

struct FlagNonFinite {
  const float* x;
  int* flag;
  // Every writer stores the same 1, so the race between them is benign.
  __device__ void operator()(std::int64_t i) const {
    if (!isfinite(x[i])) *flag = 1;
  }
};

// PyTorch's Adam / AdamW (decoupled decay applied first), bc = 1 - beta^t:
//   w -= lr wd w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
struct Adam {
  float* w;
  const float* g;
  float* m;
  float* v;
  float lr, beta1, beta2, eps, weight_decay, step_size, root_correction2;
  __device__ void operator()(std::int64_t i) const {
    const float gi = g[i];
    float wi = w[i];
    if (weight_decay > 0.0f) wi -= lr * weight_decay * wi;
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - step_size * mi / (sqrtf(vi) / root_correction2 + eps);
  }
};

struct SgdMomentum {
  float* w;
  const float* g;
  float* buf;
  float lr, momentum;
  __device__ void operator()(std::int64_t i) const {
    const float b = momentum * buf[i] + g[i];
    buf[i] = b;
    w[i] -= lr * b;
  }
};

}  // namespace

// ---- launchers -----------------------------------------------------------------------------

void add_bias(cudaStream_t stream, float* y, const float* bias, std::int64_t rows,
              std::int64_t cols) {
  for_each(stream, rows * cols, AddBias{y, bias, cols});
}

void bias_grad(cudaStream_t stream, const float* dy, float* grad_bias, std::int64_t rows,
               std::int64_t cols) {
  if (cols <= 0) return;
  const auto blocks = static_cast<unsigned>((cols + kBiasCols - 1) / kBiasCols);
  bias_grad_kernel<<<blocks, dim3(kBiasCols, kBiasLanes), 0, stream>>>(dy, grad_bias, rows, cols);
}

void gelu(cudaStream_t stream, const float* x, float* y, std::int64_t n) {
  for_each(stream, n, Gelu{x, y});
}

void gelu_backward(cudaStream_t stream, const float* x, const float* dy, float* dx,
                   std::int64_t n) {
  for_each(stream, n, GeluBackward{x, dy, dx});
}

void swiglu(cudaStream_t stream, const float* g, const float* u, float* y, std::int64_t n) {
  for_each(stream, n, Swiglu{g, u, y});
}

void swiglu_backward(cudaStream_t stream, const float* g, const float* u, const float* dy,
                     float* dg, float* du, std::int64_t n) {
  for_each(stream, n, SwigluBackward{g, u, dy, dg, du});
}

void value_heads(cudaStream_t stream, const float* qkv, float* out, std::int64_t tokens,
                 std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
  for_each(stream, tokens * heads * head_dim, ValueHeads{qkv, out, heads, kv_heads, head_dim});
}

void value_heads_backward(cudaStream_t stream, const float* dout, float* dqkv, std::int64_t tokens,
                          std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
  for_each(stream, tokens * (heads + 2 * kv_heads) * head_dim,
           ValueHeadsBackward{dout, dqkv, heads, kv_heads, head_dim});
}

void embedding(cudaStream_t stream, const std::int32_t* ids, const float* table, float* out,
               std::int64_t tokens, std::int64_t dim) {
  for_each(stream, tokens * dim, Embedding{ids, table, out, dim});
}

void embedding_backward(cudaStream_t stream, const std::int32_t* ids, const float* dout,
                        float* grad_table, std::int64_t tokens, std::int64_t dim) {
  for_each(stream, tokens * dim, EmbeddingBackward{ids, dout, grad_table, dim});
}

void softmax_cross_entropy(cudaStream_t stream, float* logits, const std::int32_t* targets,
                           std::int64_t tokens, std::int64_t vocab, float grad_scale,
                           double* partials, double* result) {
  const int blocks = static_cast<int>(tokens < kReduceBlocks ? tokens : kReduceBlocks);
  if (blocks > 0) {
    softmax_ce_kernel<<<blocks, kThreads, 0, stream>>>(logits, targets, tokens, vocab, grad_scale,
                                                       partials);
  }
  finish_sum_kernel<<<1, kReduceBlocks, 0, stream>>>(partials, blocks, result);
}

void axpy(cudaStream_t stream, float alpha, const float* x, float* y, std::int64_t n) {
  for_each(stream, n, Axpy{alpha, x, y});
}

void scale(cudaStream_t stream, float* x, float alpha, std::int64_t n) {
  for_each(stream, n, Scale{x, alpha});
}

void fill(cudaStream_t stream, float* x, float value, std::int64_t n) {
  for_each(stream, n, Fill{x, value});
}

void sum_squares(cudaStream_t stream, const float* x, std::int64_t n, double* partials,
                 double* result) {
  const std::int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < kReduceBlocks ? wanted : kReduceBlocks);
  if (blocks > 0) sum_squares_kernel<<<blocks, kThreads, 0, stream>>>(x, n, partials);
  finish_sum_kernel<<<1, kReduceBlocks, 0, stream>>>(partials, blocks, result);
}

void flag_non_finite(cudaStream_t stream, const float* x, std::int64_t n, int* flag) {
  for_each(stream, n, FlagNonFinite{x, flag});
}

void adam(cudaStream_t stream, float* w, const float* g, float* m, float* v, std::int64_t n,
          float lr, float beta1, float beta2, float eps, float weight_decay, float step_size,
          float root_correction2) {
  for_each(stream, n,
           Adam{w, g, m, v, lr, beta1, beta2, eps, weight_decay, step_size, root_correction2});
}

void sgd(cudaStream_t stream, float* w, const float* g, float* buf, std::int64_t n, float lr,
         float momentum) {
  if (momentum > 0.0f) {
    for_each(stream, n, SgdMomentum{w, g, buf, lr, momentum});
  } else {
    for_each(stream, n, Axpy{-lr, g, w});
  }
}

}  // namespace dtplan::runtime::kernels
