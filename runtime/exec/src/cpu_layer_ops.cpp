// Attention runs one (sequence, head) at a time, its GEMMs reading the head's columns of the
// fused QKV in place (rows `row` elements apart):
//   forward   p = softmax_causal(q k^T / sqrt(d)),  o = p v
//   backward  dv += p^T do,  dp = do v^T,  ds = p (dp - rowsum(do o)) / sqrt(d),
//             dq = ds k,  dk += ds^T q
// (rowsum(p dp) = do . o, the identity FlashAttention's backward uses), key and value
// gradients summed over the heads of their group.
#include "cpu_layer_ops.hpp"

#include <algorithm>
#include <cmath>

namespace dtplan::runtime::cpu {
namespace {

// Where one (sequence, head)'s operands start.
struct Head {
  const AttentionShape& a;
  std::int64_t b, h;
  std::int64_t g() const { return h / (a.heads / a.kv_heads); }
  std::int64_t first_row() const { return b * a.seq; }
  std::int64_t q(std::int64_t width) const { return first_row() * width + h * a.head_dim; }
  std::int64_t k() const { return first_row() * a.row() + (a.heads + g()) * a.head_dim; }
  std::int64_t v() const {
    return first_row() * a.row() + (a.heads + a.kv_heads + g()) * a.head_dim;
  }
  std::int64_t p() const { return (b * a.heads + h) * a.seq * a.seq; }
};

float score_scale(const AttentionShape& a) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head_dim)));
}

}  // namespace

void attention(const CpuKernels& k, const float* qkv, float* probs, float* out,
               const AttentionShape& a, float* /*scratch*/) {
  const std::int64_t S = a.seq, d = a.head_dim, row = a.row(), q_width = a.heads * d;
  for (std::int64_t b = 0; b < a.batch; ++b) {
    for (std::int64_t h = 0; h < a.heads; ++h) {
      const Head at{a, b, h};
      float* p = probs + at.p();
      k.gemm_ld(false, true, S, S, d, score_scale(a), qkv + at.q(row), row, qkv + at.k(), row, 0, p,
                S);
      k.causal_softmax(p, S, S);
      k.gemm_ld(false, false, S, d, S, 1, p, S, qkv + at.v(), row, 0, out + at.q(q_width), q_width);
    }
  }
}

void attention_backward(const CpuKernels& k, const float* qkv, const float* out, const float* dout,
                        float* probs, float* dqkv, const AttentionShape& a, float* scratch) {
  const std::int64_t S = a.seq, d = a.head_dim, row = a.row(), q_width = a.heads * d;
  float* dp = scratch;  // seq x seq
  std::fill(dqkv, dqkv + a.tokens() * row, 0.0f);
  const float scale = score_scale(a);
  for (std::int64_t b = 0; b < a.batch; ++b) {
    for (std::int64_t h = 0; h < a.heads; ++h) {
      const Head at{a, b, h};
      float* p = probs + at.p();
      const float* o = out + at.q(q_width);
      const float* dO = dout + at.q(q_width);
      k.gemm_ld(true, false, S, d, S, 1, p, S, dO, q_width, 1, dqkv + at.v(), row);
      k.gemm_ld(false, true, S, S, d, 1, dO, q_width, qkv + at.v(), row, 0, dp, S);
      for (std::int64_t i = 0; i < S; ++i) {
        double delta = 0;  // rowsum(p dp) = do_i . o_i
        for (std::int64_t e = 0; e < d; ++e)
          delta += double{dO[i * q_width + e]} * o[i * q_width + e];
        const auto di = static_cast<float>(delta);
        float* pi = p + i * S;
        const float* dpi = dp + i * S;
        for (std::int64_t j = 0; j < S; ++j)
          pi[j] = pi[j] * (dpi[j] - di) * scale;  // zero above the diagonal
      }
      k.gemm_ld(false, false, S, d, S, 1, p, S, qkv + at.k(), row, 1, dqkv + at.q(row), row);
      k.gemm_ld(true, false, S, d, S, 1, p, S, qkv + at.q(row), row, 1, dqkv + at.k(), row);
    }
  }
}

void norm(const float* x, const float* gamma, const float* beta, float* y, float* stats,
          std::int64_t rows, std::int64_t cols, float eps) {
  const auto n = static_cast<double>(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0;
    if (beta != nullptr) {
      for (std::int64_t c = 0; c < cols; ++c)
        mean += xr[c];
      mean /= n;
    }
    double square = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      square += (xr[c] - mean) * (xr[c] - mean);
    const double rstd = 1.0 / std::sqrt(square / n + eps);
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto xhat = static_cast<float>((xr[c] - mean) * rstd);
      y[r * cols + c] = xhat * gamma[c] + (beta != nullptr ? beta[c] : 0.0f);
    }
    stats[2 * r] = static_cast<float>(mean);
    stats[2 * r + 1] = static_cast<float>(rstd);
  }
}

// With g = dy gamma and xhat = (x - mean) rstd:
//   LayerNorm  dx = rstd (g - mean(g) - xhat mean(g xhat))
//   RMSNorm    dx = rstd (g - xhat mean(g xhat))
void norm_backward(const float* x, const float* gamma, const float* stats, const float* dy,
                   float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols) {
  const auto n = static_cast<double>(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    const double mean = stats[2 * r], rstd = stats[2 * r + 1];
    double g_sum = 0, gx_sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (xr[c] - mean) * rstd, g = double{dyr[c]} * gamma[c];
      g_sum += g;
      gx_sum += g * xhat;
      dgamma[c] += static_cast<float>(dyr[c] * xhat);
      if (dbeta != nullptr) dbeta[c] += dyr[c];
    }
    const double g_mean = dbeta != nullptr ? g_sum / n : 0.0, gx_mean = gx_sum / n;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (xr[c] - mean) * rstd, g = double{dyr[c]} * gamma[c];
      dx[r * cols + c] += static_cast<float>(rstd * (g - g_mean - xhat * gx_mean));
    }
  }
}

void rotary(float* qkv, const AttentionShape& a, float theta, bool inverse) {
  const std::int64_t d = a.head_dim, half = d / 2, heads = a.heads + a.kv_heads;
  for (std::int64_t t = 0; t < a.tokens(); ++t) {
    const auto pos = static_cast<double>(t % a.seq);
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle =
          pos * std::pow(double{theta}, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const auto c = static_cast<float>(std::cos(angle));
      const auto s = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
      for (std::int64_t h = 0; h < heads; ++h) {
        float* x = qkv + t * a.row() + h * d;
        const float lo = x[i], hi = x[i + half];
        x[i] = lo * c - hi * s;
        x[i + half] = hi * c + lo * s;
      }
    }
  }
}

void add_positions(float* x, const float* table, std::int64_t tokens, std::int64_t seq,
                   std::int64_t dim) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* p = table + (t % seq) * dim;
    for (std::int64_t e = 0; e < dim; ++e)
      x[t * dim + e] += p[e];
  }
}

void positions_backward(const float* dx, float* dtable, std::int64_t tokens, std::int64_t seq,
                        std::int64_t dim) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* p = dtable + (t % seq) * dim;
    for (std::int64_t e = 0; e < dim; ++e)
      p[e] += dx[t * dim + e];
  }
}

}  // namespace dtplan::runtime::cpu
