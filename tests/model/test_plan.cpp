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
