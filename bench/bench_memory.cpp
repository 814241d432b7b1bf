// Benchmarks of the memory model: the planner will call estimate_memory once per candidate
// configuration, so one estimate must cost microseconds, not milliseconds.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <utility>
#include <vector>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/parallel3d.hpp"

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

// A layout search prices each layout's heaviest pipeline stage (memory_3d without explanations):
// Llama 2 70B on 1,024 GPUs, 4,096 tokens, global batch 1,024, over tp x pp x micro-batch x
// recompute x framework x offload -- the loop search_3d runs 10^5 times in a plan.
std::vector<dtplan::cost::Layout3D> llama70b_layouts() {
  using dtplan::cost::DpSharding;
  using dtplan::cost::Framework;
  std::vector<dtplan::cost::Layout3D> out;
  const std::pair<Framework, DpSharding> modes[] = {{Framework::megatron, DpSharding::optimizer},
                                                    {Framework::fsdp2, DpSharding::parameters},
                                                    {Framework::fsdp2, DpSharding::gradients}};
  for (std::int64_t tp : {1, 2, 4, 8}) {
    for (std::int64_t pp : {1, 2, 4, 8, 16}) {
      const std::int64_t dp = 1024 / (tp * pp);
      for (std::int64_t b : {1, 2, 4}) {
        for (auto rc : {dtplan::Checkpointing::none, dtplan::Checkpointing::selective,
                        dtplan::Checkpointing::full}) {
          for (const auto& [framework, sharding] : modes) {
            for (bool offload : {false, true}) {
              dtplan::cost::Layout3D l;
              l.tp = tp;
              l.pp = pp;
              l.dp = dp;
              l.sequence_parallel = tp > 1;
              l.micro_batch = b;
              l.micro_batches = 1024 / dp / b;
              l.seq_len = 4096;
              l.recompute = rc;
              l.framework = framework;
              l.sharding = sharding;
              l.offload = !offload ? dtplan::Offload::none
                          : framework == Framework::megatron
                              ? dtplan::Offload::optimizer
                              : dtplan::Offload::optimizer_and_params;
              if (l.micro_batches >= 1) out.push_back(l);
            }
          }
        }
      }
    }
  }
  return out;
}

void BM_Memory3DLayouts(benchmark::State& state) {
  const auto model = dtplan::load_model("llama-2-70b", kData / "models");
  const auto overheads = dtplan::cost::load_overheads(kData / "overheads.json");
  const auto layouts = llama70b_layouts();
  for (auto _ : state) {
    for (const auto& l : layouts)
      benchmark::DoNotOptimize(dtplan::cost::memory_3d(model, l, overheads, false));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(layouts.size()));
}
BENCHMARK(BM_Memory3DLayouts);

// The same with a search's StageMemoryCache, new each iteration as each search makes one.
void BM_Memory3DLayoutsCached(benchmark::State& state) {
  const auto model = dtplan::load_model("llama-2-70b", kData / "models");
  const auto overheads = dtplan::cost::load_overheads(kData / "overheads.json");
  const auto layouts = llama70b_layouts();
  for (auto _ : state) {
    dtplan::cost::StageMemoryCache cache;
    for (const auto& l : layouts)
      benchmark::DoNotOptimize(dtplan::cost::memory_3d(model, l, overheads, cache));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(layouts.size()));
}
BENCHMARK(BM_Memory3DLayoutsCached);

}  // namespace

BENCHMARK_MAIN();
