// Number formatting shared by the text reports.
#include "format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/planner.hpp"

namespace dtplan::cli {

NonFiniteInReport::NonFiniteInReport(double v)
    : std::logic_error(std::string("a report came to hold ") + (std::isnan(v) ? "NaN" : "inf") +
                       " where a number belongs (a dtplan bug: please report the command)") {}

std::string fixed(double v, int decimals) {
  // Inputs are range-checked where they are read, so a non-finite number here is a bug in a
  // formula: refuse to print it rather than show "inf ms" and exit 0.
  if (!std::isfinite(v)) throw NonFiniteInReport(v);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string significant(double v, int digits) {
  if (!std::isfinite(v)) throw NonFiniteInReport(v);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string seconds(double s) {
  if (s >= 1.0) return fixed(s, 3) + " s";
  if (s >= 1e-3) return fixed(s * 1e3, 2) + " ms";
  return fixed(s * 1e6, 1) + " us";
}

std::string gib(Bytes b) {
  return fixed(to_gib(b), 2);
}

std::string gib_or_mib(double gib) {
  if (std::fabs(gib) >= 0.01) return fixed(gib, 2) + " GiB";
  return fixed(gib * 1024.0, 1) + " MiB";
}

std::string percent(double fraction) {
  return fixed(100.0 * fraction, 1) + "%";
}

std::string signed_percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + percent(fraction);
}

std::string duration(double s) {
  if (s < 120.0) return fixed(s, 1) + " s";
  if (s < 7200.0) return fixed(s / 60.0, 1) + " min";
  if (s < 172800.0) return fixed(s / 3600.0, 1) + " h";
  return fixed(s / 86400.0, 1) + " days";
}

std::string flag_of(const std::string& field) {
  static const std::map<std::string, std::string> kDifferent{
      {"top_k", "--top"},
      {"max_gpus", "--gpus"},
      {"max_run_s", "--max-hours"},
      {"time_budget_s", "--time-budget"},
      {"micro_batches", "--micro-batch"},
      {"strategies", "--strategy"},
      {"sequence_parallel", "--sp"},
  };
  if (const auto it = kDifferent.find(field); it != kDifferent.end()) return it->second;
  std::string flag = "--" + field;
  for (auto& ch : flag) {
    if (ch == '_') ch = '-';
  }
  return flag;
}

std::string with_flags(const std::string& text) {
  return render_fields(text, flag_of);
}

std::string setting_of(const std::string& field) {
  std::string name = flag_of(field).substr(2);  // the flag's words, as the help lists them
  std::replace(name.begin(), name.end(), '-', ' ');
  return name;
}

std::string with_setting_names(const std::string& text) {
  return render_fields(text, setting_of);
}

bool within_plan_headroom(Bytes total, Bytes capacity) {
  const double usable =
      static_cast<double>(capacity.value) * (1.0 - planner::PlanRequest{}.headroom);
  return static_cast<double>(total.value) <= usable;
}

std::string headroom_clause(Bytes total, Bytes capacity) {
  if (total.value > capacity.value || within_plan_headroom(total, capacity)) return "";
  const double headroom = planner::PlanRequest{}.headroom;
  const Bytes usable{
      static_cast<std::int64_t>(static_cast<double>(capacity.value) * (1.0 - headroom))};
  return "; above dtplan plan's " + fixed(100 * headroom, 0) + "% headroom (" + gib(usable) +
         " GiB usable), which keeps room for allocator fragmentation: plan rejects it";
}

std::string attention_text(const ModelDesc& m, const TrainingConfig& c) {
  std::string text = std::string(name_of(c.attention)) + " attention";
  if (m.transformer && c.attention == Attention::flash && c.precision == Precision::fp32) {
    // No FlashAttention kernel computes in fp32: what PyTorch's SDPA runs instead.
    text += cost::attention_as_run(*m.transformer, c) == Attention::eager
                ? " (fp32: PyTorch's math path, for grouped key/value heads)"
                : " (fp32: PyTorch's memory-efficient kernel)";
  }
  if (c.attention_kernel != AttentionKernel::framework) {
    text += " (" + std::string(name_of(c.attention_kernel)) + " kernel)";
  }
  return text;
}

void print_wrapped(std::ostream& out, const std::string& indent, const std::vector<LinePart>& parts,
                   std::size_t max_chars) {
  std::string line = indent;
  bool start = true;
  for (const auto& part : parts) {
    if (!start && line.size() + part.separator.size() + part.text.size() > max_chars) {
      std::string ending = part.separator;
      while (!ending.empty() && ending.back() == ' ')
        ending.pop_back();
      out << line << ending << "\n";
      line = indent + "    " + part.text;
    } else {
      line += (start ? std::string() : part.separator) + part.text;
    }
    start = false;
  }
  out << line << "\n";
}

}  // namespace dtplan::cli
