// Host facts for measurement files, read from /proc.
#include "dtplan/runtime/host_info.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <sstream>

namespace dtplan::runtime {
namespace {

// The value after "key:" in a /proc file, or "" when absent.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0 && line.size() > key.size() &&
        (line[key.size()] == ':' || line[key.size()] == '\t' || line[key.size()] == ' ')) {
      auto colon = line.find(':');
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

std::int64_t kib_field(const char* file, const std::string& key) {
  std::istringstream s(proc_field(file, key));
  std::int64_t kib = 0;
  s >> kib;
  return kib * 1024;
}

}  // namespace

double load_average_1min() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  if (!(in >> load) || !(load >= 0)) return 0;
  return load;
}

double process_cpu_seconds() {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string cpu_model_name() {
  auto name = proc_field("/proc/cpuinfo", "model name");
  return name.empty() ? "unknown CPU" : name;
}

int cpu_cores() {
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}
std::int64_t host_memory_bytes() {
  return kib_field("/proc/meminfo", "MemTotal");
}
std::int64_t host_available_bytes() {
  return kib_field("/proc/meminfo", "MemAvailable");
}
std::int64_t peak_rss_bytes() {
  return kib_field("/proc/self/status", "VmHWM");
}

std::string utc_timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace dtplan::runtime
