// The clock the CPU backend times each collective with. A record is the call's duration, and
// at 1 KiB Open MPI's blocking collectives take 0.35-0.45 us on two ranks here, so the two
// reads around the call matter: std::chrono::steady_clock costs 25 ns a read on this host,
// the time-stamp counter 9 ns (docs/performance.md). Where the CPU has an invariant
// time-stamp counter (CPUID 0x80000007, EDX bit 8: constant rate in every power state) the
// clock reads it and converts with a rate measured once per process against steady_clock;
// elsewhere it reads steady_clock.
#pragma once

#include <cstdint>

namespace dtplan::runtime {

class DurationClock {
 public:
  // The process's clock: the rate is measured on first use (about 2 ms).
  static const DurationClock& instance();
  std::uint64_t ticks() const;
  double seconds(std::uint64_t from, std::uint64_t to) const {
    return static_cast<double>(to - from) * seconds_per_tick_;
  }
  bool uses_tsc() const { return tsc_; }
  double seconds_per_tick() const { return seconds_per_tick_; }

 private:
  DurationClock();
  bool tsc_ = false;
  double seconds_per_tick_ = 1e-9;
};

}  // namespace dtplan::runtime
