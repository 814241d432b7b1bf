// The CUDA backend against CPU references and hand-derived numbers: cuBLAS GEMM layouts,
// the kernels, memory accounting, and NCCL collectives over MPI's world. Every case is
// skipped (with a warning) on machines without a CUDA device.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/cpu_device.hpp"
#include "dtplan/runtime/cuda_backend.hpp"
#include "gemm_reference.hpp"

namespace rt = dtplan::runtime;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

bool no_cuda_device() {
  if (rt::cuda_device_count() > 0) return false;
  WARN("SKIPPED: no CUDA device on this machine");
  return true;
}

template <typename T>
rt::Buffer to_device(rt::Device& d, const std::vector<T>& host,
                     rt::MemoryComponent c = rt::MemoryComponent::buffers) {
  static_assert(sizeof(T) == 4);
  auto b = d.allocate(static_cast<std::int64_t>(host.size()) * 4, c);
  d.upload(host.data(), b.f(), b.bytes());
  return b;
}

std::vector<float> to_host(rt::Device& d, const rt::Buffer& b) {
  std::vector<float> host(static_cast<std::size_t>(b.floats()));
  d.download(b.f(), host.data(), b.bytes());
  return host;
}

// Small, exactly representable, varied values.
std::vector<float> pattern(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 7 + seed * 3) % 11) - 5) / 4.0f;
  }
  return v;
}

void require_near(const std::vector<float>& got, const std::vector<float>& want,
                  double margin = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(margin));
  }
}

}  // namespace

TEST_CASE("cuda gemm matches a CPU reference for every transpose combination", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  const int m = 5, n = 7, k = 3;
  const float alpha = 1.5f, beta = -0.5f;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      INFO("trans_a " << ta << ", trans_b " << tb);
      // A is stored m x k (k x m when transposed), B k x n (n x k), all row-major.
      const auto a = pattern(m * k, 1), b = pattern(k * n, 2), c0 = pattern(m * n, 3);
      const auto exact = dtplan::test::gemm_reference(ta, tb, m, n, k, alpha, a, b, beta, c0);
      const std::vector<float> want(exact.begin(), exact.end());
      auto da = to_device(*dev, a), db = to_device(*dev, b), dc = to_device(*dev, c0);
      dev->gemm(ta, tb, m, n, k, alpha, da.f(), db.f(), beta, dc.f());
      require_near(to_host(*dev, dc), want);
    }
  }
}

TEST_CASE("cuda softmax cross-entropy on a hand-computed 3 x 4 example", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  // Row 0: equal logits, softmax 1/4 each, target 2: loss ln 4.
  // Row 1: logits ln 1..ln 4, softmax {.1, .2, .3, .4}, target 3: loss -ln .4 = ln 2.5.
  // Row 2: 1000 vs 0 (overflows without the max shift), softmax {1, 0, 0, 0}, target 0: loss 0.
  // Total ln 4 + ln 2.5 = ln 10.
  const std::vector<float> logits = {
      0, 0, 0, 0, 0, std::log(2.0f), std::log(3.0f), std::log(4.0f), 1000, 0, 0, 0};
  const std::vector<std::int32_t> targets = {2, 3, 0};
  auto dl = to_device(*dev, logits);
  auto dt = to_device(*dev, targets);
  const double loss = dev->softmax_cross_entropy(dl.f(), dt.i(), 3, 4, 0.5f);
  CHECK(loss == Approx(std::log(10.0)).epsilon(1e-6));
  // (softmax - onehot) * 0.5
  require_near(to_host(*dev, dl),
               {0.125f, 0.125f, -0.375f, 0.125f, 0.05f, 0.1f, 0.15f, -0.3f, 0, 0, 0, 0}, 1e-6);
}

TEST_CASE("cuda softmax cross-entropy and bias gradient at odd, many-warp sizes", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  // More tokens than reduction blocks and a vocabulary that is no multiple of the block.
  const int tokens = 300, vocab = 5003;
  std::vector<float> logits(static_cast<std::size_t>(tokens) * vocab);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>((i * 2654435761u) % 2001) / 100.0f - 10.0f;
  }
  std::vector<std::int32_t> targets(tokens);
  for (int t = 0; t < tokens; ++t)
    targets[t] = (t * 977) % vocab;
  // Double-precision reference of the loss and of (softmax - onehot) / tokens.
  double want_loss = 0;
  std::vector<float> want_grad(logits.size());
  for (int t = 0; t < tokens; ++t) {
    const float* row = logits.data() + static_cast<std::size_t>(t) * vocab;
    double top = row[0], sum = 0;
    for (int j = 0; j < vocab; ++j)
      top = std::max(top, double{row[j]});
    for (int j = 0; j < vocab; ++j)
      sum += std::exp(row[j] - top);
    want_loss += std::log(sum) + top - row[targets[t]];
    for (int j = 0; j < vocab; ++j) {
      const double p = std::exp(row[j] - top) / sum - (j == targets[t] ? 1.0 : 0.0);
      want_grad[static_cast<std::size_t>(t) * vocab + j] = static_cast<float>(p / tokens);
    }
  }
  auto dl = to_device(*dev, logits);
  auto dt = to_device(*dev, targets);
  const double loss = dev->softmax_cross_entropy(dl.f(), dt.i(), tokens, vocab, 1.0f / tokens);
  CHECK(loss == Approx(want_loss).epsilon(1e-5));
  require_near(to_host(*dev, dl), want_grad, 1e-7);
  // Column sums of the gradient over 300 rows: each column's entries sum in any order to
  // within float rounding of the double reference.
  std::vector<float> want_bias(vocab, 0.0f);
  for (int j = 0; j < vocab; ++j) {
    double acc = 0;
    for (int t = 0; t < tokens; ++t)
      acc += want_grad[static_cast<std::size_t>(t) * vocab + j];
    want_bias[j] = static_cast<float>(acc);
  }
  auto bias = dev->allocate_floats(vocab, rt::MemoryComponent::gradients);
  dev->bias_grad(dl.f(), bias.f(), tokens, vocab);
  require_near(to_host(*dev, bias), want_bias, 1e-6);
  // Same input, same bits: the reductions are deterministic.
  auto again = to_device(*dev, logits);
  CHECK(dev->softmax_cross_entropy(again.f(), dt.i(), tokens, vocab, 1.0f / tokens) == loss);
}

TEST_CASE("cuda adam: one step from zero moments is lr * g / (|g| + eps)", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  const float lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  const std::vector<float> w0 = {1.0f, -2.0f, 0.5f, 3.0f}, g = {0.1f, -0.3f, 2.0f, -1e-3f};
  for (const float wd : {0.0f, 0.1f}) {
    INFO("weight decay " << wd);
    auto dw = to_device(*dev, w0), dg = to_device(*dev, g);
    auto dm = dev->allocate_floats(4, rt::MemoryComponent::optimizer_states);
    auto dv = dev->allocate_floats(4, rt::MemoryComponent::optimizer_states);
    dev->adam(dw.f(), dg.f(), dm.f(), dv.f(), 4, lr, beta1, beta2, eps, wd, 1);
    // At t = 1: m = (1 - b1) g, v = (1 - b2) g^2, so m / bc1 = g and v / bc2 = g^2; AdamW
    // first scales w by 1 - lr wd.
    std::vector<float> want_w(4), want_m(4), want_v(4);
    for (std::size_t i = 0; i < 4; ++i) {
      want_w[i] = w0[i] * (1 - lr * wd) - lr * g[i] / (std::fabs(g[i]) + eps);
      want_m[i] = (1 - beta1) * g[i];
      want_v[i] = (1 - beta2) * g[i] * g[i];
    }
    require_near(to_host(*dev, dw), want_w, 1e-6);
    require_near(to_host(*dev, dm), want_m, 1e-7);
    require_near(to_host(*dev, dv), want_v, 1e-8);
  }
}

TEST_CASE("cuda sgd: plain and with momentum", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  auto w = to_device(*dev, std::vector<float>{1, 2}),
       g = to_device(*dev, std::vector<float>{4, -8});
  dev->sgd(w.f(), g.f(), nullptr, 2, 0.25f, 0.0f);
  require_near(to_host(*dev, w), {0, 4});
  // buf = 0.5 buf + g over two steps: {4, -8}, then {6, -12}; w -= 0.25 buf each time.
  auto buf = dev->allocate_floats(2, rt::MemoryComponent::optimizer_states);
  dev->sgd(w.f(), g.f(), buf.f(), 2, 0.25f, 0.5f);
  dev->sgd(w.f(), g.f(), buf.f(), 2, 0.25f, 0.5f);
  require_near(to_host(*dev, buf), {6, -12});
  require_near(to_host(*dev, w), {0 - 1 - 1.5f, 4 + 2 + 3});
}

// Every transformer-layer operation on both devices from the same inputs: the CPU device's
// results (checked by hand and by finite differences in test_layer_ops.cpp) are the reference.
TEST_CASE("cuda attention, norms, rotary and positions match the CPU device", "[cuda]") {
  if (no_cuda_device()) return;
  auto gpu = rt::make_cuda_device(0, 0);
  auto cpu = rt::make_cpu_device(1LL << 26, 1);
  const rt::AttentionShape a{2, 5, 4, 2, 3};
  const auto T = a.tokens(), row = a.row(), q = a.heads * a.head_dim, hidden = std::int64_t{6};
  const auto qkv = pattern(static_cast<std::size_t>(T * row), 1);
  const auto dout = pattern(static_cast<std::size_t>(T * q), 2);
  const auto x = pattern(static_cast<std::size_t>(T * hidden), 3);
  const auto gamma = pattern(static_cast<std::size_t>(hidden), 4);
  const auto beta = pattern(static_cast<std::size_t>(hidden), 5);
  const auto scratch_floats = a.seq * a.seq;
  // Runs every operation on `d`; returns the outputs one after another.
  auto run = [&](rt::Device& d) {
    std::vector<float> all;
    auto keep = [&](const rt::Buffer& b) {
      const auto h = to_host(d, b);
      all.insert(all.end(), h.begin(), h.end());
    };
    auto dq = to_device(d, qkv), ddo = to_device(d, dout);
    auto probs = d.allocate_floats(a.batch * a.heads * a.seq * a.seq, rt::MemoryComponent::buffers);
    auto out = d.allocate_floats(T * q, rt::MemoryComponent::buffers);
    auto dqkv = d.allocate_floats(T * row, rt::MemoryComponent::buffers);
    auto scratch = d.allocate_floats(scratch_floats, rt::MemoryComponent::buffers);
    d.rotary(dq.f(), a, 10000.0f, false);
    keep(dq);
    d.attention(dq.f(), probs.f(), out.f(), a, {}, scratch.f());
    keep(probs);
    keep(out);
    d.attention_backward(dq.f(), out.f(), ddo.f(), probs.f(), dqkv.f(), a, {}, scratch.f());
    d.rotary(dqkv.f(), a, 10000.0f, true);
    keep(dqkv);
    // Dropout: each device draws the mask itself; attention through it, and a plain drop.
    rt::DropoutDraw draw;
    draw.seed = 5;
    draw.samples = a.batch;
    draw.causal_seq = a.seq;
    draw.per_sample = a.heads * a.seq * a.seq;
    draw.p = 0.3;
    draw.site = rt::DropoutSite::attention;
    auto mask = d.allocate(draw.elements(), rt::MemoryComponent::buffers);
    d.dropout_mask(mask.bytes_ptr(), draw);
    std::vector<std::uint8_t> host_mask(static_cast<std::size_t>(draw.elements()));
    d.download(mask.bytes_ptr(), host_mask.data(), draw.elements());
    d.synchronize();
    all.insert(all.end(), host_mask.begin(), host_mask.end());
    const rt::AttentionDropout drop{mask.bytes_ptr(), draw.scale()};
    d.attention(dq.f(), probs.f(), out.f(), a, drop, scratch.f());
    keep(out);
    d.attention_backward(dq.f(), out.f(), ddo.f(), probs.f(), dqkv.f(), a, drop, scratch.f());
    keep(dqkv);
    d.apply_dropout(out.f(), mask.bytes_ptr(), T * q, draw.scale(),
                    dtplan::cost::ElementType::fp32);
    keep(out);
    auto dx = to_device(d, x), dg = to_device(d, gamma), db = to_device(d, beta);
    auto y = d.allocate_floats(T * hidden, rt::MemoryComponent::buffers);
    auto stats = d.allocate_floats(T * 2, rt::MemoryComponent::buffers);
    auto gx = to_device(d, std::vector<float>(static_cast<std::size_t>(T * hidden), 0.5f));
    auto ggamma = d.allocate_floats(hidden, rt::MemoryComponent::buffers);
    auto gbeta = d.allocate_floats(hidden, rt::MemoryComponent::buffers);
    for (const bool layernorm : {true, false}) {
      d.norm(dx.f(), dg.f(), layernorm ? db.f() : nullptr, y.f(), stats.f(), T, hidden, 1e-5f);
      keep(y);
      keep(stats);
      d.norm_backward(dx.f(), dg.f(), stats.f(), y.f(), gx.f(), ggamma.f(),
                      layernorm ? gbeta.f() : nullptr, T, hidden);
      keep(gx);
      keep(ggamma);
      keep(gbeta);
    }
    auto table = to_device(d, pattern(static_cast<std::size_t>(a.seq * hidden), 6));
    d.add_positions(dx.f(), table.f(), T, a.seq, hidden);
    keep(dx);
    d.positions_backward(dx.f(), table.f(), T, a.seq, hidden);
    keep(table);
    return all;
  };
  require_near(run(*gpu), run(*cpu), 1e-4);
}

TEST_CASE("cuda element-wise kernels match their CPU formulas", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  const std::vector<float> x = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f}, u = pattern(6, 4);
  const std::size_t n = x.size();
  auto dx = to_device(*dev, x), du = to_device(*dev, u), dy = to_device(*dev, pattern(6, 5));
  auto y = dev->allocate_floats(6, rt::MemoryComponent::activations);
  auto d1 = dev->allocate_floats(6, rt::MemoryComponent::activations);
  auto d2 = dev->allocate_floats(6, rt::MemoryComponent::activations);
  const auto upstream = pattern(6, 5);
  const double c = std::sqrt(2.0 / std::numbers::pi);
  auto gelu = [&](double v) { return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v))); };
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  std::vector<float> want_y(n), want_dx(n), want_dg(n), want_du(n);
  const double h = 1e-4;  // central differences for the derivatives
  for (std::size_t i = 0; i < n; ++i) {
    want_y[i] = static_cast<float>(gelu(x[i]));
    want_dx[i] = static_cast<float>(upstream[i] * (gelu(x[i] + h) - gelu(x[i] - h)) / (2 * h));
  }
  dev->gelu(dx.f(), y.f(), 6);
  dev->gelu_backward(dx.f(), dy.f(), d1.f(), 6);
  require_near(to_host(*dev, y), want_y);
  require_near(to_host(*dev, d1), want_dx, 1e-4);
  for (std::size_t i = 0; i < n; ++i) {
    want_y[i] = static_cast<float>(silu(x[i]) * u[i]);
    want_dg[i] =
        static_cast<float>(upstream[i] * u[i] * (silu(x[i] + h) - silu(x[i] - h)) / (2 * h));
    want_du[i] = static_cast<float>(upstream[i] * silu(x[i]));
  }
  dev->swiglu(dx.f(), du.f(), y.f(), 6, dtplan::cost::ElementType::fp32);
  dev->swiglu_backward(dx.f(), du.f(), dy.f(), d1.f(), d2.f(), 6, dtplan::cost::ElementType::fp32);
  require_near(to_host(*dev, y), want_y);
  require_near(to_host(*dev, d1), want_dg, 1e-4);
  require_near(to_host(*dev, d2), want_du);
}

TEST_CASE("cuda bias, embedding and the vector operations", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 0);
  // y[2 x 3] += bias; grad_bias += column sums.
  auto y = to_device(*dev, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto bias = to_device(*dev, std::vector<float>{10, 20, 30});
  dev->add_bias(y.f(), bias.f(), 2, 3);
  require_near(to_host(*dev, y), {11, 22, 33, 14, 25, 36});
  dev->bias_grad(y.f(), bias.f(), 2, 3);
  require_near(to_host(*dev, bias), {10 + 25, 20 + 47, 30 + 69});
  // Embedding rows of dim 2; id 1 appears twice, so its gradient row gets both.
  auto table = to_device(*dev, std::vector<float>{0, 1, 10, 11, 20, 21});
  auto ids = to_device(*dev, std::vector<std::int32_t>{2, 1, 1});
  auto out = dev->allocate_floats(6, rt::MemoryComponent::activations);
  dev->embedding(ids.i(), table.f(), out.f(), 3, 2, 0, 3);
  require_near(to_host(*dev, out), {20, 21, 10, 11, 10, 11});
  auto grad = dev->allocate_floats(6, rt::MemoryComponent::gradients);
  auto dout = to_device(*dev, std::vector<float>{1, 2, 3, 4, 5, 6});
  dev->embedding_backward(ids.i(), dout.f(), grad.f(), 3, 2, 0, 3);
  require_near(to_host(*dev, grad), {0, 0, 8, 10, 1, 2});
  // axpy, scale, fill, copy, sum of squares, non-finite check.
  auto a = to_device(*dev, std::vector<float>{1, 2, 3});
  auto b = to_device(*dev, std::vector<float>{1, 1, 1});
  dev->axpy(2.0f, a.f(), b.f(), 3);
  dev->scale(b.f(), 0.5f, 3);
  require_near(to_host(*dev, b), {1.5f, 2.5f, 3.5f});
  CHECK(dev->sum_squares(a.f(), 3) == Approx(14.0));
  CHECK_FALSE(dev->any_non_finite(a.f(), 3));
  dev->copy(b.f(), a.f(), 3);
  require_near(to_host(*dev, a), {1.5f, 2.5f, 3.5f});
  dev->fill(a.f(), INFINITY, 1);
  CHECK(dev->any_non_finite(a.f(), 3));
  // A reduction over many blocks: sum of i^2 for i < 100000 is (n-1) n (2n-1) / 6.
  std::vector<float> big(100000);
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i);
  auto dbig = to_device(*dev, big);
  CHECK(dev->sum_squares(dbig.f(), 100000) == Approx(99999.0 * 100000.0 * 199999.0 / 6.0));
}

TEST_CASE("cuda device: memory accounting and out of memory", "[cuda]") {
  if (no_cuda_device()) return;
  auto dev = rt::make_cuda_device(0, 4 << 20);
  CHECK(dev->kind() == "cuda");
  CHECK_THAT(dev->description(), StartsWith("cuda: ") && Contains("compute capability"));
  CHECK(dev->capacity_bytes() == (4 << 20));
  auto w = dev->allocate(1 << 20, rt::MemoryComponent::weights);
  CHECK(dev->in_use()[rt::MemoryComponent::weights] == (1 << 20));
  CHECK(to_host(*dev, w) == std::vector<float>((1 << 20) / 4, 0.0f));  // zero-filled
  {
    auto act = dev->allocate(2 << 20, rt::MemoryComponent::activations);
    CHECK(dev->in_use().total() == (3 << 20));
  }
  CHECK(dev->in_use().total() == (1 << 20));
  CHECK(dev->peak_bytes() == (3 << 20));
  CHECK(dev->at_peak()[rt::MemoryComponent::activations] == (2 << 20));
  CHECK_THROWS_WITH(dev->allocate(4 << 20, rt::MemoryComponent::weights),
                    Contains("weights") && Contains("out of memory"));
}

TEST_CASE("nccl communicator: collectives over MPI world equal hand sums", "[cuda][nccl]") {
  if (no_cuda_device()) return;
  const auto world = rt::MpiGroup::world();
  const int r = world.rank(), p = world.size();
  auto dev = rt::make_cuda_device(world.local_rank(), 0);
  auto comm = rt::make_nccl_communicator(world, *dev, 60.0);
  CHECK_THAT(comm->description(), StartsWith("NCCL "));
  CHECK(comm->rank() == r);
  CHECK(comm->size() == p);
  comm->set_phase("test");

  // all-reduce of (r + 1)(i + 1): (i + 1) p (p + 1) / 2.
  std::vector<float> mine(5), want(5);
  for (int i = 0; i < 5; ++i) {
    mine[i] = static_cast<float>((r + 1) * (i + 1));
    want[i] = static_cast<float>((i + 1) * p * (p + 1) / 2);
  }
  auto data = to_device(*dev, mine);
  comm->wait(comm->all_reduce(data.f(), 5));
  require_near(to_host(*dev, data), want);

  // reduce-scatter of in[b, i] = r + 10 b + i, then all-gather back (in place): every rank
  // ends with sum_r r + p (10 b + i) = p (p - 1) / 2 + p (10 b + i) in block b.
  const int count = 3;
  std::vector<float> in(p * count), gathered(p * count);
  for (int b = 0; b < p; ++b) {
    for (int i = 0; i < count; ++i) {
      in[b * count + i] = static_cast<float>(r + 10 * b + i);
      gathered[b * count + i] = static_cast<float>(p * (p - 1) / 2 + p * (10 * b + i));
    }
  }
  auto din = to_device(*dev, in);
  auto dall = dev->allocate_floats(p * count, rt::MemoryComponent::buffers);
  float* my_block = dall.f() + r * count;
  comm->wait(comm->reduce_scatter(din.f(), my_block, count));
  comm->wait(comm->all_gather(my_block, dall.f(), count));
  require_near(to_host(*dev, dall), gathered);

  const auto& records = comm->records();
  REQUIRE(records.size() == 3);
  CHECK(records[0].kind == rt::Collective::all_reduce);
  CHECK(records[0].bytes == 5 * 4);
  CHECK(records[1].kind == rt::Collective::reduce_scatter);
  CHECK(records[1].bytes == p * count * 4);
  CHECK(records[2].kind == rt::Collective::all_gather);
  CHECK(records[2].bytes == p * count * 4);
  for (const auto& rec : records) {
    CHECK(rec.phase == "test");
    CHECK(rec.time_s >= 0);  // a one-rank collective may take no measurable time
  }
}

TEST_CASE("nccl communicator: maximum and a ring shift of point-to-point exchanges",
          "[cuda][nccl]") {
  if (no_cuda_device()) return;
  const auto world = rt::MpiGroup::world();
  const int r = world.rank(), p = world.size();
  auto dev = rt::make_cuda_device(world.local_rank(), 0);
  auto comm = rt::make_nccl_communicator(world, *dev, 60.0);
  // max over ranks of (r + 1) * (i odd ? 1 : -1): p on odd entries, -1 on even ones.
  const auto rf = static_cast<float>(r);
  auto data = to_device(*dev, std::vector<float>{-(rf + 1), rf + 1, -(rf + 1)});
  comm->wait(comm->all_reduce_max(data.f(), 3));
  require_near(to_host(*dev, data), {-1.0f, static_cast<float>(p), -1.0f});
  // Each rank sends {r, 10 r} to the next and receives from the previous (itself on one rank).
  auto send = to_device(*dev, std::vector<float>{rf, 10 * rf});
  auto recv = dev->allocate_floats(2, rt::MemoryComponent::buffers);
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const auto prevf = static_cast<float>(prev);
  comm->wait(comm->send_recv(send.f(), 2, next, recv.f(), 2, prev));
  require_near(to_host(*dev, recv), {prevf, 10 * prevf});
  // A half-exchange (the first stage receives nothing in forward) leaves recv as it was.
  comm->wait(comm->send_recv(send.f(), 2, -1, recv.f(), 2, -1));
  require_near(to_host(*dev, recv), {prevf, 10 * prevf});
  const auto& records = comm->records();
  REQUIRE(records.size() == 3);
  CHECK(records[0].kind == rt::Collective::all_reduce);
  CHECK(records[1].kind == rt::Collective::send_recv);
  CHECK(records[1].bytes == 2 * 4);
}

TEST_CASE("nccl communicator: broadcast and reduce from a root", "[cuda][nccl]") {
  if (no_cuda_device()) return;
  const auto world = rt::MpiGroup::world();
  const int r = world.rank(), p = world.size();
  const int root = p - 1;
  auto dev = rt::make_cuda_device(world.local_rank(), 0);
  auto comm = rt::make_nccl_communicator(world, *dev, 60.0);
  auto data = to_device(*dev, std::vector<float>{static_cast<float>(r), 1.0f});
  comm->wait(comm->broadcast(data.f(), 2, root));
  require_near(to_host(*dev, data), {static_cast<float>(root), 1.0f});
  comm->wait(comm->reduce(data.f(), 2, root));
  // The root holds the sum; the others keep their input.
  if (r == root) {
    require_near(to_host(*dev, data), {static_cast<float>(root * p), static_cast<float>(p)});
  } else {
    require_near(to_host(*dev, data), {static_cast<float>(root), 1.0f});
  }
  comm->clear_records();
  comm->wait(comm->all_reduce(data.f(), 2));
  REQUIRE(comm->records().size() == 1);
  CHECK(comm->records()[0].bytes == 8);
}
