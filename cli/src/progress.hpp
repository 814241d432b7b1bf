// A progress bar for long commands (calibrate, accuracy, autotune): on a terminal, one line
// redrawn in place -- bar, count, what runs now, elapsed time and the estimated time left;
// elsewhere (logs, CI) one plain line per update.
#pragma once

#include <ostream>
#include <string>

namespace dtplan::cli {

class ProgressBar {
 public:
  // `terminal`: whether `out` is a terminal (isatty on the stream's descriptor).
  ProgressBar(std::ostream& out, bool terminal);
  ~ProgressBar();
  // done of total; eta_s < 0: unknown.
  void update(double done, double total, const std::string& what, double eta_s);
  // Ends the bar's line (before other output).
  void finish();

  static bool stderr_is_terminal();
  static std::string duration(double seconds);  // "1:05", "1:02:03"

 private:
  std::ostream& out_;
  bool terminal_;
  bool open_ = false;
  double start_s_;
};

}  // namespace dtplan::cli
