// Chooses among the builds of the CPU kernels (cpu_kernels.hpp) this binary holds. Which
// builds exist is decided by CMake (DTPLAN_CPU_KERNELS_AVX2 / _AVX512); this file itself is
// compiled for the baseline instruction set and checks the host before using a wider build.
#include "dtplan/runtime/cpu_kernels.hpp"

#include <Eigen/Core>
#include <cstdlib>
#include <string_view>

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {

#if DTPLAN_CPU_KERNELS_AVX512
extern const CpuKernels kCpuKernels_avx512;
#endif
#if DTPLAN_CPU_KERNELS_AVX2
extern const CpuKernels kCpuKernels_avx2;
#endif
extern const CpuKernels kCpuKernels_baseline;

namespace {

// The features each build was compiled with (-m flags in runtime/exec/CMakeLists.txt), each
// of which both GCC and Clang can test. AVX2 and AVX-512 imply the SSE levels and AVX.
[[maybe_unused]] bool host_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
#else
  return false;
#endif
}

[[maybe_unused]] bool host_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return host_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
#else
  return false;
#endif
}

std::vector<const CpuKernels*> built() {
  std::vector<const CpuKernels*> out;
#if DTPLAN_CPU_KERNELS_AVX512
  out.push_back(&kCpuKernels_avx512);
#endif
#if DTPLAN_CPU_KERNELS_AVX2
  out.push_back(&kCpuKernels_avx2);
#endif
  out.push_back(&kCpuKernels_baseline);
  return out;
}

bool runnable(const CpuKernels& k) {
  const std::string_view name = k.name;
  if (name == "avx512") return host_has_avx512();
  if (name == "avx2") return host_has_avx2();
  return true;
}

std::string names(const std::vector<const CpuKernels*>& ks) {
  std::string out;
  for (const auto* k : ks)
    out += (out.empty() ? "" : ", ") + std::string(k->name);
  return out;
}

}  // namespace

std::vector<const CpuKernels*> cpu_kernels_runnable() {
  std::vector<const CpuKernels*> out;
  for (const auto* k : built()) {
    if (runnable(*k)) out.push_back(k);
  }
  return out;
}

const CpuKernels& choose_cpu_kernels(const char* requested) {
  const auto ok = cpu_kernels_runnable();
  if (requested == nullptr || *requested == '\0') return *ok.front();
  for (const auto* k : built()) {
    if (std::string_view(k->name) != requested) continue;
    if (runnable(*k)) return *k;
    throw Error("DTPLAN_CPU_KERNELS=" + std::string(requested) + ": this CPU lacks " + k->features +
                "; it runs " + names(ok));
  }
  throw Error("DTPLAN_CPU_KERNELS=" + std::string(requested) + ": not a kernel build of this " +
              "binary; it holds " + names(built()) + ", of which this CPU runs " + names(ok));
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels& chosen = choose_cpu_kernels(std::getenv("DTPLAN_CPU_KERNELS"));
  return chosen;
}

std::string eigen_version() {
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
}

}  // namespace dtplan::runtime
