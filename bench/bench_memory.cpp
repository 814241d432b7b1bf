// Benchmarks of the memory model: the planner will call estimate_memory once per candidate
// configuration, so one estimate must cost microseconds, not milliseconds.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "dtplan/cost/memory.hpp"

namespace {

const std::filesystem::path kData = DTPLAN_DATA_DIR;

void BM_EstimateAllStrategies(benchmark::State& state) {
  const auto model = dtplan::load_model("llama-2-70b", kData / "models");
  const auto overheads = dtplan::cost::load_overheads(kData / "overheads.json");
  dtplan::TrainingConfig c;
  c.dp_size = 8;  // one node: every strategy, DataParallel included, applies
  c.gpus_per_node = 8;
  c.seq_len = 4096;
  for (auto _ : state) {
    for (const auto& row : dtplan::kStrategies) {
      c.strategy = row.value;
      benchmark::DoNotOptimize(dtplan::cost::estimate_memory(model, c, overheads));
    }
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<std::int64_t>(dtplan::kStrategies.size()));
}
BENCHMARK(BM_EstimateAllStrategies);

void BM_LoadPreset(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(dtplan::load_model("llama-2-70b", kData / "models"));
  }
}
BENCHMARK(BM_LoadPreset);

}  // namespace

BENCHMARK_MAIN();
