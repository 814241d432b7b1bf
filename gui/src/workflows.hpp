// The GUI's Calibrate and Autotune: the runtime library's workflows (runtime/calibrate.hpp,
// runtime/autotune.hpp) run on a worker thread under a progress dialog; its Cancel stops the
// job the way Ctrl-C stops the CLI's (runtime/interrupt.hpp), keeping what finished.
#pragma once

#include <QString>
#include <cstdint>
#include <functional>
#include <string>

#include "dtplan/runtime/calibrate.hpp"
#include "dtplan/runtime/trials.hpp"
#include "session.hpp"

class QProgressDialog;
class QWidget;

namespace dtplan::gui {

struct WorkflowResult {
  enum class Status { done, cancelled, failed };
  Status status = Status::failed;
  std::string text;  // the workflow's summary, or why it stopped
};

// A workflow: reports progress through the callback, returns its summary.
using Work = std::function<std::string(const runtime::ProgressFn&)>;
// Sees each progress update on the UI thread after the dialog shows it (tests).
using ProgressObserver = std::function<void(QProgressDialog&, const runtime::WorkProgress&)>;

// Runs `work` on a worker thread with a modal progress dialog over `parent` and returns when
// it ended: done, cancelled (the dialog's Cancel, or an Interrupted from the workflow) or
// failed (the error's text). Only one workflow runs at a time.
WorkflowResult run_with_progress(QWidget* parent, const QString& title, const Work& work,
                                 const ProgressObserver& observe = {});

// "step 3 of 9: allreduce, 4 ranks -- about 12 s left".
QString progress_label(const runtime::WorkProgress& p);

struct CalibrateChoice {
  runtime::CalibrateRequest request;
  std::string out;     // the profile file to write
  bool force = false;  // replace a good profile even with a noisy one
};

// Calibrates and writes the profile to `out` (refused when it would replace a good profile
// with a noisy one, unless force). Returns the summary and the warnings.
std::string calibrate_to_file(const CalibrateChoice& c, const runtime::ProgressFn& progress);

struct AutotuneChoice {
  std::int64_t np = 1;
  std::string backend = "cpu";
  double scale = 0.05;  // the runtime runs the model at this width
  std::int64_t global_batch = 8;
  std::int64_t seq_len = 0;  // 0: the session's
  std::int64_t steps = 3;
  std::int64_t max_trials = 0;  // 0: no limit
  std::string results;          // JSON-lines file every trial is appended to
  bool resume = false;
  bool recompute = false;  // also measure selective and full activation recomputation
};

// Autotunes the session's model (its GPU and topology for the planner's checks, its precision
// and optimizer, its profile or the bundled one) and returns the ranking's summary: the best
// measured configuration first.
std::string autotune_session(const Session& s, const AutotuneChoice& c,
                             const runtime::ProgressFn& progress);

}  // namespace dtplan::gui
