// Tests for model/src/plan.cpp: the Plan JSON written by `dtplan plan --save-plan` reads back
// as written; a file that contradicts itself or is malformed is refused with its key named.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/plan.hpp"

using namespace dtplan;

namespace {
Plan sample() {
  Plan p;
  p.model = "llama-2-7b";
  p.params = 6'738'415'616;
  p.topology = "dgx-a100";
  p.nodes = 2;
  p.gpu = "A100-80GB";
  p.training.strategy = Strategy::fsdp_full;
  p.training.precision = Precision::bf16;
  p.training.dp_size = 16;
  p.training.gpus_per_node = 8;
  p.training.micro_batch = 4;
  p.training.seq_len = 4096;
  p.training.checkpointing = Checkpointing::selective;
  p.grad_accum = 8;
  p.global_batch = 512;
  p.predicted = {12.5, 40.96, 167772.16, 0.52, 60'000'000'000};
  return p;
}

// Each test its own file: ctest runs test cases in parallel processes.
std::filesystem::path write(const nlohmann::json& j, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / ("dtplan-test-model-plan-" + name);
  std::ofstream(path) << j.dump(2);
  return path;
}
}  // namespace

TEST_CASE("a plan reads back as written") {
  const auto p = sample();
  const auto back = plan_from_json(write(to_json(p), "roundtrip.json"));
  CHECK(back.model == p.model);
  CHECK(back.params == p.params);
  CHECK(back.nodes == 2);
  CHECK(back.training.strategy == Strategy::fsdp_full);
  CHECK(back.training.checkpointing == Checkpointing::selective);
  CHECK(back.training.dp_size == 16);
  CHECK(back.training.micro_batch == 4);
  CHECK(back.grad_accum == 8);
  CHECK(back.global_batch == 512);
  CHECK(back.predicted.step_time_s == 12.5);
  CHECK(back.predicted.memory_per_gpu_bytes == 60'000'000'000);
}

TEST_CASE("a plan keeps what selective recomputation rebuilds and how the step runs") {
  auto p = sample();
  auto& t = p.training;
  t.recompute_modules = parse_recompute_modules("core_attn,mlp");
  t.checkpoint_every = 2;
  t.optimizer_impl = OptimizerImpl::fused;
  t.layer_kernels = LayerKernels::eager;
  t.zero_grad = ZeroGrad::zeros;
  t.fp8 = Fp8Recipe::delayed;
  const auto back = plan_from_json(write(to_json(p), "recorded.json")).training;
  CHECK(back.recompute_modules == t.recompute_modules);
  CHECK(back.checkpoint_every == 2);
  CHECK(back.optimizer_impl == OptimizerImpl::fused);
  CHECK(back.layer_kernels == LayerKernels::eager);
  CHECK(back.zero_grad == ZeroGrad::zeros);
  CHECK(back.fp8 == Fp8Recipe::delayed);
  // Plans written before these were recorded read as planned with the defaults.
  auto old = to_json(sample());
  for (const char* key : {"recompute_modules", "checkpoint_every", "optimizer_impl",
                          "layer_kernels", "zero_grad", "fp8"})
    old.erase(key);
  const auto defaults = plan_from_json(write(old, "before.json")).training;
  CHECK(defaults.recompute_modules.is_default());
  CHECK(defaults.checkpoint_every == 1);
  CHECK(defaults.fp8 == Fp8Recipe::none);
  // A bad value is named with its key.
  auto bad = to_json(p);
  bad["recompute_modules"] = "core_attn,everything";
  CHECK_THROWS_WITH(plan_from_json(write(bad, "bad-modules.json")),
                    Catch::Contains("recompute_modules") && Catch::Contains("everything"));
  bad = to_json(p);
  bad["checkpoint_every"] = 0;
  CHECK_THROWS_WITH(plan_from_json(write(bad, "bad-every.json")),
                    Catch::Contains("checkpoint_every"));
}

TEST_CASE("a plan records its tensor-parallel ranks, and older plans had one") {
  auto p = sample();
  p.tp = 4;
  CHECK(plan_from_json(write(to_json(p), "tp.json")).tp == 4);
  auto j = to_json(sample());
  j.erase("tp");
  CHECK(plan_from_json(write(j, "tp-absent.json")).tp == 1);
  j["tp"] = 0;
  CHECK_THROWS_WITH(plan_from_json(write(j, "tp-zero.json")), Catch::Contains("tp"));
  j["tp"] = "two";
  CHECK_THROWS_WITH(plan_from_json(write(j, "tp-text.json")), Catch::Contains("tp"));
}

TEST_CASE("a plan whose batch does not multiply out, or with unknown keys, is refused") {
  auto j = to_json(sample());
  j["global_batch"] = 500;
  CHECK_THROWS_WITH(plan_from_json(write(j, "bad1.json")),
                    Catch::Contains("global_batch") && Catch::Contains("micro_batch x grad_accum"));
  j = to_json(sample());
  j["strategy"] = "zero4";
  CHECK_THROWS_WITH(plan_from_json(write(j, "bad2.json")), Catch::Contains("strategy"));
  j = to_json(sample());
  j["extra"] = 1;
  CHECK_THROWS_WITH(plan_from_json(write(j, "bad3.json")), Catch::Contains("extra"));
  j = to_json(sample());
  j["schema_version"] = 2;
  CHECK_THROWS_WITH(plan_from_json(write(j, "bad4.json")), Catch::Contains("schema_version"));
  j = to_json(sample());
  j.erase("dp");
  CHECK_THROWS_WITH(plan_from_json(write(j, "bad5.json")), Catch::Contains("dp"));
}
