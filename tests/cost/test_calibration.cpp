// Tests for cost/src/calibration.cpp and the profile's rate curves and step correction:
// fits on synthetic samples generated from known constants must give the constants back.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "dtplan/cost/calibration.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Matchers::Contains;

namespace {

// A deterministic +-3% wobble, so fits face noise without randomness in tests.
double wobble(int i) {
  return 1.0 + 0.03 * std::sin(1.7 * i);
}

std::vector<GemmSample> gemm_samples(double per_flop, double per_byte, double per_call,
                                     bool noisy) {
  std::vector<GemmSample> out;
  int i = 0;
  for (std::int64_t m : {128, 512, 2048}) {
    for (std::int64_t n : {32, 256, 1024}) {
      for (std::int64_t k : {16, 64, 512}) {
        const double md = double(m), nd = double(n), kd = double(k);
        const double t =
            per_flop * 2 * md * nd * kd + per_byte * 4 * (md * kd + kd * nd + md * nd) + per_call;
        out.push_back({m, n, k, "nt", t * (noisy ? wobble(i++) : 1.0)});
      }
    }
  }
  return out;
}

HardwareProfile flat_profile() {
  HardwareProfile p;
  p.gemm_s_per_flop = 1e-11;
  for (auto* c : {&p.elementwise_s_per_byte, &p.softmax_s_per_element, &p.activation_s_per_element,
                  &p.activation_grad_s_per_element, &p.adam_s_per_param, &p.sgd_s_per_param}) {
    c->points = {{1, 1e-9}};
  }
  for (const char* k :
       {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv"})
    p.collectives.push_back({k, 2, 2e-5, 1e-9, 0});
  return p;
}

// The tiny stack of the runtime tests (vocab 37, 4 heads of 3, MLP 20, 2 layers, 8 tokens a
// sample), 2 micro-steps of 2 samples on 2 ranks.
RuntimeRun tiny_run() {
  RuntimeRun run;
  auto& s = run.stack;
  s.vocab = 37;
  s.heads = s.kv_heads = 4;
  s.head_dim = 3;
  s.hidden = 12;
  s.ffn = 20;
  s.layers = 2;
  s.seq_len = 8;
  run.ranks = 2;
  run.micro_batch = 2;
  run.grad_accum = 2;
  return run;
}

}  // namespace

TEST_CASE("GEMM fit recovers per-FLOP, per-byte and per-call constants") {
  HardwareProfile p;
  // 40 GFLOP/s, 100 GB/s operand traffic, 3 us per call: the CPU profile's order of magnitude.
  fit_gemm(gemm_samples(2.5e-11, 1e-11, 3e-6, false), p);
  CHECK(p.gemm_s_per_flop == Approx(2.5e-11).epsilon(1e-6));
  CHECK(p.gemm_s_per_byte == Approx(1e-11).epsilon(1e-6));
  CHECK(p.gemm_s_per_call == Approx(3e-6).epsilon(1e-6));
  CHECK(p.gemm_rms_relative_error < 1e-9);
  CHECK(p.gemm_samples.size() == 27);
}

TEST_CASE("GEMM fit with 3% noise stays close and never goes negative") {
  HardwareProfile p;
  fit_gemm(gemm_samples(2.5e-11, 1e-11, 3e-6, true), p);
  CHECK(p.gemm_s_per_flop == Approx(2.5e-11).epsilon(0.05));
  CHECK(p.gemm_rms_relative_error < 0.03);
  // No per-call cost at all: noise must not produce a negative one.
  HardwareProfile q;
  fit_gemm(gemm_samples(2.5e-11, 1e-11, 0, true), q);
  CHECK(q.gemm_s_per_call >= 0);
  CHECK(q.gemm_s_per_byte >= 0);
  CHECK_THROWS_WITH(fit_gemm({{1, 1, 1, "nt", 1e-6}}, q), Contains("at least 3"));
}

TEST_CASE("collective fits: latency and bandwidth per kind and communicator size") {
  std::vector<CollectiveSample> s;
  for (std::int64_t bytes = 4096; bytes <= (16 << 20); bytes *= 4) {
    // all_reduce over 2 ranks: 10 us + bytes / 3 GB/s; over 4 ranks: 25 us + bytes / 2 GB/s.
    s.push_back({"all_reduce", 2, bytes, 10e-6 + double(bytes) / 3e9});
    s.push_back({"all_reduce", 4, bytes, 25e-6 + double(bytes) / 2e9});
  }
  const auto fits = fit_collectives(s);
  REQUIRE(fits.size() == 2);
  for (const auto& c : fits) {
    CHECK(c.kind == "all_reduce");
    CHECK(c.latency_s == Approx(c.ranks == 2 ? 10e-6 : 25e-6).epsilon(1e-6));
    CHECK(c.s_per_byte == Approx(c.ranks == 2 ? 1 / 3e9 : 1 / 2e9).epsilon(1e-6));
  }
  CHECK_THROWS_WITH(fit_collectives({{"broadcast", 2, 4096, 1e-5}}),
                    Contains("broadcast over 2 ranks needs at least two message sizes"));
}

TEST_CASE("rate curves interpolate in log(size) and are flat beyond their ends") {
  const auto c = rate_curve({{1e5, 4e-4}, {1e3, 2e-6}, {1e3, 3e-6}}, "test");
  REQUIRE(c.points.size() == 2);
  CHECK(c.points[0].s_per_unit == Approx(2e-9));  // the faster of the two at 1e3
  CHECK(c.points[1].s_per_unit == Approx(4e-9));
  // 1e4 is halfway between 1e3 and 1e5 in log: 3e-9 s per unit.
  CHECK(c.s_per_unit(1e4, "test") == Approx(3e-9));
  CHECK(c.s_per_unit(10, "test") == Approx(2e-9));
  CHECK(c.s_per_unit(1e9, "test") == Approx(4e-9));
  CHECK(c.time_s(1e4, "test") == Approx(3e-5));
  CHECK_THROWS_WITH(RateCurve{}.s_per_unit(1, "softmax"), Contains("no measured rate for softmax"));
  CHECK_THROWS_WITH(rate_curve({{0, 1}}, "adam"), Contains("adam"));
}

TEST_CASE("step correction recovers known compute, collective and optimizer scales") {
  // measured f+b = 1.2 compute + 2.0 collectives; measured sync+opt = 1.5 opt + 2.0 its coll.
  std::vector<StepSample> s;
  const double parts[][4] = {{0.030, 0.002, 0.001, 0.000},
                             {0.060, 0.001, 0.002, 0.001},
                             {0.020, 0.004, 0.004, 0.003},
                             {0.100, 0.000, 0.001, 0.002}};
  for (const auto& p : parts) {
    s.push_back(
        {"synthetic", p[0], p[1], p[2], p[3], 1.2 * p[0] + 2.0 * p[1], 1.5 * p[2] + 2.0 * p[3]});
  }
  const auto k = fit_step_correction(s);
  CHECK(k.compute_scale == Approx(1.2).epsilon(1e-6));
  CHECK(k.collective_scale == Approx(2.0).epsilon(1e-6));
  CHECK(k.optimizer_scale == Approx(1.5).epsilon(1e-6));
  CHECK(k.samples == 4);
  CHECK(k.rms_relative_error < 1e-9);
}

TEST_CASE("a part too small to see keeps its scale at 1") {
  // One rank: no collectives at all. Compute runs 10% slower than predicted.
  std::vector<StepSample> s{{"a", 0.05, 0, 0.001, 0, 0.055, 0.001},
                            {"b", 0.08, 0, 0.002, 0, 0.088, 0.002}};
  const auto k = fit_step_correction(s);
  CHECK(k.compute_scale == Approx(1.1).epsilon(1e-6));
  CHECK(k.collective_scale == 1.0);
  CHECK(k.optimizer_scale == Approx(1.0).epsilon(1e-6));
  CHECK_THROWS_WITH(fit_step_correction({}), Contains("no measured steps"));
}

TEST_CASE("the step correction scales the predicted parts of a runtime step") {
  auto run = tiny_run();
  run.strategy = Strategy::zero1;
  auto p = flat_profile();
  const auto raw = predict_runtime_step(run, p);
  const auto& r = raw.parts;
  CHECK(raw.step_s ==
        Approx(r.compute_s + r.collectives_s + r.optimizer_s + r.optimizer_collectives_s));
  p.correction = {1.25, 3.0, 2.0, 1, 0};
  const auto c = predict_runtime_step(run, p);
  CHECK(c.step_s ==
        Approx(1.25 * r.compute_s + 3.0 * (r.collectives_s + r.optimizer_collectives_s) +
               2.0 * r.optimizer_s));
  CHECK(c.forward_s + c.backward_s == Approx(1.25 * r.compute_s + 3.0 * r.collectives_s));
}

namespace {

// Attention timings from known constants: forward c0 + c1 S^2 + c2 S^2 d, backward twice that.
std::vector<AttentionSample> attention_samples(double c0, double c1, double c2) {
  std::vector<AttentionSample> out;
  for (std::int64_t seq : {64, 128, 256, 512}) {
    for (std::int64_t d : {4, 16, 64}) {
      const double s2 = double(seq) * double(seq);
      const double f = c0 + c1 * s2 + c2 * s2 * double(d);
      out.push_back({seq, d, f, 2 * f});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("attention fit recovers its per-call, per-score and per-product constants") {
  // 3 us a call, 1 ns a score (softmax and mask), 20 ps a score x width (the products).
  const auto f = fit_attention(attention_samples(3e-6, 1e-9, 2e-11));
  REQUIRE(f.forward.size() == 3);
  CHECK(f.forward[0] == Approx(3e-6).epsilon(1e-6));
  CHECK(f.forward[1] == Approx(1e-9).epsilon(1e-6));
  CHECK(f.forward[2] == Approx(2e-11).epsilon(1e-6));
  CHECK(f.backward[2] == Approx(4e-11).epsilon(1e-6));
  // 3 us + 1 ns x 128^2 + 20 ps x 128^2 x 64.
  CHECK(f.forward_s(128, 64) == Approx(3e-6 + 1e-9 * 16384 + 2e-11 * 16384 * 64));
  CHECK_THROWS_WITH(fit_attention({{64, 4, 1e-6, 1e-6}}), Contains("at least 3"));
}

TEST_CASE("a runtime step prices attention from the profile's fit when it has one") {
  auto run = tiny_run();
  auto p = flat_profile();
  p.attention = AttentionFit{{1e-6, 0, 0}, {2e-6, 0, 0}, 0, {}};
  const auto one = predict_runtime_step(run, p);
  // Per micro-step 2 sequences x 4 heads x 2 layers = 16 (sequence, head) calls; 2 micro-steps.
  p.attention->forward = {2e-6, 0, 1e-9};
  const auto two = predict_runtime_step(run, p);
  CHECK(two.parts.compute_s - one.parts.compute_s ==
        Approx(2 * 16 * (1e-6 + 1e-9 * 64 * 3)).epsilon(1e-9));
  CHECK(two.forward_s - one.forward_s == Approx(2 * 16 * (1e-6 + 1e-9 * 64 * 3)).epsilon(1e-9));
  // Selective recomputation reruns the attention core in backward: the same 32 calls again.
  run.stack.recompute = Checkpointing::selective;
  const auto selective = predict_runtime_step(run, p);
  CHECK(selective.parts.compute_s - two.parts.compute_s ==
        Approx(2 * 16 * (2e-6 + 1e-9 * 64 * 3)).epsilon(1e-9));
  // Full recomputation reruns every block's forward: more than the attention core, less than
  // the whole forward (the head and the loss are not rerun).
  run.stack.recompute = Checkpointing::full;
  const auto full = predict_runtime_step(run, p);
  const double rerun = full.parts.compute_s - two.parts.compute_s;
  CHECK(rerun > selective.parts.compute_s - two.parts.compute_s);
  CHECK(rerun < two.forward_s);
}

TEST_CASE("profiles round-trip through JSON, version 1 files still load") {
  auto p = flat_profile();
  p.backend = "cpu";
  p.hardware = "synthetic";
  p.created = "2026-11-23T00:00:00Z";
  fit_gemm(gemm_samples(2.5e-11, 1e-11, 3e-6, false), p);
  p.elementwise_s_per_byte = rate_curve({{1e3, 1e-7}, {1e6, 2e-4}}, "element-wise");
  p.step_samples = {{"s", 0.05, 0.001, 0.001, 0, 0.06, 0.0012}};
  p.correction = fit_step_correction(p.step_samples);
  p.attention = fit_attention(attention_samples(3e-6, 1e-9, 2e-11));
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-profile.json";
  std::ofstream(path) << to_json(p).dump(2);
  const auto q = load_profile(path);
  CHECK(to_json(q) == to_json(p));
  CHECK(q.attention->samples.size() == 12);
  std::filesystem::remove(path);
  // The H100 profile measured before schema version 2 (single rates), kept as a fixture.
  const auto v1 =
      load_profile(std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "profiles/h100-v1.json");
  CHECK(v1.backend == "cuda");
  REQUIRE(v1.elementwise_s_per_byte.points.size() == 1);
  CHECK(v1.elementwise_s_per_byte.points[0].s_per_unit > 0);
  CHECK(v1.correction.compute_scale == 1.0);
  CHECK_FALSE(v1.attention);  // calibrated before the runtime executed attention
}

TEST_CASE("a profile with descending curve sizes is refused, naming the key") {
  auto j = to_json(flat_profile());
  j["backend"] = "cpu";
  j["hardware"] = j["created"] = "x";
  j["gemm"]["s_per_flop"] = 1e-11;
  j["softmax_s_per_element"] = {{{"size", 10}, {"s_per_unit", 1e-9}},
                                {{"size", 5}, {"s_per_unit", 1e-9}}};
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-bad-profile.json";
  std::ofstream(path) << j.dump();
  CHECK_THROWS_WITH(load_profile(path), Contains("softmax_s_per_element") && Contains("ascend"));
  std::filesystem::remove(path);
}

TEST_CASE("GEMM interpolation is kept only when it predicts shapes it has not seen") {
  // Every form of a shape shares its deviation, so leaving one sample out must leave out its
  // twins too. Random per-shape deviations (+-15%) cannot be interpolated: the plain fit wins.
  const auto noisy = [](std::int64_t m, std::int64_t n, std::int64_t k) {
    const auto h = static_cast<std::uint64_t>(m * 7919 + n * 104729 + k * 1299709);
    return 1.0 + 0.15 * (static_cast<double>(h % 1000) / 500.0 - 1.0);
  };
  // A smooth deviation (small k runs slower, fading with k) is what interpolation is for.
  const auto smooth = [](std::int64_t, std::int64_t, std::int64_t k) {
    return 1.0 + 0.6 * std::exp(-static_cast<double>(k) / 96.0);
  };
  for (int c = 0; c < 2; ++c) {
    std::vector<GemmSample> samples;
    for (std::int64_t m : {128, 256, 512, 1024, 2048}) {
      for (std::int64_t n : {64, 256, 1024}) {
        for (std::int64_t k : {16, 32, 64, 128, 256, 512}) {
          const double md = double(m), nd = double(n), kd = double(k);
          const double t =
              (2.5e-11 * 2 * md * nd * kd + 3e-6) * (c == 0 ? noisy(m, n, k) : smooth(m, n, k));
          for (const char* form : {"nt", "nn"})
            samples.push_back({m, n, k, form, t});
        }
      }
    }
    HardwareProfile p;
    fit_gemm(samples, p);
    INFO((c == 0 ? "per-shape noise" : "smooth deviation"));
    CHECK(p.gemm_interpolate == (c == 1));
  }
}

TEST_CASE("collectives hidden behind compute fit to (almost) nothing, not to 1") {
  // DDP-like steps: buckets all-reduce under backward, so forward+backward measures compute
  // alone (x1.1) although the model predicts collectives in that phase.
  std::vector<StepSample> s;
  for (double c : {0.03, 0.05, 0.08}) {
    s.push_back({"ddp", c, 0.2 * c, 0.002, 0, 1.1 * c, 0.002});
  }
  const auto k = fit_step_correction(s);
  CHECK(k.compute_scale == Approx(1.1).epsilon(1e-6));
  CHECK(k.collective_scale == Approx(1e-3));
  CHECK(k.rms_relative_error < 0.01);
}

TEST_CASE("a tensor-parallel runtime step lists the all-reduces of Megatron's split") {
  auto run = tiny_run();
  auto& s = run.stack;
  s = tensor_parallel_share(s, 2);  // the vocabulary padded to 38, 19 a rank
  run.ranks = 1;                    // one data-parallel rank: its gradient all-reduces cost nothing
  run.grad_accum = 3;
  auto count = [](const RuntimePrediction& p, const std::string& phase, std::int64_t bytes) {
    for (const auto& c : p.collectives) {
      if (c.kind == "all_reduce" && c.phase == phase && c.bytes == bytes) return c.count_per_step;
    }
    return std::int64_t{0};
  };
  // 16 tokens a micro-step: hidden-sized sums of 16 x 12 x 4 = 768 B. Forward: the embedding
  // and 2 per block = 5, the loss's maxima (64 B) and sums (128 B) once; backward: the head's
  // and 2 per block = 5. Three micro-steps.
  auto p = predict_runtime_step(run, flat_profile());
  CHECK(count(p, "tensor-parallel forward", 768) == 15);
  CHECK(count(p, "tensor-parallel forward", 64) == 3);
  CHECK(count(p, "tensor-parallel forward", 128) == 3);
  CHECK(count(p, "tensor-parallel backward", 768) == 15);
  // 36 calls, each at the 2-rank fit: 20 us + 1 ns a byte.
  CHECK(p.parts.collectives_s == Approx(36 * 2e-5 + 1e-9 * (30 * 768 + 3 * 64 + 3 * 128)));
  // Full recomputation reruns each block's two forward sums in backward.
  s.recompute = Checkpointing::full;
  p = predict_runtime_step(run, flat_profile());
  CHECK(count(p, "tensor-parallel backward", 768) == 27);
}

TEST_CASE("a pipeline stage's step: its exchanges by hand, the 1F1B total on every stage") {
  auto run = tiny_run();
  run.ranks = 1;
  run.grad_accum = 3;
  const auto whole = run.stack;
  auto stage = [&](std::int64_t q, std::int64_t micro_batches) {
    auto r = run;
    r.stack = pipeline_stage(whole, 2, q);
    r.grad_accum = micro_batches;
    return predict_runtime_step(r, flat_profile());
  };
  auto count = [](const RuntimePrediction& p, const std::string& phase) {
    for (const auto& c : p.collectives) {
      if (c.kind == "send_recv" && c.phase == phase) return c.count_per_step;
    }
    return std::int64_t{0};
  };
  // 3 micro-batches over 2 stages. Stage 0 sends 1 activation ahead (forward), then 2 steady
  // exchanges and 1 in cooldown wait for gradients (backward). Stage 1 receives an activation
  // before each forward (3) and returns its last gradient alone (backward).
  const auto first = stage(0, 3), last = stage(1, 3);
  CHECK(count(first, "pipeline forward") == 1);
  CHECK(count(first, "pipeline backward") == 3);
  CHECK(count(last, "pipeline forward") == 3);
  CHECK(count(last, "pipeline backward") == 1);
  // Both stages compute for the pipeline's whole span: every stage's micro-batch once, plus
  // each further micro-batch at the slower stage's pace (linear in the micro-batches).
  CHECK(first.parts.compute_s == Approx(last.parts.compute_s));
  const double one = stage(0, 1).parts.compute_s, two = stage(0, 2).parts.compute_s;
  CHECK(stage(1, 1).parts.compute_s == Approx(one));
  CHECK(first.parts.compute_s - two == Approx(two - one));
  // The slower stage's pace lies between half the pair's and all of it.
  CHECK(two - one >= one / 2);
  CHECK(two - one <= one);
}
