// The CPU device's transformer-layer operations: attention, norms, rotary and learned positions
// against values derived by hand, and their backward passes against central finite
// differences of a weighted sum of their outputs.
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "dtplan/runtime/cpu_device.hpp"

namespace rt = dtplan::runtime;

namespace {

std::unique_ptr<rt::Device> device() {
  return rt::make_cpu_device(1LL << 26, 1);
}

std::vector<float> wavy(std::size_t n, double phase) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + phase));
  return v;
}

std::int64_t scratch_floats(const rt::AttentionShape& a) {
  return a.seq * a.seq + a.seq * a.head_dim;
}

// Forward of attention into `out` (probabilities into `probs`), with dropout when `drop` has
// a mask.
void attend(rt::Device& d, const rt::AttentionShape& a, const std::vector<float>& qkv,
            std::vector<float>& probs, std::vector<float>& out,
            const rt::AttentionDropout& drop = {}) {
  probs.assign(static_cast<std::size_t>(a.batch * a.heads * a.seq * a.seq), 0.0f);
  out.assign(static_cast<std::size_t>(a.tokens() * a.heads * a.head_dim), 0.0f);
  std::vector<float> scratch(static_cast<std::size_t>(scratch_floats(a)));
  d.attention(qkv.data(), probs.data(), out.data(), a, drop, scratch.data());
}

// Checks analytic[i] against d(sum_j w_j f(x)_j)/dx_i by central differences.
void check_against_differences(std::vector<float> x, const std::vector<float>& analytic,
                               const std::function<double(const std::vector<float>&)>& loss) {
  REQUIRE(x.size() == analytic.size());
  const float h = 1e-2f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    const double up = loss(x);
    x[i] = keep - h;
    const double down = loss(x);
    x[i] = keep;
    const double numeric = (up - down) / (2.0 * h);
    INFO("input " << i << ": analytic " << analytic[i] << ", numeric " << numeric);
    CHECK(std::fabs(numeric - analytic[i]) <= 1e-3 + 1e-2 * std::fabs(numeric));
  }
}

double weighted(const std::vector<float>& y, const std::vector<float>& w) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    s += double{y[i]} * w[i];
  return s;
}

}  // namespace

TEST_CASE("attention by hand: causal softmax over two tokens, one head of width 1") {
  auto d = device();
  const rt::AttentionShape a{1, 2, 1, 1, 1};
  // qkv rows [q, k, v]: token 0 (q 5, k 0, v 2), token 1 (q ln 3, k 1, v 6). Token 0 sees only
  // itself: out 2. Token 1: scores (ln3 x 0, ln3 x 1) / sqrt(1) -> softmax (1/4, 3/4) ->
  // out 2/4 + 18/4 = 5.
  const std::vector<float> qkv = {5, 0, 2, static_cast<float>(std::log(3.0)), 1, 6};
  std::vector<float> probs, out;
  attend(*d, a, qkv, probs, out);
  CHECK(probs[0] == Approx(1.0));
  CHECK(probs[1] == 0.0f);  // above the diagonal
  CHECK(probs[2] == Approx(0.25));
  CHECK(probs[3] == Approx(0.75));
  CHECK(out[0] == Approx(2.0));
  CHECK(out[1] == Approx(5.0));
}

TEST_CASE("bf16 attention by hand: p v reads the probabilities rounded, the output is rounded") {
  auto d = device();
  const rt::AttentionShape a{1, 2, 1, 1, 1, dtplan::cost::ElementType::bf16};
  // Token 1: scores (ln2 x 0, ln2 x 1) -> softmax (1/3, 2/3). In bf16 (8 significant bits)
  // 1/3 = 1.0101011b x 2^-2 = 0.333984375 and 2/3 = 0.66796875; with v = (3, 7) the product is
  // 1.001953125 + 4.67578125 = 5.677734375, which bf16 (steps of 1/32 in [4, 8)) rounds to
  // 5.6875. Unrounded probabilities give 17/3 = 5.667, rounded to 5.65625.
  const std::vector<float> qkv = {1, 0, 3, static_cast<float>(std::log(2.0)), 1, 7};
  std::vector<float> probs, out;
  attend(*d, a, qkv, probs, out);
  CHECK(probs[2] == Approx(1.0 / 3.0));  // kept unrounded for backward
  CHECK(probs[3] == Approx(2.0 / 3.0));
  CHECK(out[0] == 3.0f);
  CHECK(out[1] == 5.6875f);
}

TEST_CASE("rounding to bf16 and fp16 by hand: nearest, ties to even, fp16's range") {
  auto d = device();
  // bf16 keeps 7 fraction bits: 1/3 = 1.0101010|1... x 2^-2 rounds up to 0.333984375;
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to the even 1; 1 + 3 x 2^-8 is halfway
  // between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  std::vector<float> b = {1.0f / 3.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f};
  d->round_to(b.data(), 4, dtplan::cost::ElementType::bf16);
  CHECK(b == std::vector<float>{0.333984375f, 1.0f, 1.015625f, -2.5f});
  // fp16 keeps 10: 1/3 -> 0.333251953125. Its largest value is 65504; 65519 rounds down to it,
  // 65520 is halfway to 65536 (odd 65504 against even) and so overflows to infinity. Below
  // 2^-14 values are subnormal in steps of 2^-24: 2^-25 is halfway to 0 and goes there,
  // 3 x 2^-26 rounds up to 2^-24.
  std::vector<float> h = {1.0f / 3.0f, 65519.0f, 65520.0f, 0x1p-25f, 3 * 0x1p-26f};
  d->round_to(h.data(), 5, dtplan::cost::ElementType::fp16);
  CHECK(h[0] == 0.333251953125f);
  CHECK(h[1] == 65504.0f);
  CHECK(std::isinf(h[2]));
  CHECK(h[3] == 0.0f);
  CHECK(h[4] == 0x1p-24f);
  // Against Eigen's scalar conversions (an independent implementation) over every exponent
  // from subnormal to overflow, with both signs.
  std::vector<float> wide, bf, hf;
  for (int e = -30; e <= 17; ++e) {
    for (int k = 0; k < 2000; ++k) {
      const float m = 1.0f + static_cast<float>(k) / 2000.0f;
      wide.push_back(std::ldexp(k % 2 == 0 ? m : -m, e));
    }
  }
  bf = hf = wide;
  d->round_to(bf.data(), static_cast<std::int64_t>(bf.size()), dtplan::cost::ElementType::bf16);
  d->round_to(hf.data(), static_cast<std::int64_t>(hf.size()), dtplan::cost::ElementType::fp16);
  int bf_off = 0, hf_off = 0;
  for (std::size_t i = 0; i < wide.size(); ++i) {
    bf_off += bf[i] != static_cast<float>(Eigen::bfloat16(wide[i]));
    hf_off += hf[i] != static_cast<float>(Eigen::half(wide[i]));
  }
  CHECK(bf_off == 0);
  CHECK(hf_off == 0);
  // fp32: nothing changes.
  std::vector<float> f = {1.0f / 3.0f};
  d->round_to(f.data(), 1, dtplan::cost::ElementType::fp32);
  CHECK(f[0] == 1.0f / 3.0f);
}

TEST_CASE("bf16 SwiGLU by hand: silu rounded, then the product rounded") {
  auto d = device();
  // silu(1) = 1 / (1 + e^-1) = 0.731059 -> bf16 0.73046875 (1.4609375 x 2^-1); x 3 =
  // 2.19140625, which bf16 (steps of 2^-6 in [2, 4)) rounds to 2.1875. silu(-2) = -0.238406
  // -> -0.23828125; x 0.5 exactly -0.119140625.
  const std::vector<float> g = {1, -2}, u = {3, 0.5f};
  std::vector<float> y(2);
  d->swiglu(g.data(), u.data(), y.data(), 2, dtplan::cost::ElementType::bf16);
  CHECK(y[0] == 2.1875f);
  CHECK(y[1] == -0.119140625f);
  // Backward with dy = 1: du = r(1 x r(silu)) = 0.73046875; dsilu = r(1 x u) = 3; dg =
  // r(3 x silu'(1)), silu'(1) = s (1 + 1 (1 - s)) = 0.927671 -> 2.783013 -> bf16 2.78125.
  std::vector<float> dy = {1, 1}, dg(2), du(2);
  d->swiglu_backward(g.data(), u.data(), dy.data(), dg.data(), du.data(), 2,
                     dtplan::cost::ElementType::bf16);
  CHECK(du[0] == 0.73046875f);
  CHECK(dg[0] == 2.78125f);
}

TEST_CASE("attention by hand: grouped heads share their group's keys and values") {
  auto d = device();
  // Two query heads over one key/value head, width 2, scale 1/sqrt(2). Token 1's query heads
  // (sqrt2 ln3, 0) and (0, 0) against keys (0, 0), (1, 0): head 0 weights (1/4, 3/4), head 1
  // (1/2, 1/2); values (4, 0) and (0, 8).
  const rt::AttentionShape a{1, 2, 2, 1, 2};
  const auto l = static_cast<float>(std::sqrt(2.0) * std::log(3.0));
  const std::vector<float> qkv = {1, 1, 1, 1, /*k*/ 0, 0, /*v*/ 4, 0,  //
                                  l, 0, 0, 0, /*k*/ 1, 0, /*v*/ 0, 8};
  std::vector<float> probs, out;
  attend(*d, a, qkv, probs, out);
  const std::vector<float> want = {4, 0, 4, 0, 1, 6, 2, 4};
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("output " << i);
    CHECK(out[i] == Approx(want[i]));
  }
}

TEST_CASE("attention backward matches finite differences (2 sequences, grouped heads)") {
  auto d = device();
  const rt::AttentionShape a{2, 4, 4, 2, 3};
  const auto qkv = wavy(static_cast<std::size_t>(a.tokens() * a.row()), 0.3);
  const auto w = wavy(static_cast<std::size_t>(a.tokens() * a.heads * a.head_dim), 1.1);
  std::vector<float> probs, out;
  attend(*d, a, qkv, probs, out);
  std::vector<float> dqkv(qkv.size(), 7.0f);  // overwritten
  std::vector<float> scratch(static_cast<std::size_t>(scratch_floats(a)));
  d->attention_backward(qkv.data(), out.data(), w.data(), probs.data(), dqkv.data(), a, {},
                        scratch.data());
  check_against_differences(qkv, dqkv, [&](const std::vector<float>& x) {
    std::vector<float> p, o;
    attend(*d, a, x, p, o);
    return weighted(o, w);
  });
}

TEST_CASE("norms by hand: LayerNorm of (1, 2, 3), RMSNorm of (3, 4)") {
  auto d = device();
  // LayerNorm: mean 2, variance 2/3, so (x - 2) / sqrt(2/3 + eps) x gamma + beta.
  const std::vector<float> x = {1, 2, 3}, gamma = {1, 2, 1}, beta = {0, 0, 0.5f};
  std::vector<float> y(3), stats(2);
  d->norm(x.data(), gamma.data(), beta.data(), y.data(), stats.data(), 1, 3, 0.0f);
  const double r = 1 / std::sqrt(2.0 / 3.0);
  CHECK(y[0] == Approx(-r));
  CHECK(y[1] == Approx(0.0).margin(1e-7));
  CHECK(y[2] == Approx(r + 0.5));
  CHECK(stats[0] == Approx(2.0));
  CHECK(stats[1] == Approx(r));
  // RMSNorm: mean square 12.5: (3, 4) / sqrt(12.5) = (0.8485..., 1.1313...).
  const std::vector<float> x2 = {3, 4}, g2 = {1, 1};
  std::vector<float> y2(2), s2(2);
  d->norm(x2.data(), g2.data(), nullptr, y2.data(), s2.data(), 1, 2, 0.0f);
  CHECK(y2[0] == Approx(3 / std::sqrt(12.5)));
  CHECK(y2[1] == Approx(4 / std::sqrt(12.5)));
  CHECK(s2[0] == 0.0f);
}

TEST_CASE("norm backward matches finite differences (LayerNorm and RMSNorm)") {
  auto d = device();
  const std::int64_t rows = 3, cols = 5;
  const auto x = wavy(rows * cols, 0.2), w = wavy(rows * cols, 2.0);
  const auto gamma = wavy(cols, 0.9), beta = wavy(cols, 1.7);
  for (const bool layernorm : {true, false}) {
    INFO((layernorm ? "LayerNorm" : "RMSNorm"));
    const float* b = layernorm ? beta.data() : nullptr;
    auto forward = [&](const std::vector<float>& in, const std::vector<float>& g) {
      std::vector<float> y(in.size()), stats(2 * rows);
      d->norm(in.data(), g.data(), b, y.data(), stats.data(), rows, cols, 1e-5f);
      return std::pair{y, stats};
    };
    const auto stats = forward(x, gamma).second;
    std::vector<float> dx(x.size(), 0.25f), dgamma(cols, 0.0f), dbeta(cols, 0.0f);
    d->norm_backward(x.data(), gamma.data(), stats.data(), w.data(), dx.data(), dgamma.data(),
                     layernorm ? dbeta.data() : nullptr, rows, cols);
    for (auto& v : dx)
      v -= 0.25f;  // backward adds into dx
    check_against_differences(
        x, dx, [&](const std::vector<float>& in) { return weighted(forward(in, gamma).first, w); });
    check_against_differences(gamma, dgamma, [&](const std::vector<float>& g) {
      return weighted(forward(x, g).first, w);
    });
    if (layernorm) {
      for (std::int64_t c = 0; c < cols; ++c) {  // dbeta = column sums of dy
        CHECK(dbeta[c] == Approx(w[c] + w[cols + c] + w[2 * cols + c]));
      }
    }
  }
}

TEST_CASE("rotary by hand: position p turns pair (i, i + d/2) by p x theta^(-2i/d)") {
  auto d = device();
  // One sequence of 2 tokens, one query and one key head of width 4 (plus one value head).
  // Pair 0 turns by p radians, pair 1 by p / 100 (theta 10,000: 10000^(-2/4) = 1/100).
  const rt::AttentionShape a{1, 2, 1, 1, 4};
  std::vector<float> qkv(static_cast<std::size_t>(2 * a.row()), 0.0f);
  for (std::int64_t t = 0; t < 2; ++t) {
    for (std::int64_t h = 0; h < 3; ++h) {  // q, k, v: (1, 1, 0, 0)
      qkv[static_cast<std::size_t>(t * a.row() + h * 4)] = 1;
      qkv[static_cast<std::size_t>(t * a.row() + h * 4 + 1)] = 1;
    }
  }
  auto turned = qkv;
  d->rotary(turned.data(), a, 10000.0f, false);
  for (std::int64_t h = 0; h < 2; ++h) {  // queries and keys
    const auto* t0 = &turned[static_cast<std::size_t>(h * 4)];
    const auto* t1 = &turned[static_cast<std::size_t>(a.row() + h * 4)];
    CHECK(t0[0] == 1.0f);  // position 0 is not turned
    CHECK(t0[2] == 0.0f);
    CHECK(t1[0] == Approx(std::cos(1.0)));
    CHECK(t1[2] == Approx(std::sin(1.0)));
    CHECK(t1[1] == Approx(std::cos(0.01)));
    CHECK(t1[3] == Approx(std::sin(0.01)));
  }
  CHECK(turned[static_cast<std::size_t>(a.row() + 8)] == 1.0f);  // values are not turned
  d->rotary(turned.data(), a, 10000.0f, true);
  for (std::size_t i = 0; i < qkv.size(); ++i)
    CHECK(turned[i] == Approx(qkv[i]).margin(1e-6));
}

TEST_CASE("learned positions: each token adds its position's row; gradients sum over sequences") {
  auto d = device();
  // 2 sequences of 2 tokens, width 1: table (10, 20).
  std::vector<float> x = {1, 2, 3, 4}, table = {10, 20};
  d->add_positions(x.data(), table.data(), 4, 2, 1);
  CHECK(x == std::vector<float>{11, 22, 13, 24});
  std::vector<float> dtable = {0.5f, 0};
  d->positions_backward(std::vector<float>{1, 2, 3, 4}.data(), dtable.data(), 4, 2, 1);
  CHECK(dtable == std::vector<float>{4.5f, 6});
}

TEST_CASE("dropout masks: splitmix64's published first output, keep rate, causal squares") {
  // SplitMix64 from state 0 first returns 0xe220a8397b1dcdaf (Vigna's splitmix64.c; the
  // state is advanced by the golden gamma before mixing, as dropout_mix does).
  CHECK(rt::dropout_mix(0) == 0xe220a8397b1dcdafULL);
  auto d = device();
  rt::DropoutDraw draw;
  draw.seed = 11;
  draw.step = 3;
  draw.samples = 2;
  draw.per_sample = 1 << 19;
  draw.p = 0.1;
  draw.site = rt::DropoutSite::mlp_output;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(draw.elements()), 7);
  d->dropout_mask(mask.data(), draw);
  double kept = 0;
  for (auto m : mask) {
    REQUIRE(m <= 1);
    kept += m;
  }
  // 2^20 draws at 0.9: standard deviation sqrt(n p (1-p)) = 307; 5 of them.
  CHECK(std::fabs(kept - 0.9 * 1048576) < 5 * 307);
  // Samples are numbered globally: sample 1 drawn alone is the second half of the above.
  rt::DropoutDraw second = draw;
  second.first_sample = 1;
  second.samples = 1;
  std::vector<std::uint8_t> alone(static_cast<std::size_t>(second.elements()));
  d->dropout_mask(alone.data(), second);
  CHECK(std::equal(alone.begin(), alone.end(), mask.begin() + draw.per_sample));
  // Another site or layer draws another mask.
  second.layer = 1;
  std::vector<std::uint8_t> other(alone.size());
  d->dropout_mask(other.data(), second);
  CHECK(other != alone);
  // A causal square: nothing above the diagonal, the rest drawn.
  rt::DropoutDraw square;
  square.samples = 1;
  square.causal_seq = 64;
  square.per_sample = 2 * 64 * 64;  // two heads
  square.p = 0.5;
  square.site = rt::DropoutSite::attention;
  std::vector<std::uint8_t> sq(static_cast<std::size_t>(square.elements()), 9);
  d->dropout_mask(sq.data(), square);
  std::int64_t above = 0, below_kept = 0;
  for (std::int64_t e = 0; e < square.per_sample; ++e) {
    const auto i = (e / 64) % 64, j = e % 64;
    (j > i ? above : below_kept) += sq[static_cast<std::size_t>(e)];
  }
  CHECK(above == 0);
  CHECK(std::fabs(static_cast<double>(below_kept) - 0.5 * 2 * 2080) < 5 * std::sqrt(1040.0));
}

TEST_CASE("apply_dropout by hand: kept values scaled by 1 / (1 - p), rounded in bf16") {
  auto d = device();
  const std::vector<std::uint8_t> mask = {1, 0, 1};
  std::vector<float> x = {1, -2, 3};
  d->apply_dropout(x.data(), mask.data(), 3, rt::dropout_scale(0.5),
                   dtplan::cost::ElementType::fp32);
  CHECK(x == std::vector<float>{2, 0, 6});
  // p = 0.1: fp32's factor 1 / 0.9f = 1.1111112; bf16's is that rounded to 8 significant bits,
  // 1 + 14/128 = 1.109375, and 3 x 1.109375 = 3.328125 is a bf16 value.
  x = {1, -2, 3};
  d->apply_dropout(x.data(), mask.data(), 3, rt::dropout_scale(0.1),
                   dtplan::cost::ElementType::fp32);
  CHECK(x[0] == 1.0f / 0.9f);
  x = {1, -2, 3};
  d->apply_dropout(x.data(), mask.data(), 3, rt::dropout_scale(0.1),
                   dtplan::cost::ElementType::bf16);
  CHECK(x[0] == 1.109375f);
  CHECK(x[2] == 3.328125f);
}

TEST_CASE("attention with dropout by hand: p v reads the kept probabilities, doubled") {
  auto d = device();
  // The grouped-heads case above (head 0 weights (1/4, 3/4) at token 1, head 1 (1/2, 1/2);
  // values (4, 0) and (0, 8)) with p = 0.5 and mask [head, i, j]: head 0 keeps (0,0) and
  // (1,1), head 1 keeps (0,0), (1,0) and (1,1). Token 0: 2 x (4, 0) for both heads. Token 1:
  // head 0 2 x 3/4 (0, 8) = (0, 12); head 1 2 x ((2, 0) + (0, 4)) = (4, 8).
  const rt::AttentionShape a{1, 2, 2, 1, 2};
  const auto l = static_cast<float>(std::sqrt(2.0) * std::log(3.0));
  const std::vector<float> qkv = {1, 1, 1, 1, /*k*/ 0, 0, /*v*/ 4, 0,  //
                                  l, 0, 0, 0, /*k*/ 1, 0, /*v*/ 0, 8};
  const std::vector<std::uint8_t> mask = {1, 0, 0, 1, /*head 1*/ 1, 0, 1, 1};
  std::vector<float> probs, out;
  attend(*d, a, qkv, probs, out, {mask.data(), rt::dropout_scale(0.5)});
  const std::vector<float> want = {8, 0, 8, 0, 0, 12, 4, 8};
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("output " << i);
    CHECK(out[i] == Approx(want[i]));
  }
  CHECK(probs[2] == Approx(0.25));  // the probabilities kept for backward are not dropped
}

TEST_CASE("attention backward through dropout matches finite differences") {
  auto d = device();
  const rt::AttentionShape a{2, 4, 4, 2, 3};
  rt::DropoutDraw draw;
  draw.samples = a.batch;
  draw.causal_seq = a.seq;
  draw.per_sample = a.heads * a.seq * a.seq;
  draw.p = 0.3;
  draw.site = rt::DropoutSite::attention;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(draw.elements()));
  d->dropout_mask(mask.data(), draw);
  const rt::AttentionDropout drop{mask.data(), draw.scale()};
  const auto qkv = wavy(static_cast<std::size_t>(a.tokens() * a.row()), 0.3);
  const auto w = wavy(static_cast<std::size_t>(a.tokens() * a.heads * a.head_dim), 1.1);
  std::vector<float> probs, out, plain_probs, plain;
  attend(*d, a, qkv, probs, out, drop);
  attend(*d, a, qkv, plain_probs, plain);
  CHECK(out != plain);
  std::vector<float> dqkv(qkv.size(), 7.0f);
  std::vector<float> scratch(static_cast<std::size_t>(scratch_floats(a)));
  d->attention_backward(qkv.data(), out.data(), w.data(), probs.data(), dqkv.data(), a, drop,
                        scratch.data());
  check_against_differences(qkv, dqkv, [&](const std::vector<float>& x) {
    std::vector<float> p, o;
    attend(*d, a, x, p, o, drop);
    return weighted(o, w);
  });
}
