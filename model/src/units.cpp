// Checked byte arithmetic and human formatting of byte counts.
#include "dtplan/model/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "dtplan/model/error.hpp"

namespace dtplan {

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) {
    throw Error(std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                " overflows a 64-bit count");
  }
  return result;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) {
    throw Error(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                " overflows a 64-bit count");
  }
  return result;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

Bytes operator+(Bytes a, Bytes b) {
  return Bytes{checked_add(a.value, b.value, "byte total")};
}

Bytes operator-(Bytes a, Bytes b) {
  std::int64_t result = 0;
  if (__builtin_sub_overflow(a.value, b.value, &result)) {
    throw Error("byte difference overflows a 64-bit count");
  }
  return Bytes{result};
}

Bytes& operator+=(Bytes& a, Bytes b) {
  return a = a + b;
}

Bytes bytes_of(std::int64_t elements, std::int64_t bytes_per_element, std::string_view what) {
  return Bytes{checked_mul(elements, bytes_per_element, what)};
}

Bytes fraction_of(Bytes b, double fraction) {
  const double scaled = std::ceil(static_cast<double>(b.value) * fraction);
  if (scaled >= static_cast<double>(std::numeric_limits<std::int64_t>::max())) {
    throw Error("byte fraction overflows a 64-bit count");
  }
  return Bytes{static_cast<std::int64_t>(scaled)};
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
