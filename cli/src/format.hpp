// Number formatting shared by the text reports.
#pragma once

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::cli {

// Thrown by the formatters below for inf or NaN: an internal error, never printed as a number.
class NonFiniteInReport : public std::logic_error {
 public:
  explicit NonFiniteInReport(double v);
};

std::string fixed(double v, int decimals);
// `digits` significant digits, as printf's %g: 0.000125, 2.5e+08.
std::string significant(double v, int digits);
// 1.234 s, 12.34 ms, 56.7 us
std::string seconds(double s);
// GiB with two decimals, no unit.
std::string gib(Bytes b);
// An amount in GiB, in MiB below 0.01 GiB (a near miss is never "0.00 GiB").
std::string gib_or_mib(double gib);
// 45.1%
std::string percent(double fraction);
// +4.5%, -0.3% (relative errors)
std::string signed_percent(double fraction);
// The flag that sets a library request field: "global_batch" is --global-batch; the fields
// whose flag reads differently (top_k is --top) are listed in format.cpp.
std::string flag_of(const std::string& field);
// A library text with {field} markers (suggestions, notes) with the fields as flags.
std::string with_flags(const std::string& text);
// The words of a field's flag, without dashes: "gpus per node" for gpus_per_node.
std::string setting_of(const std::string& field);
// The same text with the fields as plain setting names ("offload optimizer", "gpus per node"):
// for the combinations the planner tried by itself, whose settings the user never typed.
std::string with_setting_names(const std::string& text);
// A duration for people: 3.2 h, 5.1 days
std::string duration(double s);
// "flash attention", with the kernel where one is named: "flash attention (cudnn kernel)".
std::string attention_text(const ModelDesc& m, const TrainingConfig& c);

// When `total` fits `capacity` but not what dtplan plan keeps usable by default (its 10%
// headroom): a clause saying so, else empty. estimate and memory judge against the whole GPU.
std::string headroom_clause(Bytes total, Bytes capacity);
// Whether `total` is within the plan's default usable memory of `capacity`.
bool within_plan_headroom(Bytes total, Bytes capacity);

// A report line made of parts, each after its separator (", ", "; ", ...; the first part's is
// usually empty). It wraps between parts at `max_chars`: a separator ending a line loses its
// trailing space, and continuation lines start under `indent` plus four spaces. A part is never
// split, so "tensor-parallel all-reduces 45.26 ms" stays on one line.
struct LinePart {
  std::string separator;
  std::string text;
};
inline constexpr std::size_t kReportLineChars = 100;
void print_wrapped(std::ostream& out, const std::string& indent, const std::vector<LinePart>& parts,
                   std::size_t max_chars = kReportLineChars);

}  // namespace dtplan::cli
