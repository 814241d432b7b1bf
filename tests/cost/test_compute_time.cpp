// Tests for cost/src/compute_time.cpp: GEMM roofline and kernel cost on a one-layer model,
// PaLM model FLOPs counted by hand for GPT-2 XL, recomputation, the optimizer step and the
// host link; constants file handling.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;
const std::filesystem::path kModels = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "models";

GpuSpec a100() {
  return GpuCatalog::load(kData / "gpus.json").find("A100-80GB");
}

ComputeConstants round_constants() {
  ComputeConstants k;
  k.gemm_efficiency = 0.5;
  k.attention_efficiency = 0.5;
  k.memory_efficiency = 0.5;
  k.kernel_overhead_s = 1e-5;
  k.elementwise_kernels_per_layer = 10;
  k.cpu_optimizer_bytes_per_s = 1e10;
  k.host_transfer_efficiency = 0.5;
  return k;
}

TrainingConfig bf16(std::int64_t micro_batch) {
  TrainingConfig c;
  c.precision = Precision::bf16;
  c.micro_batch = micro_batch;
  return c;
}
}  // namespace

TEST_CASE("one Linear layer: a GEMM, memory-bound at batch 1, compute-bound at 65536") {
  const auto m = load_model((kModels / "one-linear.json").string(), kData / "models");
  const auto k = round_constants();
  // A100: 312 TFLOP/s bf16 at 50%, 2.039 TB/s at 50%, 10 us per kernel.
  // Batch 1: 2 x (4096 + 4096^2 + 4096) bytes = 33,570,816 B / 1.0195e12 B/s = 32.93 us,
  // against 2 x 4096^2 FLOPs / 156e12 = 0.215 us: memory-bound.
  const auto small = estimate_compute(m, bf16(1), a100(), k);
  const double small_fwd = 2.0 * (4096.0 + 4096.0 * 4096.0 + 4096.0) / (2.039e12 * 0.5) + 1e-5;
  CHECK(small.forward_s == Approx(small_fwd).epsilon(1e-9));
  CHECK(small.backward_s == Approx(2 * small_fwd).epsilon(1e-9));  // input and weight gradients
  // Batch 65536: 2 x 65536 x 4096^2 = 2.199e12 FLOPs / 156e12 = 14.10 ms; bytes 0.57 GB = 0.56 ms.
  const auto big = estimate_compute(m, bf16(65536), a100(), k);
  const double big_fwd = 2.0 * 65536.0 * 4096.0 * 4096.0 / (312e12 * 0.5) + 1e-5;
  CHECK(big.forward_s == Approx(big_fwd).epsilon(1e-9));
  CHECK(big.model_flops == Approx(3 * 2.0 * 65536.0 * 4096.0 * 4096.0));
  CHECK(big.gemm_s == Approx(3 * big_fwd).epsilon(1e-9));
}

TEST_CASE("GPT-2 XL model FLOPs: PaLM's 6 N + 12 L h s per token, N counted by hand") {
  const auto m = load_model("gpt2-xl", kData / "models");
  auto c = bf16(1);
  c.seq_len = 1024;
  const auto t = estimate_compute(m, c, a100(), round_constants());
  // Per block: attention 4h^2 + 4h, MLP 8h^2 + 5h (weights and biases), h = 1600, 48 blocks;
  // the tied LM head is a 50257 x 1600 matmul. N = 1,475,251,200 + 80,411,200.
  const double n = 48.0 * (12.0 * 1600 * 1600 + 9.0 * 1600) + 50257.0 * 1600;
  CHECK(n == 1'555'662'400.0);
  const double tokens = 1024;
  const double expected = 6.0 * n * tokens + 12.0 * 48 * 1600 * 1024 * tokens;
  CHECK(t.model_flops == Approx(expected).epsilon(1e-12));
  CHECK(t.hardware_flops == Approx(expected).epsilon(1e-12));
  CHECK(t.recompute_s == 0.0);
}

TEST_CASE("full checkpointing recomputes every block's forward, selective only attention") {
  const auto m = load_model("gpt2-xl", kData / "models");
  auto c = bf16(4);
  c.seq_len = 1024;
  const auto k = round_constants();
  const auto none = estimate_compute(m, c, a100(), k);
  c.checkpointing = Checkpointing::full;
  const auto full = estimate_compute(m, c, a100(), k);
  c.checkpointing = Checkpointing::selective;
  const auto selective = estimate_compute(m, c, a100(), k);
  CHECK(full.forward_s == none.forward_s);
  CHECK(full.backward_s == Approx(none.backward_s + full.recompute_s));
  CHECK(selective.recompute_s < full.recompute_s);
  CHECK(selective.recompute_s > 0.0);
  // Recomputed blocks: 2 (12h^2 + 9h) per token per block plus the 4 s h attention core.
  const double block_fwd =
      48.0 * (2.0 * (12.0 * 1600 * 1600 + 9.0 * 1600) * 4096 + 4.0 * 1024 * 1600 * 4096);
  CHECK(full.hardware_flops - full.model_flops == Approx(block_fwd).epsilon(1e-12));
  CHECK(full.model_flops == none.model_flops);  // MFU ignores recomputation
}

TEST_CASE("a slower GPU in the set: the ratio of its micro-step compute to ours") {
  const auto m = load_model("gpt2-xl", kData / "models");
  auto c = bf16(4);
  c.seq_len = 1024;
  auto k = round_constants();
  k.kernel_overhead_s = 0;
  // Half the bf16 peak and half the HBM bandwidth: every kernel, compute- or memory-bound,
  // takes exactly twice as long without a fixed per-kernel cost.
  auto half = a100();
  half.peak_flops.bf16 /= 2;
  half.memory_bandwidth_bytes_per_s /= 2;
  CHECK(compute_slowdown(m, c, a100(), half, k) == Approx(2.0).epsilon(1e-12));
  CHECK(compute_slowdown(m, c, half, a100(), k) == Approx(0.5).epsilon(1e-12));
  CHECK(compute_slowdown(m, c, a100(), a100(), k) == 1.0);
}

TEST_CASE("Hopper: FlashAttention-2 and cuDNN attention at their own rates, GEMMs at Hopper's") {
  const auto catalog = GpuCatalog::load(kData / "gpus.json");
  const auto& h100 = catalog.find("H100-SXM");
  auto k = round_constants();                  // attention_efficiency 0.5
  k.hopper_flash_attention_efficiency = 0.35;  // FlashAttention-3 paper: FA2 at 35% of H100
  k.hopper_fused_attention_efficiency = 0.53;
  CHECK(attention_efficiency(a100(), k, AttentionLibrary::pytorch) == 0.5);
  CHECK(attention_efficiency(a100(), k, AttentionLibrary::transformer_engine) == 0.5);
  CHECK(attention_efficiency(h100, k, AttentionLibrary::pytorch) == 0.35);
  CHECK(attention_efficiency(h100, k, AttentionLibrary::transformer_engine) == 0.53);
  // Without Hopper figures, the general one.
  auto plain = round_constants();
  CHECK(attention_efficiency(h100, plain, AttentionLibrary::pytorch) == 0.5);
  // The attention kernels of a micro-step take 0.53 / 0.35 as long under PyTorch's kernel
  // (no fixed per-kernel cost here), and nothing else changes.
  const auto m = load_model("gpt2-xl", kData / "models");
  auto c = bf16(4);
  c.seq_len = 1024;
  k.kernel_overhead_s = 0;
  const auto torch = estimate_compute(m, c, h100, k, AttentionLibrary::pytorch);
  const auto te = estimate_compute(m, c, h100, k, AttentionLibrary::transformer_engine);
  CHECK(torch.attention_s / te.attention_s == Approx(0.53 / 0.35).epsilon(1e-12));
  CHECK(torch.gemm_s == te.gemm_s);
  CHECK(torch.model_flops == te.model_flops);
  // GEMMs on Hopper at hopper_gemm_efficiency: half the general 0.5 doubles every GEMM of
  // GPT-2 XL at 4 x 1024 tokens, all compute-bound (at least 900 FLOPs per byte against a
  // ridge of 0.25 x 989.5e12 / (0.5 x 3.35e12) = 148).
  auto slow = k;
  slow.hopper_gemm_efficiency = 0.25;
  const auto hopper = estimate_compute(m, c, h100, slow);
  CHECK(hopper.gemm_s == Approx(2 * torch.gemm_s).epsilon(1e-12));
  CHECK(estimate_compute(m, c, a100(), slow).gemm_s ==
        estimate_compute(m, c, a100(), k).gemm_s);  // not on Ampere
}

TEST_CASE("optimizer step: bytes per parameter at HBM speed, or at host speed offloaded") {
  const auto k = round_constants();
  auto c = bf16(1);
  // AdamW in bf16: fp32 parameter read + write (8), bf16 gradient (2), two fp32 moments read
  // + written (16), bf16 copy written (2): 28 bytes per parameter.
  CHECK(optimizer_time(1'000'000'000, c, a100(), k) ==
        Approx(28e9 / (2.039e12 * 0.5) + 1e-5).epsilon(1e-12));
  c.offload = Offload::optimizer;
  CHECK(optimizer_time(1'000'000'000, c, a100(), k) == Approx(28e9 / 1e10));
  // Eight ranks of a node step on the same server's memory at once: 8 x the traffic.
  c.dp_size = 16;
  c.gpus_per_node = 8;
  CHECK(optimizer_time(1'000'000'000, c, a100(), k) == Approx(8 * 28e9 / 1e10));
  c = bf16(1);
  c.precision = Precision::fp32;
  c.optimizer = Optimizer::sgd;
  // fp32 SGD: parameter read + write, fp32 gradient: 12 bytes.
  CHECK(optimizer_time(1'000'000'000, c, a100(), k) ==
        Approx(12e9 / (2.039e12 * 0.5) + 1e-5).epsilon(1e-12));
}

TEST_CASE("host link: PCIe 4.0 x16 is 16 GT/s x 16 lanes with 128b/130b coding") {
  auto k = round_constants();
  k.host_transfer_efficiency = 1.0;
  CHECK(host_link_Bps(a100(), k) == Approx(16e9 / 8 * 16 * 128.0 / 130.0));  // 31.5 GB/s
}

TEST_CASE("a GPU without a peak for the precision is refused, naming it") {
  auto gpu = a100();
  gpu.peak_flops.bf16 = 0;
  const auto m = load_model("gpt2", kData / "models");
  REQUIRE_THROWS_WITH(estimate_compute(m, bf16(1), gpu, round_constants()),
                      Catch::Contains("no bf16") && Catch::Contains("choose another {precision}"));
}

TEST_CASE("compute constants: the bundled file loads, overrides are checked") {
  auto k = load_compute_constants(kData / "compute.json");
  CHECK(k.gemm_efficiency > 0.0);
  apply_compute_override(k, "gemm_efficiency=0.6");
  CHECK(k.gemm_efficiency == 0.6);
  CHECK_THROWS_WITH(apply_compute_override(k, "gemm_efficiency=1.5"), Catch::Contains("[0.001"));
  CHECK_THROWS_WITH(apply_compute_override(k, "gem_efficiency=0.5"),
                    Catch::Contains("gemm_efficiency"));
  CHECK_THROWS_WITH(apply_compute_override(k, "gemm_efficiency"), Catch::Contains("KEY=VALUE"));
  CHECK_THROWS_WITH(apply_compute_override(k, "gemm_efficiency=fast"),
                    Catch::Contains("not a number"));
  CHECK(to_json(k).at("gemm_efficiency") == 0.6);
  CHECK(to_json(k).size() == compute_constant_keys().size());
}
