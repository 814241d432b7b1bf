// Ring search and collective evaluation time as the cluster grows: 8, 64, 1024 and 8192
// H100 GPUs (1 to 1024 DGX H100 nodes). Each iteration builds the model afresh, so the ring
// search is timed with the first estimate; a second benchmark times estimates alone. GB200
// NVL72 racks time the search over a 72-GPU NVLink domain.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/model/topology_io.hpp"

namespace {

const std::filesystem::path kData = DTPLAN_DATA_DIR;

struct Cluster {
  dtplan::InterconnectTable table = dtplan::InterconnectTable::load(kData / "interconnect.json");
  dtplan::Topology topology;
  explicit Cluster(std::int64_t nodes, const std::string& node = "dgx-h100")
      : topology(dtplan::Topology::build(dtplan::load_node_template(node, kData / "topologies"),
                                         nodes, table)) {}
};

void BM_RingSearchAndFirstAllReduce(benchmark::State& state) {
  const Cluster c(state.range(0) / 8);
  for (auto _ : state) {
    dtplan::cost::CommModel model(c.topology, c.table, state.range(0));
    benchmark::DoNotOptimize(
        model.estimate(dtplan::cost::Collective::all_reduce, dtplan::Bytes{1LL << 30}));
  }
  state.counters["gpus"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_RingSearchAndFirstAllReduce)
    ->Arg(8)
    ->Arg(64)
    ->Arg(1024)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond);

// GB200 NVL72 racks: one 72-GPU NVLink domain per rack, where the ring search orders 72 GPUs
// greedily from each start (the exhaustive search stops at 8). 1 rack and 20 racks (1,440 GPUs,
// as CoreWeave's published nccl-tests sweep).
void BM_RingSearchNvl72(benchmark::State& state) {
  const Cluster c(state.range(0), "gb200-nvl72");
  const auto gpus = c.topology.gpu_count();
  for (auto _ : state) {
    dtplan::cost::CommModel model(c.topology, c.table, gpus);
    benchmark::DoNotOptimize(
        model.estimate(dtplan::cost::Collective::all_reduce, dtplan::Bytes{1LL << 29}));
  }
  state.counters["gpus"] = static_cast<double>(gpus);
}
BENCHMARK(BM_RingSearchNvl72)->Arg(1)->Arg(20)->Unit(benchmark::kMillisecond);

void BM_AllReduceEstimate(benchmark::State& state) {
  const Cluster c(state.range(0) / 8);
  dtplan::cost::CommModel model(c.topology, c.table, state.range(0));
  model.estimate(dtplan::cost::Collective::all_reduce, dtplan::Bytes{1LL << 30});
  std::int64_t size = 1;
  for (auto _ : state) {
    size = size * 2 % (1LL << 34) + 1;
    benchmark::DoNotOptimize(
        model.estimate(dtplan::cost::Collective::all_reduce, dtplan::Bytes{size}));
  }
}
BENCHMARK(BM_AllReduceEstimate)->Arg(8)->Arg(64)->Arg(1024)->Arg(8192);

void BM_BuildTopology(benchmark::State& state) {
  for (auto _ : state) {
    const Cluster c(state.range(0) / 8);
    benchmark::DoNotOptimize(c.topology.gpu_count());
  }
}
BENCHMARK(BM_BuildTopology)->Arg(8)->Arg(8192)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
