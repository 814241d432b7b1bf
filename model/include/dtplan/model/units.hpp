// Units used across dtplan. Byte counts are a strong type whose arithmetic is checked for
// 64-bit overflow; element counts (parameters, activations) are plain int64 named *_elements
// or params. Conversions to GB (1e9) and GiB (2^30) happen only when printing.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dtplan {

// A signed byte count: margins (capacity minus need) may be negative.
struct Bytes {
  std::int64_t value = 0;
  constexpr auto operator<=>(const Bytes&) const = default;
};

inline constexpr double kBytesPerGiB = 1073741824.0;  // 2^30
inline constexpr double kBytesPerGB = 1e9;
inline constexpr double kBytesPerMiB = 1048576.0;  // 2^20

// Overflow errors of the checked arithmetic below, kept out of line so that the arithmetic
// itself inlines (a search does it 10^7 times a plan).
namespace detail {
[[noreturn]] void throw_mul_overflow(std::int64_t a, std::int64_t b, std::string_view what);
[[noreturn]] void throw_add_overflow(std::int64_t a, std::int64_t b, std::string_view what);
[[noreturn]] void throw_overflow(std::string_view what);
}  // namespace detail

// Checked 64-bit arithmetic; `what` names the quantity in the overflow error.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) [[unlikely]]
    detail::throw_mul_overflow(a, b, what);
  return result;
}
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) [[unlikely]]
    detail::throw_add_overflow(a, b, what);
  return result;
}
// Ceiling of a / b for a >= 0, b > 0.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

inline Bytes operator+(Bytes a, Bytes b) {
  return Bytes{checked_add(a.value, b.value, "byte total")};
}
inline Bytes operator-(Bytes a, Bytes b) {
  std::int64_t result = 0;
  if (__builtin_sub_overflow(a.value, b.value, &result)) [[unlikely]]
    detail::throw_overflow("byte difference");
  return Bytes{result};
}
inline Bytes& operator+=(Bytes& a, Bytes b) {
  return a = a + b;
}

// elements x bytes_per_element, checked; `what` names the quantity in the overflow error.
inline Bytes bytes_of(std::int64_t elements, std::int64_t bytes_per_element,
                      std::string_view what) {
  return Bytes{checked_mul(elements, bytes_per_element, what)};
}
// A fraction of a byte count, rounded up (used for allocator slack).
inline Bytes fraction_of(Bytes b, double fraction) {
  const double scaled = std::ceil(static_cast<double>(b.value) * fraction);
  // 2^63: the first double beyond a 64-bit count.
  if (scaled >= 9223372036854775808.0) [[unlikely]]
    detail::throw_overflow("byte fraction");
  return Bytes{static_cast<std::int64_t>(scaled)};
}

// The whole of `text` as a finite number ("1e9", "0.05"); nullopt otherwise.
std::optional<double> parse_number(std::string_view text);

// "key=value" with a numeric value, as command-line overrides give constants; throws naming
// `where` when the '=' or the number is missing.
struct NumericAssignment {
  std::string_view key;
  double value = 0;
};
NumericAssignment parse_assignment(std::string_view text, const std::string& where);

// "1GiB", "32KiB", "1.5GB", "512MB", "4096", "1e9" (bytes; KiB/MiB/GiB/TiB are powers of 2,
// kB/KB/MB/GB/TB powers of 10, a bare B allowed). `what` names the input in errors.
Bytes parse_size(std::string_view text, std::string_view what);
// Shortest exact-ish label for a size in binary units: 32768 -> "32KiB", 1e9 -> "953.67MiB".
std::string format_size(Bytes b);

double to_gib(Bytes b);
double to_gb(Bytes b);

// "12.55 GiB" / "13.48 GB" with two decimals; "-1.20 GiB" for negative values.
std::string format_gib(Bytes b);
std::string format_gb(Bytes b);
// 6738415616 -> "6,738,415,616"
std::string format_thousands(std::int64_t n);

}  // namespace dtplan
