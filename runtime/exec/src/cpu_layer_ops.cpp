// Attention runs one (sequence, head) at a time, its GEMMs reading the head's columns of the
// fused QKV in place (rows `row` elements apart):
//   forward   p = softmax_causal(q k^T / sqrt(d)),  o = p v
//   backward  dv += p^T do,  dp = do v^T,  ds = p (dp - rowsum(do o)) / sqrt(d),
//             dq = ds k,  dk += ds^T q
// (rowsum(p dp) = do . o, the identity FlashAttention's backward uses), key and value
// gradients summed over the heads of their group. Under 16-bit compute the rounding points are
// those of Device::attention.
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

namespace {

bool is_half(const AttentionShape& a) {
  return a.compute != cost::ElementType::fp32;
}

// Rounds `cols` columns of `rows` rows `ld` apart.
void round_columns(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                   cost::ElementType type) {
  for (std::int64_t r = 0; r < rows; ++r)
    round_to(x + r * ld, cols, type);
}

// x[rows x cols] (ld apart) += y[rows x cols] (dense).
void add_columns(const float* y, float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      x[r * ld + c] += y[r * cols + c];
  }
}

// One head's dropout mask (null without dropout).
const std::uint8_t* head_mask(const AttentionDropout& drop, const Head& at) {
  return drop.mask == nullptr ? nullptr : drop.mask + at.p();
}

// The probabilities p v reads: p itself, or a copy in `to` -- rounded under 16-bit compute,
// then dropped and scaled with the head's mask (as apply_dropout on a 16-bit tensor).
const float* probs_for_pv(const float* p, float* to, const Head& at, const std::uint8_t* mask,
                          float scale) {
  const auto& a = at.a;
  const std::int64_t n = a.seq * a.seq;
  if (!is_half(a) && mask == nullptr) return p;
  std::copy(p, p + n, to);
  round_to(to, n, a.compute);
  if (mask != nullptr) apply_dropout(to, mask, n, scale, a.compute);
  return to;
}

}  // namespace

void dropout_mask(std::uint8_t* mask, const DropoutDraw& d) {
  const std::uint32_t threshold = d.threshold();
  const std::int64_t S = d.causal_seq;
  for (std::int64_t g = 0; g < d.samples; ++g) {
    const std::uint64_t stream =
        dropout_stream(d.seed, d.step, d.first_sample + g, d.layer, d.site);
    std::uint8_t* m = mask + g * d.per_sample;
    // Rows of `width`, drawn up to `last` (the diagonal of a causal square), zero after.
    const std::int64_t width = S > 0 ? S : d.per_sample;
    for (std::int64_t row = 0; row < d.per_sample / width; ++row) {
      const std::int64_t last = S > 0 ? row % S : width - 1;
      std::uint8_t* r = m + row * width;
      cpu_kernels().dropout_draw(r, stream,
                                 static_cast<std::uint64_t>(d.element_offset + row * width),
                                 last + 1, threshold);
      std::fill(r + last + 1, r + width, std::uint8_t{0});
    }
  }
}

void apply_dropout(float* x, const std::uint8_t* mask, std::int64_t n, float scale,
                   cost::ElementType type) {
  float factor = scale;
  round_to(&factor, 1, type);
  cpu_kernels().drop(x, mask, n, factor);
  round_to(x, n, type);
}

void attention(const CpuKernels& k, const float* qkv, float* probs, float* out,
               const AttentionShape& a, const AttentionDropout& drop, float* scratch) {
  const std::int64_t S = a.seq, d = a.head_dim, row = a.row(), q_width = a.heads * d;
  for (std::int64_t b = 0; b < a.batch; ++b) {
    for (std::int64_t h = 0; h < a.heads; ++h) {
      const Head at{a, b, h};
      float* p = probs + at.p();
      k.gemm_ld(false, true, S, S, d, score_scale(a), qkv + at.q(row), row, qkv + at.k(), row, 0, p,
                S);
      k.causal_softmax(p, S, S);
      const float* pv = probs_for_pv(p, scratch, at, head_mask(drop, at), drop.scale);
      k.gemm_ld(false, false, S, d, S, 1, pv, S, qkv + at.v(), row, 0, out + at.q(q_width),
                q_width);
    }
  }
  if (is_half(a)) round_to(out, a.tokens() * q_width, a.compute);
}

namespace {

// Backward of one (sequence, head) under 16-bit compute: dv and dk rounded per head before
// they are summed over the group, dp rounded (and passed back through the dropout), and
// rowsum(p dp) from that dp (what PyTorch's softmax backward computes from the 16-bit gradient
// it receives).
void head_backward_rounded(const CpuKernels& k, const Head& at, const float* qkv, const float* dO,
                           float* p, float* dqkv, const AttentionDropout& drop, float* scratch) {
  const auto& a = at.a;
  const std::int64_t S = a.seq, d = a.head_dim, row = a.row(), q_width = a.heads * d;
  float* square = scratch;
  float* head_grad = scratch + S * S;
  const auto add_rounded = [&](float* into) {
    round_to(head_grad, S * d, a.compute);
    add_columns(head_grad, into, S, d, row);
  };
  const std::uint8_t* mask = head_mask(drop, at);
  k.gemm_ld(true, false, S, d, S, 1, probs_for_pv(p, square, at, mask, drop.scale), S, dO, q_width,
            0, head_grad, d);
  add_rounded(dqkv + at.v());
  k.gemm_ld(false, true, S, S, d, 1, dO, q_width, qkv + at.v(), row, 0, square, S);
  round_to(square, S * S, a.compute);
  if (mask != nullptr) apply_dropout(square, mask, S * S, drop.scale, a.compute);
  const float scale = score_scale(a);
  for (std::int64_t i = 0; i < S; ++i) {
    float* pi = p + i * S;
    const float* dpi = square + i * S;
    double delta = 0;
    for (std::int64_t j = 0; j <= i; ++j)
      delta += double{pi[j]} * dpi[j];
    const auto di = static_cast<float>(delta);
    for (std::int64_t j = 0; j < S; ++j)
      pi[j] = pi[j] * (dpi[j] - di) * scale;
  }
  k.gemm_ld(false, false, S, d, S, 1, p, S, qkv + at.k(), row, 1, dqkv + at.q(row), row);
  k.gemm_ld(true, false, S, d, S, 1, p, S, qkv + at.q(row), row, 0, head_grad, d);
  add_rounded(dqkv + at.k());
}

}  // namespace

void attention_backward(const CpuKernels& k, const float* qkv, const float* out, const float* dout,
                        float* probs, float* dqkv, const AttentionShape& a,
                        const AttentionDropout& drop, float* scratch) {
  const std::int64_t S = a.seq, d = a.head_dim, row = a.row(), q_width = a.heads * d;
  float* dp = scratch;  // seq x seq
  std::fill(dqkv, dqkv + a.tokens() * row, 0.0f);
  const float scale = score_scale(a);
  const std::int64_t group = a.heads / a.kv_heads;
  for (std::int64_t b = 0; b < a.batch; ++b) {
    for (std::int64_t h = 0; h < a.heads; ++h) {
      const Head at{a, b, h};
      float* p = probs + at.p();
      const float* o = out + at.q(q_width);
      const float* dO = dout + at.q(q_width);
      if (is_half(a)) {
        head_backward_rounded(k, at, qkv, dO, p, dqkv, drop, scratch);
        if ((h + 1) % group == 0) {  // the group's key and value gradients are complete
          round_columns(dqkv + at.k(), S, d, row, a.compute);
          round_columns(dqkv + at.v(), S, d, row, a.compute);
        }
        continue;
      }
      // With dropout dv reads the dropped probabilities (built in dp's square first) and dp
      // goes back through the mask; rowsum(p dp) = do_i . o_i still holds.
      const std::uint8_t* mask = head_mask(drop, at);
      k.gemm_ld(true, false, S, d, S, 1, probs_for_pv(p, dp, at, mask, drop.scale), S, dO, q_width,
                1, dqkv + at.v(), row);
      k.gemm_ld(false, true, S, S, d, 1, dO, q_width, qkv + at.v(), row, 0, dp, S);
      if (mask != nullptr) apply_dropout(dp, mask, S * S, drop.scale, a.compute);
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
  if (is_half(a)) round_columns(dqkv, a.tokens(), q_width, row, a.compute);
}

void round_to(float* x, std::int64_t n, cost::ElementType type) {
  if (type == cost::ElementType::bf16) cpu_kernels().round_bf16(x, n);
  if (type == cost::ElementType::fp16) cpu_kernels().round_fp16(x, n);
}

// silu and its derivative in fp32 (the vectorised kernels), each 16-bit intermediate rounded.
void swiglu_rounded(const CpuKernels& k, const float* g, const float* u, float* y, std::int64_t n,
                    cost::ElementType type) {
  k.silu(g, y, n);
  round_to(y, n, type);
  for (std::int64_t i = 0; i < n; ++i)
    y[i] *= u[i];
  round_to(y, n, type);
}

void swiglu_rounded_backward(const CpuKernels& k, const float* g, const float* u, const float* dy,
                             float* dg, float* du, std::int64_t n, cost::ElementType type) {
  k.silu(g, du, n);
  round_to(du, n, type);
  for (std::int64_t i = 0; i < n; ++i) {
    du[i] *= dy[i];
    dg[i] = dy[i] * u[i];
  }
  round_to(du, n, type);
  round_to(dg, n, type);
  k.silu_grad(g, dg, n);
  round_to(dg, n, type);
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

namespace {

// The row's target column on this rank, or -1 when another rank holds it.
std::int64_t target_column(const std::int32_t* targets, std::int64_t t, std::int64_t vocab,
                           std::int64_t first_id) {
  const std::int64_t c = std::int64_t{targets[t]} - first_id;
  return c >= 0 && c < vocab ? c : -1;
}

}  // namespace

void cross_entropy_sums(const CpuKernels& k, const float* logits, const std::int32_t* targets,
                        const float* top, float* sums, std::int64_t tokens, std::int64_t vocab,
                        std::int64_t first_id) {
  k.row_exp_sums(logits, top, sums, tokens, vocab);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t c = target_column(targets, t, vocab, first_id);
    sums[tokens + t] = c >= 0 ? logits[t * vocab + c] - top[t] : 0.0f;
  }
}

double cross_entropy_finish(const CpuKernels& k, float* logits, const std::int32_t* targets,
                            const float* top, const float* sums, std::int64_t tokens,
                            std::int64_t vocab, std::int64_t first_id, float grad_scale) {
  double loss = 0;
  for (std::int64_t t = 0; t < tokens; ++t)
    loss += std::log(double{sums[t]}) - double{sums[tokens + t]};
  k.softmax_rows(logits, top, sums, tokens, vocab, grad_scale);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t c = target_column(targets, t, vocab, first_id);
    if (c >= 0) logits[t * vocab + c] -= grad_scale;
  }
  return loss;
}

}  // namespace dtplan::runtime::cpu
