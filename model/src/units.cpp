// Checked byte arithmetic and human formatting of byte counts.
#include "dtplan/model/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "dtplan/model/error.hpp"

namespace dtplan {

namespace detail {

void throw_mul_overflow(std::int64_t a, std::int64_t b, std::string_view what) {
  throw Error(std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
              " overflows a 64-bit count");
}

void throw_add_overflow(std::int64_t a, std::int64_t b, std::string_view what) {
  throw Error(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
              " overflows a 64-bit count");
}

void throw_overflow(std::string_view what) {
  throw Error(std::string(what) + " overflows a 64-bit count");
}

}  // namespace detail

NumericAssignment parse_assignment(std::string_view text, const std::string& where) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) throw Error(where + ": expected KEY=VALUE");
  const auto value_text = text.substr(eq + 1);
  const auto value = parse_number(value_text);
  if (!value) throw Error(where + ": '" + std::string(value_text) + "' is not a number");
  return {text.substr(0, eq), *value};
}

std::optional<double> parse_number(std::string_view text) {
  const std::string body(text);
  if (body.empty() || std::isspace(static_cast<unsigned char>(body.front()))) return std::nullopt;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(body, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != body.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

Bytes parse_size(std::string_view text, std::string_view what) {
  static const std::pair<std::string_view, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"kB", 1e3},     {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12},    {"B", 1.0},
  };
  const std::string original(text);
  auto fail = [&](const std::string& why) -> Bytes {
    throw Error(std::string(what) + " '" + original + "': " + why +
                " (examples: 4096, 32KiB, 1GiB, 1.5GB)");
  };
  std::string_view number = text;
  double scale = 1.0;
  for (const auto& [suffix, factor] : kUnits) {
    if (text.size() > suffix.size() && text.substr(text.size() - suffix.size()) == suffix) {
      number = text.substr(0, text.size() - suffix.size());
      scale = factor;
      break;
    }
  }
  const auto value = parse_number(number);
  if (!value) return fail("not a size");
  const double bytes = *value * scale;
  if (bytes < 1.0) return fail("must be at least 1 byte");
  if (bytes >= 9.2e18) return fail("beyond a 64-bit byte count");
  if (std::fabs(bytes - std::round(bytes)) > 1e-6 * bytes)
    return fail("not a whole number of bytes");
  return Bytes{static_cast<std::int64_t>(std::llround(bytes))};
}

std::string format_size(Bytes b) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b.value);
  int unit = 0;
  while (std::fabs(v) >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[48];
  if (v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f%s", v, kNames[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f%s", v, kNames[unit]);
  }
  return buf;
}

double to_gib(Bytes b) {
  return static_cast<double>(b.value) / kBytesPerGiB;
}
double to_gb(Bytes b) {
  return static_cast<double>(b.value) / kBytesPerGB;
}

namespace {
std::string two_decimals(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, unit);
  return buf;
}
}  // namespace

std::string format_gib(Bytes b) {
  return two_decimals(to_gib(b), "GiB");
}
std::string format_gb(Bytes b) {
  return two_decimals(to_gb(b), "GB");
}

std::string format_thousands(std::int64_t n) {
  const std::uint64_t magnitude =
      n < 0 ? ~static_cast<std::uint64_t>(n) + 1 : static_cast<std::uint64_t>(n);
  std::string digits = std::to_string(magnitude);
  std::string out;
  const int len = static_cast<int>(digits.size());
  for (int i = 0; i < len; ++i) {
    if (i > 0 && (len - i) % 3 == 0) out += ',';
    out += digits[static_cast<size_t>(i)];
  }
  if (n < 0) out.insert(out.begin(), '-');
  return out;
}

}  // namespace dtplan
