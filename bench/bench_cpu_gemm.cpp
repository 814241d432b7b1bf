// The CPU runtime's GEMMs against the best Eigen build on this machine (issue 18: >= 70% of its
// rate). Each build of the runtime's kernels the host runs (cpu_kernels.hpp), and Eigen built
// with -march=native (bench_gemm_native.cpp), time C = A B on square fp32 matrices, one thread.
//   build/bin/bench_cpu_gemm --benchmark_repetitions=3 --benchmark_report_aggregates_only
// The GFLOP/s counter is 2 n^3 per call.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "dtplan/runtime/cpu_kernels.hpp"

namespace dtplan::bench {
void native_gemm(std::int64_t n, const float* a, const float* b, float* c);
}

namespace {

struct Operands {
  std::vector<float> a, b, c;
  explicit Operands(std::int64_t n)
      : a(static_cast<std::size_t>(n * n), 0.5f),
        b(static_cast<std::size_t>(n * n), 0.25f),
        c(static_cast<std::size_t>(n * n)) {}
};

void set_rate(benchmark::State& state, std::int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(n * n * n) * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

void runtime_gemm(benchmark::State& state, const dtplan::runtime::CpuKernels* k) {
  const std::int64_t n = state.range(0);
  Operands o(n);
  for (auto _ : state) {
    k->gemm(false, false, n, n, n, 1.0f, o.a.data(), o.b.data(), 0.0f, o.c.data());
    benchmark::DoNotOptimize(o.c.data());
  }
  set_rate(state, n);
}

void BM_EigenNative(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Operands o(n);
  for (auto _ : state) {
    dtplan::bench::native_gemm(n, o.a.data(), o.b.data(), o.c.data());
    benchmark::DoNotOptimize(o.c.data());
  }
  set_rate(state, n);
}
BENCHMARK(BM_EigenNative)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) try {
  // The build the runtime chooses first, then every other build this host runs.
  const auto& chosen = dtplan::runtime::cpu_kernels();
  for (const auto* k : dtplan::runtime::cpu_kernels_runnable()) {
    const std::string name =
        std::string("BM_RuntimeGemm/") + k->name + (k == &chosen ? "(chosen)" : "");
    benchmark::RegisterBenchmark(name.c_str(), runtime_gemm, k)
        ->Arg(256)
        ->Arg(512)
        ->Arg(1024)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
} catch (const std::exception& e) {  // e.g. DTPLAN_CPU_KERNELS naming a build that cannot run
  std::fprintf(stderr, "bench_cpu_gemm: %s\n", e.what());
  return 1;
}
