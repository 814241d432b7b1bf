// Range checks shared by the JSON reader and the command-line front ends.
#include "dtplan/model/number_range.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dtplan {

namespace {

std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  // 1e+06 -> 1e6, 1e-07 -> 1e-7: as people write them in files and flags.
  std::string s = buf;
  for (const char* from : {"e+0", "e+", "e-0"}) {
    if (const auto at = s.find(from); at != std::string::npos) {
      s.replace(at, std::strlen(from), from[1] == '-' ? "e-" : "e");
      break;
    }
  }
  return s;
}

std::string lower_bound(const NumberRange& r) {
  if (r.min == 0) return r.min_exclusive ? "positive" : "zero or more";
  return (r.min_exclusive ? "above " : "at least ") + shown(r.min);
}

}  // namespace

std::optional<std::string> range_problem(double value, const NumberRange& range) {
  if (std::isnan(value)) return "must be a number, got NaN";
  if (std::isinf(value)) return "must be finite, got " + std::string(value > 0 ? "inf" : "-inf");
  const bool low = range.min_exclusive ? !(value > range.min) : value < range.min;
  if (low) return "must be " + lower_bound(range) + ", got " + shown(value);
  if (value > range.max) {
    return "must be at most " + shown(range.max) + " (a sane maximum), got " + shown(value);
  }
  return std::nullopt;
}

std::function<std::string(const std::string&)> number_check(NumberRange range) {
  return [range](const std::string& text) -> std::string {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) return "expected a number, got " + text;
    return range_problem(v, range).value_or("");
  };
}

}  // namespace dtplan
