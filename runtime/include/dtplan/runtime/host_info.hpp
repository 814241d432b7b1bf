// What the measurement records about the machine it ran on (Linux /proc).
#pragma once

#include <cstdint>
#include <string>

namespace dtplan::runtime {

std::string cpu_model_name();         // /proc/cpuinfo "model name", or "unknown CPU"
int cpu_cores();                      // online logical CPUs
std::int64_t host_memory_bytes();     // MemTotal
std::int64_t host_available_bytes();  // MemAvailable
std::int64_t peak_rss_bytes();        // VmHWM of this process
double load_average_1min();  // /proc/loadavg, first field (runnable threads); 0 if unreadable
double
process_cpu_seconds();  // CPU time of this process, all its threads (CLOCK_PROCESS_CPUTIME_ID)
std::string utc_timestamp();  // "2026-11-23T01:02:03Z"

}  // namespace dtplan::runtime
