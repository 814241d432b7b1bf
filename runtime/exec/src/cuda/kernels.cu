// The CUDA kernels of CudaDevice: element-wise maps (one functor each, run by one grid-stride
// kernel template), a column reduction for bias gradients, the row-wise softmax
// cross-entropy, attention, norms and positions, and deterministic sum reductions. Kept in one file
// so that nvcc compiles once per architecture.
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

// ---- attention, norms, positions -------------------------------------------------------------
// Direct loops, one output element per thread (no tensor cores, no tiling): correctness first;
// a measurement states it. qkv row: [q: heads*d | k: kv_heads*d | v: kv_heads*d]; head h reads
// key/value group h / (heads / kv_heads); probs[b, h, i, j] (j <= i; zero above).
struct Geometry {
  std::int64_t batch, seq, heads, kv_heads, d;
  __device__ std::int64_t row() const { return (heads + 2 * kv_heads) * d; }
  __device__ std::int64_t group(std::int64_t h) const { return h / (heads / kv_heads); }
  __device__ std::int64_t q_at(std::int64_t t, std::int64_t h) const { return t * row() + h * d; }
  __device__ std::int64_t k_at(std::int64_t t, std::int64_t g) const {
    return t * row() + (heads + g) * d;
  }
  __device__ std::int64_t v_at(std::int64_t t, std::int64_t g) const {
    return t * row() + (heads + kv_heads + g) * d;
  }
  __device__ std::int64_t p_at(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return ((b * heads + h) * seq + i) * seq;
  }
};

__device__ float dot(const float* a, const float* b, std::int64_t n) {
  float acc = 0;
  for (std::int64_t e = 0; e < n; ++e)
    acc += a[e] * b[e];
  return acc;
}

// x as the dropout leaves element `at` of the probabilities (x itself without dropout).
__device__ float kept(const ProbsDropout& drop, std::int64_t at, float x) {
  if (drop.mask == nullptr) return x;
  return x * (drop.mask[at] != 0 ? drop.scale : 0.0f);
}

// Over batch x heads x seq x seq: the scaled score q_i . k_j, zero above the diagonal.
struct Scores {
  const float* qkv;
  float* probs;
  Geometry g;
  float scale;
  __device__ void operator()(std::int64_t n) const {
    const std::int64_t S = g.seq, j = n % S, i = (n / S) % S, bh = n / (S * S);
    const std::int64_t h = bh % g.heads, b = bh / g.heads;
    probs[n] =
        j > i ? 0.0f
              : scale * dot(qkv + g.q_at(b * S + i, h), qkv + g.k_at(b * S + j, g.group(h)), g.d);
  }
};

// One block per row of batch x heads x seq; entries j <= i.
__global__ void causal_softmax_kernel(float* probs, std::int64_t rows, std::int64_t seq) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* x = probs + r * seq;
    const std::int64_t last = r % seq;
    float local_max = -INFINITY;
    for (std::int64_t j = threadIdx.x; j <= last; j += blockDim.x)
      local_max = fmaxf(local_max, x[j]);
    const float row_max = block_reduce(local_max, Max{}, -INFINITY);
    float local_sum = 0;
    for (std::int64_t j = threadIdx.x; j <= last; j += blockDim.x)
      local_sum += expf(x[j] - row_max);
    const float row_sum = block_reduce(local_sum, Sum{}, 0.0f);
    for (std::int64_t j = threadIdx.x; j <= last; j += blockDim.x)
      x[j] = expf(x[j] - row_max) / row_sum;
  }
}

// Over tokens x heads x d: y_i = sum over j <= i of m_ij x_j, x the key or value group's columns
// of qkv (from column x_col), y a head's columns in rows y_width wide. Forward: out = p v;
// backward: dq = ds k.
struct RowsTimesGroup {
  const float* m;
  const float* qkv;
  std::int64_t x_col;
  float* y;
  std::int64_t y_width;
  Geometry g;
  ProbsDropout drop;  // forward p v: m dropped and scaled where the mask says
  __device__ void operator()(std::int64_t n) const {
    const std::int64_t e = n % g.d, h = (n / g.d) % g.heads, t = n / (g.d * g.heads);
    const std::int64_t b = t / g.seq, i = t % g.seq, kv = g.group(h);
    const std::int64_t at = g.p_at(b, h, i);
    const float* p = m + at;
    float acc = 0;
    for (std::int64_t j = 0; j <= i; ++j)
      acc += kept(drop, at + j, p[j]) * qkv[(b * g.seq + j) * g.row() + x_col + kv * g.d + e];
    y[t * y_width + h * g.d + e] = acc;
  }
};

// Over tokens x kv_heads x d: y_j = sum over the group's heads h and i >= j of m_ij x_i (head
// h's columns of rows x_width wide), into the group's columns of dqkv from column y_col.
// Backward: dv = p^T do, dk = ds^T q.
struct GroupTimesRows {
  const float* m;
  const float* x;
  std::int64_t x_width;
  float* dqkv;
  std::int64_t y_col;
  Geometry g;
  ProbsDropout drop;  // dv: the dropped probabilities
  __device__ void operator()(std::int64_t n) const {
    const std::int64_t e = n % g.d, kv = (n / g.d) % g.kv_heads, t = n / (g.d * g.kv_heads);
    const std::int64_t b = t / g.seq, j = t % g.seq, per = g.heads / g.kv_heads;
    float acc = 0;
    for (std::int64_t h = kv * per; h < (kv + 1) * per; ++h) {
      for (std::int64_t i = j; i < g.seq; ++i) {
        const std::int64_t at = g.p_at(b, h, i) + j;
        acc += kept(drop, at, m[at]) * x[(b * g.seq + i) * x_width + h * g.d + e];
      }
    }
    dqkv[t * g.row() + y_col + kv * g.d + e] = acc;
  }
};

// In place over batch x heads x seq x seq: ds = p (do_i . v_j - do_i . o_i) x scale.
struct ScoreGrad {
  float* probs;
  const float* qkv;
  const float* out;
  const float* dout;
  Geometry g;
  float scale;
  ProbsDropout drop;  // dp passes back through the mask
  __device__ void operator()(std::int64_t n) const {
    const std::int64_t S = g.seq, j = n % S, i = (n / S) % S, bh = n / (S * S);
    const std::int64_t h = bh % g.heads, b = bh / g.heads;
    if (j > i) {
      probs[n] = 0.0f;
      return;
    }
    const std::int64_t o = ((b * S + i) * g.heads + h) * g.d;
    const float dp = kept(drop, n, dot(dout + o, qkv + g.v_at(b * S + j, g.group(h)), g.d));
    probs[n] *= (dp - dot(dout + o, out + o, g.d)) * scale;
  }
};

// One block per row: LayerNorm (beta given) or RMSNorm; stats = (mean, 1/rms).
__global__ void norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                            float* stats, std::int64_t rows, std::int64_t cols, float eps) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float local = 0;
    if (beta != nullptr) {
      for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        local += xr[c];
    }
    const float mean = block_reduce(local, Sum{}, 0.0f) / static_cast<float>(cols);
    local = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      local += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = rsqrtf(block_reduce(local, Sum{}, 0.0f) / static_cast<float>(cols) + eps);
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      y[r * cols + c] = (xr[c] - mean) * rstd * gamma[c] + (beta != nullptr ? beta[c] : 0.0f);
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

// One block per row: dx += rstd (g - mean(g) [LayerNorm] - xhat mean(g xhat)), g = dy gamma.
__global__ void norm_backward_kernel(const float* x, const float* gamma, const float* stats,
                                     const float* dy, float* dx, bool layernorm, std::int64_t rows,
                                     std::int64_t cols) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    const float mean = stats[2 * r], rstd = stats[2 * r + 1];
    float g_local = 0, gx_local = 0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = dyr[c] * gamma[c];
      g_local += g;
      gx_local += g * (xr[c] - mean) * rstd;
    }
    const float n = static_cast<float>(cols);
    const float g_mean = layernorm ? block_reduce(g_local, Sum{}, 0.0f) / n : 0.0f;
    const float gx_mean = block_reduce(gx_local, Sum{}, 0.0f) / n;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      dx[r * cols + c] += rstd * (dyr[c] * gamma[c] - g_mean - xhat * gx_mean);
    }
  }
}

// Over columns: dgamma += sum_r dy xhat, dbeta += sum_r dy (rows in order: deterministic).
struct NormParamGrad {
  const float* x;
  const float* stats;
  const float* dy;
  float* dgamma;
  float* dbeta;
  std::int64_t rows, cols;
  __device__ void operator()(std::int64_t c) const {
    float dg = 0, db = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float d = dy[r * cols + c];
      dg += d * (x[r * cols + c] - stats[2 * r]) * stats[2 * r + 1];
      db += d;
    }
    dgamma[c] += dg;
    if (dbeta != nullptr) dbeta[c] += db;
  }
};

// Over tokens x (heads + kv_heads) x half: rotates pair (i, i + half) of each query and key head.
struct Rotary {
  float* qkv;
  Geometry g;
  double theta;
  bool inverse;
  __device__ void operator()(std::int64_t n) const {
    const std::int64_t half = g.d / 2, i = n % half, hh = (n / half) % (g.heads + g.kv_heads);
    const std::int64_t t = n / (half * (g.heads + g.kv_heads));
    const double angle = static_cast<double>(t % g.seq) *
                         pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(g.d));
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(inverse ? -sin(angle) : sin(angle));
    float* x = qkv + t * g.row() + hh * g.d;
    const float lo = x[i], hi = x[i + half];
    x[i] = lo * c - hi * s;
    x[i + half] = hi * c + lo * s;
  }
};

struct AddPositions {
  float* x;
  const float* table;
  std::int64_t seq, dim;
  __device__ void operator()(std::int64_t n) const {
    x[n] += table[((n / dim) % seq) * dim + n % dim];
  }
};

// Over seq x dim: sums the batch's gradients of one position in order (no atomics).
struct PositionsBackward {
  const float* dx;
  float* dtable;
  std::int64_t batch, seq, dim;
  __device__ void operator()(std::int64_t n) const {
    float acc = 0;
    for (std::int64_t b = 0; b < batch; ++b)
      acc += dx[b * seq * dim + n];
    dtable[n] += acc;
  }
};

// A negative id yields a NaN row (forward) and no update (backward) rather than a read or
// write before the table. (The table's row count is not part of the Device API.)
struct Embedding {
  const std::int32_t* ids;
  const float* table;
  float* out;
  std::int64_t dim, first_id, held;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t id = ids[i / dim];
    if (id < 0) {
      out[i] = NAN;
      return;
    }
    const std::int64_t row = id - first_id;
    out[i] = row >= 0 && row < held ? table[row * dim + i % dim] : 0.0f;
  }
};

struct EmbeddingBackward {
  const std::int32_t* ids;
  const float* dout;
  float* grad_table;
  std::int64_t dim, first_id, held;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t row = std::int64_t{ids[i / dim]} - first_id;
    if (row >= 0 && row < held) atomicAdd(grad_table + row * dim + i % dim, dout[i]);
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

namespace {
Geometry geometry(const Heads& a) {
  return {a.batch, a.seq, a.heads, a.kv_heads, a.head_dim};
}
float score_scale(const Heads& a) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(a.head_dim)));
}
unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}
}  // namespace

void attention(cudaStream_t stream, const float* qkv, float* probs, float* out, const Heads& a,
               const ProbsDropout& drop) {
  const Geometry g = geometry(a);
  const std::int64_t rows = a.batch * a.heads * a.seq;
  for_each(stream, rows * a.seq, Scores{qkv, probs, g, score_scale(a)});
  if (rows > 0)
    causal_softmax_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(probs, rows, a.seq);
  const std::int64_t v_col = (a.heads + a.kv_heads) * a.head_dim, q_width = a.heads * a.head_dim;
  for_each(stream, a.batch * a.seq * a.heads * a.head_dim,
           RowsTimesGroup{probs, qkv, v_col, out, q_width, g, drop});
}

// rowsum(p dp) = do . o holds with dropout too (o is the dropped probabilities times v).
void attention_backward(cudaStream_t stream, const float* qkv, const float* out, const float* dout,
                        float* probs, float* dqkv, const Heads& a, const ProbsDropout& drop) {
  const Geometry g = geometry(a);
  const std::int64_t tokens = a.batch * a.seq, q_width = a.heads * a.head_dim;
  const std::int64_t row = q_width + 2 * a.kv_heads * a.head_dim;
  const std::int64_t k_col = q_width, v_col = q_width + a.kv_heads * a.head_dim;
  const std::int64_t groups = tokens * a.kv_heads * a.head_dim;
  const ProbsDropout none{nullptr, 1.0f};
  for_each(stream, groups, GroupTimesRows{probs, dout, q_width, dqkv, v_col, g, drop});
  for_each(stream, a.batch * a.heads * a.seq * a.seq,
           ScoreGrad{probs, qkv, out, dout, g, score_scale(a), drop});
  for_each(stream, tokens * a.heads * a.head_dim,
           RowsTimesGroup{probs, qkv, k_col, dqkv, row, g, none});
  for_each(stream, groups, GroupTimesRows{probs, qkv, row, dqkv, k_col, g, none});
}

namespace {

// Over samples x per_sample (dropout.hpp): 1 where the element is kept.
struct DropoutMask {
  std::uint8_t* mask;
  DropoutDraw d;
  std::uint32_t threshold;
  __device__ void operator()(std::int64_t n) const {
    const std::int64_t g = n / d.per_sample, e = n % d.per_sample, S = d.causal_seq;
    if (S > 0 && e % S > (e / S) % S) {  // above the diagonal: no draw
      mask[n] = 0;
      return;
    }
    const std::uint64_t stream =
        dropout_stream(d.seed, d.step, d.first_sample + g, d.layer, d.site);
    mask[n] =
        dropout_keep(stream, static_cast<std::uint64_t>(d.element_offset + e), threshold) ? 1 : 0;
  }
};

struct ApplyDropout {
  float* x;
  const std::uint8_t* mask;
  float scale;
  __device__ void operator()(std::int64_t i) const { x[i] *= mask[i] != 0 ? scale : 0.0f; }
};

}  // namespace

void dropout_mask(cudaStream_t stream, std::uint8_t* mask, const DropoutDraw& d) {
  for_each(stream, d.elements(), DropoutMask{mask, d, d.threshold()});
}

void apply_dropout(cudaStream_t stream, float* x, const std::uint8_t* mask, std::int64_t n,
                   float scale) {
  for_each(stream, n, ApplyDropout{x, mask, scale});
}

void norm(cudaStream_t stream, const float* x, const float* gamma, const float* beta, float* y,
          float* stats, std::int64_t rows, std::int64_t cols, float eps) {
  if (rows <= 0) return;
  norm_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(x, gamma, beta, y, stats, rows, cols, eps);
}

void norm_backward(cudaStream_t stream, const float* x, const float* gamma, const float* stats,
                   const float* dy, float* dx, float* dgamma, float* dbeta, std::int64_t rows,
                   std::int64_t cols) {
  if (rows <= 0) return;
  norm_backward_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(x, gamma, stats, dy, dx,
                                                                  dbeta != nullptr, rows, cols);
  for_each(stream, cols, NormParamGrad{x, stats, dy, dgamma, dbeta, rows, cols});
}

void rotary(cudaStream_t stream, float* qkv, const Heads& a, double theta, bool inverse) {
  const std::int64_t half = a.head_dim / 2;
  for_each(stream, a.batch * a.seq * (a.heads + a.kv_heads) * half,
           Rotary{qkv, geometry(a), theta, inverse});
}

void add_positions(cudaStream_t stream, float* x, const float* table, std::int64_t tokens,
                   std::int64_t seq, std::int64_t dim) {
  for_each(stream, tokens * dim, AddPositions{x, table, seq, dim});
}

void positions_backward(cudaStream_t stream, const float* dx, float* dtable, std::int64_t tokens,
                        std::int64_t seq, std::int64_t dim) {
  for_each(stream, seq * dim, PositionsBackward{dx, dtable, tokens / seq, seq, dim});
}

void embedding(cudaStream_t stream, const std::int32_t* ids, const float* table, float* out,
               std::int64_t tokens, std::int64_t dim, std::int64_t first_id, std::int64_t held) {
  for_each(stream, tokens * dim, Embedding{ids, table, out, dim, first_id, held});
}

void embedding_backward(cudaStream_t stream, const std::int32_t* ids, const float* dout,
                        float* grad_table, std::int64_t tokens, std::int64_t dim,
                        std::int64_t first_id, std::int64_t held) {
  for_each(stream, tokens * dim, EmbeddingBackward{ids, dout, grad_table, dim, first_id, held});
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
