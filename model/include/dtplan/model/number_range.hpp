// The sane range of a number read from a file or a flag. Every numeric input is checked
// against one: finite, above (or at least) a minimum, at most a stated maximum, so that a
// negative time, a zero scale or 1e308 is an error naming the field, not "inf ms" in a report.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dtplan {

struct NumberRange {
  double min = 0;
  double max = 0;
  bool min_exclusive = false;  // true: the value must be above `min`, not equal to it

  // (0, max]: times, rates, scales, sizes.
  static constexpr NumberRange positive(double max) { return {0, max, true}; }
  // [0, max]: counts and fractions that may be zero.
  static constexpr NumberRange non_negative(double max) { return {0, max, false}; }
};

// Why `value` lies outside `range` ("must be positive, got -1"), or nullopt when inside.
// Sane bounds shared by the inputs (a value beyond them is a typing or unit mistake).
inline constexpr double kMaxSeconds = 1e7;  // about four months: one step, one run, one call
inline constexpr NumberRange kSeconds = NumberRange::non_negative(kMaxSeconds);
inline constexpr NumberRange kPositiveSeconds = NumberRange::positive(kMaxSeconds);
// A multiplier applied to a model or a measured time (calibration corrections, --scale).
inline constexpr NumberRange kFactor = NumberRange::positive(1e3);
// Seconds per unit (byte, element, parameter, flop) of a fitted rate.
inline constexpr NumberRange kSecondsPerUnit = NumberRange::positive(1.0);
inline constexpr NumberRange kFraction = NumberRange::positive(1.0);
inline constexpr NumberRange kLearningRate = NumberRange::positive(10.0);
// A dropout probability: 0 (none) up to 0.99 (p = 1 would drop every element).
inline constexpr NumberRange kDropoutProbability = NumberRange::non_negative(0.99);

std::optional<std::string> range_problem(double value, const NumberRange& range);

// A CLI11-style check of a flag's text ("" when it is a number inside `range`, else the
// problem); front ends attach it with option->check(number_check(range)).
std::function<std::string(const std::string&)> number_check(NumberRange range);

}  // namespace dtplan
