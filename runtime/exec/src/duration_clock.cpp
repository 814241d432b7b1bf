// See duration_clock.hpp.
#include "dtplan/runtime/duration_clock.hpp"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define DTPLAN_HAVE_TSC 1
#else
#define DTPLAN_HAVE_TSC 0
#endif

namespace dtplan::runtime {

namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

bool invariant_tsc() {
#if DTPLAN_HAVE_TSC
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000U, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007U) return false;
  if (__get_cpuid(0x80000007U, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1U << 8)) != 0;
#else
  return false;
#endif
}

std::uint64_t read_tsc() {
#if DTPLAN_HAVE_TSC
  return __rdtsc();
#else
  return 0;
#endif
}

}  // namespace

const DurationClock& DurationClock::instance() {
  static const DurationClock clock;
  return clock;
}

DurationClock::DurationClock() {
  if (!invariant_tsc()) return;
  // The counter's rate against steady_clock over at least 2 ms: the reads' own 25 ns put the
  // rate within 2e-5.
  const std::uint64_t ns0 = steady_ns(), t0 = read_tsc();
  std::uint64_t ns1 = ns0, t1 = t0;
  while (ns1 - ns0 < 2'000'000) {
    ns1 = steady_ns();
    t1 = read_tsc();
  }
  if (t1 <= t0) return;  // a counter that did not advance: keep steady_clock
  tsc_ = true;
  seconds_per_tick_ = 1e-9 * static_cast<double>(ns1 - ns0) / static_cast<double>(t1 - t0);
}

std::uint64_t DurationClock::ticks() const {
  return tsc_ ? read_tsc() : steady_ns();
}

}  // namespace dtplan::runtime
