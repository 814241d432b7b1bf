// The CPU runtime's element-wise kernels that 16-bit compute and dropout add (cpu_kernels.hpp),
// in every build the host runs: rounding to bf16 and fp16, the dropout product, and dropout mask
// draws (one splitmix64 hash an element). Counter: elements per second, one thread.
//   build/bin/bench_cpu_elementwise --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "dtplan/runtime/cpu_kernels.hpp"

namespace {

using dtplan::runtime::CpuKernels;

void set_rate(benchmark::State& state, std::int64_t n) {
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// Values spread over many binades, so that rounding is not a no-op on them.
std::vector<float> values(std::int64_t n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = 1.0f + static_cast<float>(i % 1000) * 0.001234567f;
  return x;
}

// One of the rounding kernels (rounding is idempotent, so every call does the same work).
template <void (*CpuKernels::*Round)(float*, std::int64_t)>
void round_to(benchmark::State& state, const CpuKernels* k) {
  const std::int64_t n = state.range(0);
  auto x = values(n);
  for (auto _ : state) {
    (k->*Round)(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  set_rate(state, n);
}

void drop(benchmark::State& state, const CpuKernels* k) {
  const std::int64_t n = state.range(0);
  auto x = values(n);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < mask.size(); ++i)
    mask[i] = i % 10 != 0;
  for (auto _ : state) {
    k->drop(x.data(), mask.data(), n, 1.0f);  // factor 1: the values stay finite
    benchmark::DoNotOptimize(x.data());
  }
  set_rate(state, n);
}

void dropout_draw(benchmark::State& state, const CpuKernels* k) {
  const std::int64_t n = state.range(0);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
  std::uint64_t stream = 12345;
  for (auto _ : state) {
    k->dropout_draw(mask.data(), stream++, 0, n, 1677722);  // p = 0.1
    benchmark::DoNotOptimize(mask.data());
  }
  set_rate(state, n);
}

}  // namespace

int main(int argc, char** argv) try {
  const auto& chosen = dtplan::runtime::cpu_kernels();
  using Fn = void (*)(benchmark::State&, const CpuKernels*);
  const std::vector<std::pair<const char*, Fn>> kernels{
      {"BM_RoundBf16", round_to<&CpuKernels::round_bf16>},
      {"BM_RoundFp16", round_to<&CpuKernels::round_fp16>},
      {"BM_Drop", drop},
      {"BM_DropoutDraw", dropout_draw}};
  for (const auto& [label, fn] : kernels) {
    for (const auto* k : dtplan::runtime::cpu_kernels_runnable()) {
      const std::string name =
          std::string(label) + "/" + k->name + (k == &chosen ? "(chosen)" : "");
      benchmark::RegisterBenchmark(name.c_str(), fn, k)->Arg(1 << 16)->Arg(1 << 20);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cpu_elementwise: %s\n", e.what());
  return 1;
}
