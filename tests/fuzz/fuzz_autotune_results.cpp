// Fuzz target: the trial lines of an autotune results file (JSON lines), as --resume reads
// them; each line of the input is one trial.
#include <string>

#include "dtplan/runtime/autotune_log.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    ++line_no;
    dtplan::fuzz::expect_value_or_error([&] {
      dtplan::runtime::trial_from_line(std::string(line), "<fuzz>:" + std::to_string(line_no));
    });
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}
