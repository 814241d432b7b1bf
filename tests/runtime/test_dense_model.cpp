// Backward of the dense stack against central finite differences of its loss: every gradient
// the strategies then move around is right to begin with.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "dtplan/runtime/batch.hpp"
#include "dtplan/runtime/cpu_device.hpp"
#include "dtplan/runtime/dense_model.hpp"
#include "dtplan/runtime/param_layout.hpp"
#include "tiny_stack.hpp"

using namespace dtplan;
using namespace dtplan::runtime;

namespace {

cost::DenseStack with_recompute(cost::DenseStack s, Checkpointing c) {
  s.recompute = c;
  return s;
}

cost::DenseStack with_compute(cost::DenseStack s, cost::ElementType t) {
  s.compute = t;
  return s;
}

cost::DenseStack with_dropout(cost::DenseStack s, double p) {
  s.attention_dropout = s.hidden_dropout = s.embedding_dropout = p;
  return s;
}

struct Harness {
  cost::DenseStack s;
  std::unique_ptr<Device> dev = make_cpu_device(1LL << 28, 1);
  ParamLayout layout;
  std::vector<float> params;
  TokenBatch batch;
  Harness(bool gated, bool tied, Checkpointing recompute = Checkpointing::none,
          cost::ElementType compute = cost::ElementType::fp32, double dropout = 0)
      : s(with_dropout(
            with_compute(with_recompute(test::tiny_stack(gated, tied), recompute), compute),
            dropout)),
        layout(s, 1) {
    for (std::size_t u = 0; u < layout.units().size(); ++u) {
      auto v = DenseModel::initial_unit(s, static_cast<std::int64_t>(u), 7);
      for (auto& x : v)
        x *= 4;  // larger weights: gradients well above float noise, attention not saturated
      params.insert(params.end(), v.begin(), v.end());
    }
    batch = make_batch(3, 0, 0, 1, s.seq_len, s.vocab);
  }
  // Summed loss, and (if grads) the gradient of it with respect to every parameter.
  double run(std::vector<float>* grads) {
    DenseModel m(s, *dev, s.seq_len);
    const auto& u = layout.units();
    const float* p = params.data();
    const auto head = s.tied ? 0 : s.layers + 1;
    m.forward_embedding(p, batch.ids.data());
    for (std::int64_t l = 0; l < s.layers; ++l)
      m.forward_block(l, p + u[l + 1].flat_offset);
    const double loss = m.forward_head(p + u[head].flat_offset, batch.targets.data(), 1.0f);
    if (grads) {
      grads->assign(params.size(), 0.0f);
      float* g = grads->data();
      m.backward_head(p + u[head].flat_offset, g + u[head].flat_offset);
      for (auto l = s.layers - 1; l >= 0; --l) {
        m.backward_block(l, p + u[l + 1].flat_offset, g + u[l + 1].flat_offset);
      }
      m.backward_embedding(batch.ids.data(), g);
    }
    return loss;
  }
};

// With dropout the masks are fixed by where they are drawn (the same samples, step and seed
// on every run), so the loss is a smooth function of the parameters to differentiate.
void check_gradients(bool gated, bool tied, double dropout = 0) {
  Harness h(gated, tied, Checkpointing::none, cost::ElementType::fp32, dropout);
  std::vector<float> g;
  h.run(&g);
  int checked = 0;
  for (std::size_t i = 0; i < h.params.size(); i += 7) {
    // Richardson's extrapolation of central differences at 2e and e cancels their e^2 term,
    // which softmax attention's curvature makes large.
    auto central = [&](float e) {
      const float keep = h.params[i];
      h.params[i] = keep + e;
      const double up = h.run(nullptr);
      h.params[i] = keep - e;
      const double down = h.run(nullptr);
      h.params[i] = keep;
      return (up - down) / (2.0 * double{e});
    };
    const float eps = 2e-3f;
    const double numeric = (4 * central(eps) - central(2 * eps)) / 3;
    INFO("parameter " << i << " analytic " << g[i] << " numeric " << numeric);
    CHECK(std::fabs(numeric - g[i]) <= 2e-3 + 2e-2 * std::fabs(numeric));
    ++checked;
  }
  CHECK(checked > 300);
}

}  // namespace

TEST_CASE("dense stack gradients match finite differences (GELU, LayerNorm, learned, tied)") {
  check_gradients(false, true);
}

TEST_CASE("dense stack gradients match finite differences (SwiGLU, RMSNorm, rotary, untied)") {
  check_gradients(true, false);
}

TEST_CASE("dense stack gradients through dropout match finite differences (p = 0.3 everywhere)") {
  check_gradients(false, true, 0.3);
  check_gradients(true, false, 0.3);
}

TEST_CASE("dropout is executed: another loss, and the same one again for the same samples") {
  Harness plain(false, true);
  Harness dropped(false, true, Checkpointing::none, cost::ElementType::fp32, 0.3);
  const double without = plain.run(nullptr), with = dropped.run(nullptr);
  CHECK(with != without);
  CHECK(dropped.run(nullptr) == with);  // masks are drawn from where they are, not a state
  // Masks are one byte an element: per block the probabilities' heads x seq = 32 and two of
  // the hidden size 12, then the embeddings' 12; per token of 8.
  CHECK(dropped.dev->at_peak()[runtime::MemoryComponent::activations] -
            plain.dev->at_peak()[runtime::MemoryComponent::activations] ==
        8 * (2 * (32 + 2 * 12) + 12));
  CHECK(cost::mask_bytes_per_token(dropped.s) == 2 * (32 + 2 * 12) + 12);
}

TEST_CASE("recomputation gives the same gradients, bit for bit, and keeps what it says") {
  for (const bool gated : {false, true}) {
    Harness none(gated, !gated);
    std::vector<float> want;
    const double loss = none.run(&want);
    const auto& s = none.s;
    for (const auto c : {Checkpointing::selective, Checkpointing::full}) {
      INFO((gated ? "SwiGLU" : "GELU") << ", " << name_of(c));
      Harness h(gated, !gated, c);
      std::vector<float> got;
      CHECK(h.run(&got) == loss);
      CHECK(got == want);  // the rerun forward repeats the same operations on the same inputs
      // Activations at the peak, by hand per token (8 tokens): block input h, norms h + 2
      // each, QKV, probabilities heads x seq = 32, attention output, residual h, MLP; then
      // x(L) h, the final norm h + 2 and the logits 37.
      const std::int64_t h_ = s.hidden, mlp = (gated ? 3 : 2) * s.ffn;
      const std::int64_t block = h_ + 2 * (h_ + 2) + s.qkv_size() + 32 + s.q_size() + h_ + mlp;
      const std::int64_t head = h_ + (h_ + 2) + 37;
      const std::int64_t per_token =
          c == Checkpointing::full ? 2 * h_ + (block - h_) + head : 2 * (block - 32) + 32 + head;
      CHECK(h.dev->at_peak()[runtime::MemoryComponent::activations] == per_token * 8 * 4);
      CHECK(cost::stored_elements_per_token(h.s) == per_token);
    }
  }
}

namespace {

// A bf16 value has zeros in the 16 low bits of its fp32 pattern.
bool is_bf16(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0xffffu) == 0;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    n += double{b[i]} * b[i];
  }
  return std::sqrt(d / n);
}

}  // namespace

TEST_CASE("bf16 compute: weight gradients are rounded bf16 values, norm gradients fp32") {
  for (const bool gated : {false, true}) {
    INFO((gated ? "SwiGLU, RMSNorm, rotary" : "GELU, LayerNorm, learned"));
    Harness fp32(gated, false);
    Harness bf16(gated, false, Checkpointing::none, cost::ElementType::bf16);
    std::vector<float> g32, g16;
    fp32.run(&g32);
    bf16.run(&g16);
    // Block 0's unit: norm1's scale (and shift), then the fused QKV matrix. One backward into
    // zeroed gradients leaves the matrix's gradient as the rounded GEMM result itself.
    const auto& s = bf16.s;
    const auto at = static_cast<std::size_t>(bf16.layout.units()[1].flat_offset);
    const auto norm = static_cast<std::size_t>(s.norm_params());
    const auto qkv = static_cast<std::size_t>(s.qkv_size() * s.hidden);
    int matrix_bf16 = 0, norm_bf16 = 0, fp32_matrix_bf16 = 0;
    for (std::size_t i = at + norm; i < at + norm + qkv; ++i) {
      matrix_bf16 += is_bf16(g16[i]);
      fp32_matrix_bf16 += is_bf16(g32[i]);
    }
    for (std::size_t i = at; i < at + norm; ++i)
      norm_bf16 += is_bf16(g16[i]);
    CHECK(matrix_bf16 == static_cast<int>(qkv));
    CHECK(fp32_matrix_bf16 < static_cast<int>(qkv) / 10);  // (zeros and a few by chance)
    CHECK(norm_bf16 < static_cast<int>(norm) / 2);
    // bf16 keeps 8 significant bits (unit roundoff 2^-9 = 2e-3): the gradient moves by about
    // that much, far more than fp32's 6e-8, and far less than a wrong formula would.
    const double moved = relative_difference(g16, g32);
    CHECK(moved > 1e-4);
    CHECK(moved < 2e-2);
  }
}

TEST_CASE("recomputation with dropout redraws the same masks: gradients bit for bit") {
  for (const bool gated : {false, true}) {
    Harness none(gated, !gated, Checkpointing::none, cost::ElementType::fp32, 0.3);
    std::vector<float> want;
    const double loss = none.run(&want);
    for (const auto c : {Checkpointing::selective, Checkpointing::full}) {
      INFO((gated ? "SwiGLU" : "GELU") << ", " << name_of(c));
      Harness h(gated, !gated, c, cost::ElementType::fp32, 0.3);
      std::vector<float> got;
      CHECK(h.run(&got) == loss);
      CHECK(got == want);
      const std::int64_t activations =
          cost::stored_elements_per_token(h.s) * 4 + cost::mask_bytes_per_token(h.s);
      CHECK(h.dev->at_peak()[runtime::MemoryComponent::activations] == activations * 8);
    }
  }
}
