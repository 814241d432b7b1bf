// Tests for cost/src/memory.cpp. Model states are checked against the project's founding
// formulas (DESIGN.md; Rajbhandari et al., "ZeRO", SC'20, Fig. 1 with K = 12 for mixed
// precision): with a = 1e9 parameters and n = 8 GPUs, DDP fp32 20a, DDP mixed 18a,
// ZeRO-1 4a + 4a + 8a/n, ZeRO-2 4a + 12a/n, ZeRO-3 16a/n; mixed ZeRO-1 4a + 12a/n,
// ZeRO-2 2a + 14a/n, ZeRO-3 16a/n; DDP with gradient_as_bucket_view 16a.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;
constexpr std::int64_t a = 1'000'000'000;
constexpr std::int64_t kNcclPerComm = 16 * 2 * 9'633'792;  // see test_overheads.cpp

OverheadConstants overheads() {
  return load_overheads(kData / "overheads.json");
}

TrainingConfig config(Strategy s, Precision p, std::int64_t n = 8) {
  TrainingConfig c;
  c.strategy = s;
  c.precision = p;
  c.optimizer = Optimizer::adam;
  c.dp_size = n;
  c.gpus_per_node = 8;
  return c;
}

MemoryEstimate estimate(const TrainingConfig& c) {
  return estimate_memory(model_from_param_count(a, "--params"), c, overheads());
}

std::int64_t states(Strategy s, Precision p) {
  return estimate(config(s, p)).gpu.model_states().value;
}
}  // namespace

TEST_CASE("founding formulas, fp32 (a = 1e9, n = 8)") {
  CHECK(states(Strategy::ddp, Precision::fp32) == 20 * a);
  CHECK(states(Strategy::zero1, Precision::fp32) == 4 * a + 4 * a + 8 * a / 8);  // 9e9
  CHECK(states(Strategy::zero2, Precision::fp32) == 4 * a + 12 * a / 8);         // 5.5e9
  CHECK(states(Strategy::zero3, Precision::fp32) == 16 * a / 8);                 // 2e9
}

TEST_CASE("founding formulas, mixed precision (fp16 and bf16 alike)") {
  for (const auto p : {Precision::fp16, Precision::bf16}) {
    INFO(name_of(p));
    CHECK(states(Strategy::ddp, p) == 18 * a);
    CHECK(states(Strategy::zero1, p) == 4 * a + 12 * a / 8);  // 5.5e9
    CHECK(states(Strategy::zero2, p) == 2 * a + 14 * a / 8);  // 3.75e9
    CHECK(states(Strategy::zero3, p) == 16 * a / 8);          // 2e9
    auto c = config(Strategy::ddp, p);
    c.grad_bucket_view = true;
    CHECK(estimate(c).gpu.model_states().value == 16 * a);
  }
}

TEST_CASE("every strategy x precision, model states by hand") {
  // DDP and ZeRO with fp16/bf16 keep 16-bit weights and gradients plus an fp32 master (the
  // founding formulas). FSDP's MixedPrecision keeps fp32 parameter shards and fp32 gradients
  // (weights 4 + gradients 4 + Adam 8, sharded as the strategy shards them); DataParallel
  // relies on torch.autocast, which keeps fp32 weights and gradients too.
  struct Row {
    Strategy s;
    std::int64_t fp32;
    std::int64_t mixed;
  };
  const Row rows[] = {
      {Strategy::dp, 4 * a + 4 * a + 8 * a, 4 * a + 4 * a + 8 * a},
      {Strategy::ddp, 20 * a, 18 * a},
      {Strategy::zero1, 9 * a, 5'500'000'000},
      {Strategy::zero2, 5'500'000'000, 3'750'000'000},
      {Strategy::zero3, 2 * a, 2 * a},
      {Strategy::fsdp_full, 16 * a / 8, 16 * a / 8},
      {Strategy::fsdp_grad_op, 16 * a / 8, 16 * a / 8},  // + unsharded params (buffers)
      {Strategy::fsdp_hybrid, 16 * a / 8, 16 * a / 8},   // one node of 8: the group is all 8
      {Strategy::fsdp_no_shard, 16 * a, 16 * a},
  };
  for (const auto& row : rows) {
    INFO(name_of(row.s));
    CHECK(states(row.s, Precision::fp32) == row.fp32);
    CHECK(states(row.s, Precision::fp16) == row.mixed);
    CHECK(states(row.s, Precision::bf16) == row.mixed);
  }
}

TEST_CASE("FSDP holds unsharded copies while it computes") {
  // SHARD_GRAD_OP keeps every parameter gathered from forward to the end of backward: in bf16
  // under MixedPrecision (2a), in fp32 without it (4a); NO_SHARD with MixedPrecision keeps the
  // bf16 copy of its fp32 parameters (2a). NCCL buffers come on top with 8 GPUs.
  CHECK(estimate(config(Strategy::fsdp_grad_op, Precision::bf16)).gpu.buffers.value ==
        2 * a + kNcclPerComm);
  CHECK(estimate(config(Strategy::fsdp_grad_op, Precision::fp32)).gpu.buffers.value ==
        4 * a + kNcclPerComm);
  CHECK(estimate(config(Strategy::fsdp_no_shard, Precision::bf16)).gpu.buffers.value ==
        2 * a + kNcclPerComm);
  CHECK(estimate(config(Strategy::fsdp_no_shard, Precision::fp32)).gpu.buffers.value ==
        kNcclPerComm);
}

TEST_CASE("PyTorch autocast keeps fp32 weights, gradients and buckets") {
  // DDP + torch.autocast(bf16) + AdamW: fp32 weights 4a, gradients 4a, buckets 4a, Adam 8a;
  // the bf16 casts of the weights are cached from forward to backward (2a).
  const auto e = estimate(config(Strategy::ddp, Precision::amp_bf16));
  CHECK(e.gpu.model_states().value == 20 * a);
  CHECK(e.gpu.buffers.value == 2 * a + kNcclPerComm);
}

TEST_CASE("shards round up when n does not divide a") {
  const std::int64_t odd = a + 1;  // 1,000,000,001 over 8 -> 125,000,001 per shard
  const auto e = estimate_memory(model_from_param_count(odd, "--params"),
                                 config(Strategy::zero3, Precision::bf16), overheads());
  CHECK(e.gpu.weights.value == 2 * 125'000'001);
  CHECK(e.gpu.optimizer_states.value == 8 * 125'000'001);
}

TEST_CASE("components of ZeRO-2 bf16") {
  const auto e = estimate(config(Strategy::zero2, Precision::bf16));
  CHECK(e.shard_degree == 8);
  CHECK(e.gpu.weights.value == 2 * a);
  CHECK(e.gpu.master_weights.value == 4 * a / 8);
  CHECK(e.gpu.gradients.value == 2 * a / 8);
  CHECK(e.gpu.optimizer_states.value == 8 * a / 8);
  CHECK(e.gpu.grad_buckets.value == 0);
}

TEST_CASE("hybrid sharding across two nodes of four") {
  auto c = config(Strategy::fsdp_hybrid, Precision::bf16, 8);
  c.gpus_per_node = 4;
  const auto e = estimate(c);
  CHECK(e.shard_degree == 4);
  CHECK(e.gpu.model_states().value == 16 * a / 4);
  // Two communicators: the shard group inside the node and the replica group across nodes.
  CHECK(e.gpu.buffers.value == 2 * kNcclPerComm);
  c.dp_size = 6;
  CHECK_THROWS_WITH(estimate(c), Catch::Contains("not a multiple of the 4 GPUs per node"));
}

TEST_CASE("optimizers") {
  auto c = config(Strategy::ddp, Precision::fp32);
  c.optimizer = Optimizer::sgd;
  CHECK(estimate(c).gpu.model_states().value == 12 * a);  // weights, gradients, buckets
  c.optimizer = Optimizer::sgd_momentum;
  CHECK(estimate(c).gpu.model_states().value == 16 * a);
  c.optimizer = Optimizer::adam8bit;
  // 2 B/param of int8 moments + two fp32 scales per 256-element block: 8 * ceil(1e9 / 256).
  CHECK(estimate(c).gpu.optimizer_states.value == 2 * a + 8 * 3'906'250);
}

TEST_CASE("fp32 gradient accumulation buffer") {
  auto c = config(Strategy::zero1, Precision::bf16);
  c.fp32_grad_accumulation = true;
  // weights 2a + fp32 gradients 4a + (master 4a + Adam 8a) / 8
  CHECK(estimate(c).gpu.model_states().value == 2 * a + 4 * a + 12 * a / 8);
}

TEST_CASE("optimizer offload moves states to the host") {
  auto c = config(Strategy::zero2, Precision::bf16);
  c.offload = Offload::optimizer;
  const auto e = estimate(c);
  CHECK(e.gpu.model_states().value == 2 * a);  // only the bf16 weights stay
  CHECK(e.cpu.master_weights.value == 4 * a / 8);
  CHECK(e.cpu.optimizer_states.value == 8 * a / 8);
  CHECK(e.cpu.gradients.value == 4 * a / 8);  // fp32 partition for the CPU Adam step
  CHECK(e.cpu.total().value == 16 * a / 8);
  CHECK(e.cpu_per_node.value == 8 * 16 * a / 8);
}

TEST_CASE("parameter offload leaves only transient state on the GPU") {
  auto c = config(Strategy::zero3, Precision::bf16);
  c.offload = Offload::optimizer_and_params;
  const auto e = estimate(c);
  CHECK(e.gpu.model_states().value == 0);
  CHECK(e.cpu.total().value == (2 + 4 + 8 + 4) * a / 8);
}

TEST_CASE("transient buffers") {
  // ZeRO-1 bf16: DeepSpeed's reduce bucket of min(a, 5e8) bf16 elements + one communicator.
  CHECK(estimate(config(Strategy::zero1, Precision::bf16)).gpu.buffers.value ==
        500'000'000 * 2 + kNcclPerComm);
  // DDP: NCCL only; a single GPU has no communicator.
  CHECK(estimate(config(Strategy::ddp, Precision::bf16)).gpu.buffers.value == kNcclPerComm);
  CHECK(estimate(config(Strategy::ddp, Precision::bf16, 1)).gpu.buffers.value == 0);
  // DataParallel (autocast) rank 0: an fp32 gradient-sized reduction (4a) and the bf16 weight
  // casts (2a); a bare count has no outputs to gather.
  CHECK(estimate(config(Strategy::dp, Precision::bf16)).gpu.buffers.value ==
        4 * a + 2 * a + kNcclPerComm);
}

TEST_CASE("ZeRO-3 and FSDP gather whole units (Llama 2 7B, bf16)") {
  const auto m = load_model("llama-2-7b", kData / "models");
  auto c = config(Strategy::zero3, Precision::bf16);
  c.seq_len = 4096;
  const auto z3 = estimate_memory(m, c, overheads());
  // Blocks of 202,383,360 params (4*4096^2 + 3*4096*11008 + 2*4096); the largest pair of
  // modules is two blocks, gathered in bf16; plus the 5e8-element bf16 reduce bucket and NCCL.
  const std::int64_t block = 202'383'360;
  CHECK(z3.gpu.buffers.value == 2 * block * 2 + 1'000'000'000 + kNcclPerComm);
  c.strategy = Strategy::fsdp_full;
  const auto fsdp = estimate_memory(m, c, overheads());
  // FSDP: the root unit (embeddings 131,072,000 + lm_head 131,072,000 + final norm 4,096)
  // stays gathered; two blocks in bf16; the largest unit's bf16 gradients before
  // reduce-scatter, which is the root (262,148,096 > 202,383,360).
  const std::int64_t root = 131'072'000 + 131'072'000 + 4'096;
  CHECK(fsdp.gpu.buffers.value == 2 * root + 2 * block * 2 + 2 * root + kNcclPerComm);
  CHECK(fsdp.gpu.weights.value == 4 * 842'301'952LL);  // fp32 shard: ceil(6,738,415,616 / 8)
  // Its fp32 gradient shard is 4 x 842,301,952 bytes, but with one micro-step and
  // zero_grad(set_to_none=True) the peak comes at the start of backward, when only the head's
  // exists: lm_head's 32,000 x 4,096 weights, 4 B each over 8 ranks.
  CHECK(fsdp.gpu.gradients.value == 131'072'000LL * 4 / 8);
  c.grad_accum = 2;   // from the second micro-step on, every gradient beside the activations
  c.no_sync = false;  // (no unsharded gradients kept between micro-steps)
  CHECK(estimate_memory(m, c, overheads()).gpu.gradients.value == 4 * 842'301'952LL);
}

TEST_CASE("ZeRO-1 and FSDP offload") {
  auto c = config(Strategy::zero1, Precision::bf16);
  c.offload = Offload::optimizer;
  const auto z1 = estimate(c);
  // ZeRO-1 keeps its bf16 gradients on the GPU (they are not partitioned) ...
  CHECK(z1.gpu.model_states().value == 2 * a + 2 * a);
  // ... and the host holds the master, Adam and an fp32 gradient partition: 16 B x a / 8.
  CHECK(z1.cpu.total().value == 16 * a / 8);
  c.strategy = Strategy::fsdp_full;
  c.offload = Offload::optimizer_and_params;
  const auto fsdp = estimate(c);
  CHECK(fsdp.gpu.model_states().value == 0);
  // CPUOffload: fp32 parameter shard, fp32 gradient shard, Adam: 16 B x a / 8.
  CHECK(fsdp.cpu.total().value == 16 * a / 8);
}

TEST_CASE("overhead: CUDA context plus allocator slack on what is allocated") {
  const auto e = estimate(config(Strategy::ddp, Precision::bf16));
  const std::int64_t allocated = 18 * a + kNcclPerComm;
  // 5% of 18,308,281,344 = 915,414,067.2, rounded up
  CHECK(e.gpu.overhead.value == 536'870'912 + 915'414'068);
  CHECK(e.gpu.total().value == allocated + 536'870'912 + 915'414'068);
  // What PyTorch reports: its caching allocator holds neither the CUDA context nor NCCL's
  // own buffers; max_memory_reserved includes the slack, max_memory_allocated does not.
  CHECK(e.gpu.torch_reserved().value == 18 * a + 915'414'068);
  CHECK(e.gpu.torch_allocated().value == 18 * a);
}

TEST_CASE("fit verdict against a GPU's capacity") {
  const auto catalog = GpuCatalog::load(kData / "gpus.json");
  const auto& gpu = catalog.find("A100-80GB");  // 81920 MiB = 85,899,345,920 bytes
  const auto ddp = estimate(config(Strategy::ddp, Precision::bf16));
  const auto fit = check_fit(ddp, gpu);
  CHECK(fit.capacity.value == 85'899'345'920);
  CHECK(fit.fits);  // 18e9 + buffers + overhead ~ 19.8e9
  CHECK(fit.margin.value == 85'899'345'920 - ddp.gpu.total().value);
  const auto big = estimate_memory(model_from_param_count(10 * a, "--params"),
                                   config(Strategy::ddp, Precision::bf16), overheads());
  const auto no = check_fit(big, gpu);
  CHECK_FALSE(no.fits);  // 180e9 model states
  CHECK(no.margin.value < 0);
}

TEST_CASE("byte counts beyond 64 bits are refused") {
  const auto m = model_from_param_count(5'000'000'000'000'000'000, "--params");
  CHECK_THROWS_WITH(estimate_memory(m, config(Strategy::ddp, Precision::fp32), overheads()),
                    Catch::Contains("overflows a 64-bit count"));
}

TEST_CASE("FSDP's no_sync holds unsharded gradients across micro-steps, DDP's does not grow") {
  // FSDP MixedPrecision bf16: gradients are the fp32 shard, 4a/n; no_sync adds 2a of
  // unsharded bf16 gradients on every GPU, for each sharded FSDP strategy.
  for (const auto s : {Strategy::fsdp_full, Strategy::fsdp_grad_op, Strategy::fsdp_hybrid}) {
    auto c = config(s, Precision::bf16);
    CHECK(estimate(c).gpu.gradients.value == 4 * a / 8);
    c.grad_accum = 4;
    CHECK(estimate(c).gpu.gradients.value == 4 * a / 8 + 2 * a);
    c.grad_accum = 4;
    c.no_sync = true;
    // The explanation names the training field that avoids it, for a front end to render.
    const auto e = estimate(c);
    const auto it = std::find_if(e.explain.begin(), e.explain.end(),
                                 [](const auto& x) { return x.first == "gradients"; });
    REQUIRE(it != e.explain.end());
    CHECK_THAT(it->second, Catch::Matchers::Contains("{sync_every_micro_step} avoids it"));
    c.no_sync = false;
    CHECK(estimate(c).gpu.gradients.value == 4 * a / 8);
  }
  // DDP accumulates into the gradients it holds; ZeRO-3 cannot defer synchronisation.
  auto ddp = config(Strategy::ddp, Precision::bf16);
  const auto before = estimate(ddp).gpu.total();
  ddp.grad_accum = 4;
  CHECK(estimate(ddp).gpu.total() == before);
  auto z3 = config(Strategy::zero3, Precision::bf16);
  const auto z3_before = estimate(z3).gpu.total();
  z3.grad_accum = 4;
  CHECK(estimate(z3).gpu.total() == z3_before);
}

TEST_CASE("PyTorch's peak: the start of backward or the optimizer step, with set_to_none") {
  // GPT-2 XL (1,557,611,200 parameters; the head is its tied 50,257 x 1,600 embedding) under
  // DDP in fp32 on one GPU: 4 B weights, 4 B gradients, 8 B Adam, 4 B DDP buckets a parameter.
  const auto m = load_model("gpt2-xl", kData / "models");
  const std::int64_t p = 1'557'611'200, head = 50'257LL * 1600;
  auto c = config(Strategy::ddp, Precision::fp32, 1);
  c.seq_len = 1024;
  c.micro_batch = 4;
  c.grad_accum = 1;
  const auto big = estimate_memory(m, c, overheads());
  // Without checkpointing the activations outweigh every gradient: the peak is the start of
  // backward, and only the head's gradient exists then (zero_grad(set_to_none=True)).
  CHECK(big.gpu.gradients.value == 4 * head);
  CHECK(big.gpu.total() == big.backward_total);
  CHECK(big.step_total < big.backward_total);
  // With full checkpointing they do not: the peak is the optimizer step, the activations and
  // buffers but NCCL's freed, every gradient and foreach Adam's square-root list there. What
  // PyTorch has allocated then: 4 + 4 + 8 + 4 + 4 = 24 B a parameter.
  c.checkpointing = Checkpointing::full;
  const auto small = estimate_memory(m, c, overheads());
  CHECK(small.gpu.total() == small.step_total);
  const auto& g = small.gpu;
  CHECK(g.torch_allocated().value == 24 * p);
  // The fused step has no such list: 20 B a parameter.
  c.optimizer_impl = OptimizerImpl::fused;
  const auto fused = estimate_memory(m, c, overheads()).gpu;
  CHECK(fused.torch_allocated().value == 20 * p);
  // Accumulating over micro-steps, every gradient sits beside the next micro-step's
  // activations: the gradients row is all of them again.
  c.optimizer_impl = OptimizerImpl::framework;
  c.checkpointing = Checkpointing::none;
  c.grad_accum = 2;
  const auto accumulating = estimate_memory(m, c, overheads());
  CHECK(accumulating.gpu.gradients.value == 4 * p);
  CHECK(accumulating.gpu.total() == accumulating.backward_total);
}

// What a search reads (MemoryFigures) must be what a report shows (estimate_memory), for every
// strategy, precision, recomputation, offload, accumulation and synchronisation mode.
TEST_CASE("the figures a search reads are the full estimate's, without its explanations") {
  const auto m = load_model("llama-2-7b", kData / "models");
  const auto k = overheads();
  const MemoryFigures figures(m, k);
  auto c = config(Strategy::zero3, Precision::bf16);
  c.seq_len = 4096;
  // The figures' own ZeRO-3 buffers, by hand as in "ZeRO-3 and FSDP gather whole units".
  CHECK(figures(c).gpu.buffers.value == 2 * 202'383'360LL * 2 + 1'000'000'000 + kNcclPerComm);
  std::int64_t compared = 0;
  for (const auto& s : kStrategies)
    for (const auto p : {Precision::fp32, Precision::bf16})
      for (const auto& r : kCheckpointings)
        for (const auto& o : kOffloads)
          for (const std::int64_t accum : {1, 4})
            for (const bool no_sync : {false, true}) {
              c.strategy = s.value;
              c.precision = p;
              c.checkpointing = r.value;
              c.offload = o.value;
              c.grad_accum = accum;
              c.no_sync = no_sync;
              c.micro_batch = 2;
              INFO(s.name << " " << name_of(p) << " " << r.name << " " << o.name << " accum "
                          << accum << " no_sync " << no_sync);
              std::optional<MemoryEstimate> full;
              try {
                full = estimate_memory(m, c, k);
              } catch (const Error&) {
                CHECK_THROWS_AS(figures(c), Error);  // refused alike
                continue;
              }
              const auto f = figures(c);
              ++compared;
              CHECK(f.gpu.total().value == full->gpu.total().value);
              CHECK(f.gpu.activations.value == full->gpu.activations.value);
              CHECK(f.gpu.buffers.value == full->gpu.buffers.value);
              CHECK(f.gpu.gradients.value == full->gpu.gradients.value);
              CHECK(f.backward_total.value == full->backward_total.value);
              CHECK(f.step_total.value == full->step_total.value);
              CHECK(f.cpu_per_node.value == full->cpu_per_node.value);
              CHECK(f.explain.empty());
              CHECK(f.activation_terms.empty());
              CHECK(!full->explain.empty());
            }
  CHECK(compared > 100);  // most combinations are supported
}
