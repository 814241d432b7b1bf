// Tests for cost/src/memory_json.cpp: the keys users script against, bytes as integers, and
// totals that add up.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/cost/memory.hpp"

using namespace dtplan;
using namespace dtplan::cost;

TEST_CASE("memory JSON has the documented keys and consistent sums") {
  const std::filesystem::path data = DTPLAN_DATA_DIR;
  TrainingConfig c;
  c.strategy = Strategy::zero2;
  c.dp_size = 4;
  c.gpus_per_node = 4;
  c.offload = Offload::optimizer;
  const auto e = estimate_memory(model_from_param_count(2'000'000'000, "--params"), c,
                                 load_overheads(data / "overheads.json"));
  auto j = to_json(e);
  for (const char* key :
       {"weights", "master_weights", "gradients", "optimizer_states", "grad_buckets",
        "model_states", "activations", "buffers", "overhead", "total"}) {
    INFO(key);
    CHECK(j["per_gpu"][key].is_number_integer());
    CHECK(j["per_cpu"][key].is_number_integer());
  }
  CHECK(j["params"] == 2'000'000'000);
  CHECK(j["strategy"] == "zero2");
  CHECK(j["fits"].is_null());
  // Host: master 4 B + Adam 8 B + fp32 gradients 4 B on 2e9 / 4 params each.
  CHECK(j["per_cpu"]["total"] == 16LL * 500'000'000);
  CHECK(j["cpu_per_node"] == 4 * 16LL * 500'000'000);
  std::int64_t buffers = 0;
  for (const auto& b : j["details"]["buffers"])
    buffers += b["bytes"].get<std::int64_t>();
  CHECK(buffers == j["per_gpu"]["buffers"]);

  const auto gpus = GpuCatalog::load(data / "gpus.json");
  auto fitted = e;
  fitted.fit = check_fit(e, gpus.find("T4"));
  j = to_json(fitted);
  CHECK(j["gpu"] == "T4");
  CHECK(j["capacity"] == 15360LL * 1048576);
  CHECK(j["margin"] == 15360LL * 1048576 - e.gpu.total().value);
}
