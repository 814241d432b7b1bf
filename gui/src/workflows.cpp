#include "workflows.hpp"

#include <QCoreApplication>
#include <QEventLoop>
#include <QFutureWatcher>
#include <QProgressDialog>
#include <QtConcurrent>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/model/training.hpp"
#include "dtplan/planner/cluster_inputs.hpp"
#include "dtplan/runtime/autotune.hpp"
#include "dtplan/runtime/host_info.hpp"
#include "dtplan/runtime/interrupt.hpp"
#include "labels.hpp"

namespace dtplan::gui {
namespace {

using Status = WorkflowResult::Status;
constexpr int kBarSteps = 1000;  // the dialog's bar resolution

WorkflowResult guarded(const Work& work, const runtime::ProgressFn& progress) {
  try {
    return {Status::done, work(progress)};
  } catch (const runtime::Interrupted&) {
    return {Status::cancelled, "cancelled: the job in flight was stopped"};
  } catch (const std::exception& e) {
    return {Status::failed, message_of(e)};
  }
}

void show(QProgressDialog& dialog, const runtime::WorkProgress& p) {
  if (dialog.wasCanceled()) return;  // keeps "cancelling..."
  const double fraction = p.total > 0 ? std::clamp(p.done / p.total, 0.0, 1.0) : 0.0;
  dialog.setValue(static_cast<int>(std::lround(fraction * kBarSteps)));
  dialog.setLabelText(progress_label(p));
}

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  return buf;
}

std::string trial_line(const runtime::TrialRecord& t) {
  if (!t.measured_s) return t.label + ": failed: " + t.failure;
  char err[32];
  std::snprintf(err, sizeof err, "%+.1f%%", t.error() * 100);
  return t.label + ": measured " + ms(*t.measured_s) + " per step, predicted " + ms(t.predicted_s) +
         " (" + err + ")";
}

std::string tune_summary(const runtime::TuneOutcome& o, const std::string& results) {
  std::ostringstream out;
  if (const auto* best = runtime::best_trial(o.trials)) {
    out << "fastest measured: " << best->key << ", " << ms(*best->measured_s) << " per step\n\n";
  } else {
    out << "no trial ran to the end\n\n";
  }
  for (const auto& t : o.trials)
    out << trial_line(t) << "\n";
  if (!o.stop_reason.empty()) out << "\nstopped: " << o.stop_reason << "\n";
  out << "trials are in " << results;
  return out.str();
}

}  // namespace

QString progress_label(const runtime::WorkProgress& p) {
  QString text = QString("step %1 of %2: %3")
                     .arg(static_cast<long long>(std::floor(p.done)) + 1)
                     .arg(static_cast<long long>(std::ceil(p.total)))
                     .arg(QString::fromStdString(p.what));
  if (p.done >= p.total) text = QString::fromStdString(p.what);
  if (p.eta_s >= 0) text += QString(" -- about %1 s left").arg(std::lround(p.eta_s));
  return text;
}

WorkflowResult run_with_progress(QWidget* parent, const QString& title, const Work& work,
                                 const ProgressObserver& observe) {
  QProgressDialog dialog(title, "Cancel", 0, kBarSteps, parent);
  dialog.setWindowTitle(title);
  dialog.setWindowModality(Qt::WindowModal);
  dialog.setMinimumDuration(0);
  dialog.setAutoClose(false);
  dialog.setAutoReset(false);
  // Installed here, before the worker starts, so that a Cancel at any moment reaches the job.
  const runtime::InterruptScope interrupts;
  QObject::connect(&dialog, &QProgressDialog::canceled, &dialog, [&dialog] {
    dialog.setLabelText("cancelling: stopping the job in flight...");
    runtime::request_interrupt();
  });
  const runtime::ProgressFn progress = [&dialog, &observe](const runtime::WorkProgress& p) {
    runtime::throw_if_interrupted();  // Cancel stops between steps too
    QMetaObject::invokeMethod(
        &dialog,
        [&dialog, &observe, p] {
          show(dialog, p);
          if (observe) observe(dialog, p);
        },
        Qt::QueuedConnection);
  };
  QFutureWatcher<WorkflowResult> watcher;
  QEventLoop loop;
  bool ended = false;
  QObject::connect(&watcher, &QFutureWatcherBase::finished, &loop, [&] {
    ended = true;
    loop.quit();
  });
  watcher.setFuture(QtConcurrent::run([&work, &progress] { return guarded(work, progress); }));
  if (!ended) loop.exec();
  QCoreApplication::sendPostedEvents(&dialog);  // the last updates, before the dialog goes
  return watcher.result();
}

std::string calibrate_to_file(const CalibrateChoice& c, const runtime::ProgressFn& progress) {
  runtime::check_request(c.request);
  if (c.out.empty()) throw FieldError("out", "name the profile file to write");
  check_output_path(c.out, "the profile file");
  auto cal = runtime::calibrate(c.request, progress);
  if (!c.force) runtime::check_replaceable(c.out, cal.profile, cal.work_dir);
  write_file_atomically(c.out, cost::to_json(cal.profile).dump(2) + "\n", "the profile file");
  std::string text = runtime::profile_summary(cal.profile) + "\n\nwrote " + c.out +
                     "; the runs are in " + cal.work_dir.string();
  for (const auto& w : cal.warnings)
    text += "\nwarning: " + w;
  return text;
}

std::string autotune_session(const Session& s, const AutotuneChoice& c,
                             const runtime::ProgressFn& progress) {
  if (c.results.empty()) throw FieldError("results", "name the file the trials are written to");
  const auto data = resolve_data_dir("");
  runtime::AutotuneRequest r;
  r.model_name = s.model;
  r.model = load_model(s.model, data / "models");
  r.scale = c.scale;
  r.seq_len = c.seq_len > 0 ? c.seq_len : s.seq_len;
  r.global_batch = c.global_batch;
  r.np = c.np;
  r.backend = c.backend;
  r.steps = c.steps;
  r.precision = parse_precision(s.precision);
  r.optimizer = parse_optimizer(s.optimizer);
  r.topology_name = s.topology;
  r.gpu_name = s.gpu;
  r.max_trials = c.max_trials;
  if (c.recompute) {
    r.checkpointings = {Checkpointing::none, Checkpointing::selective, Checkpointing::full};
  }
  r = runtime::checked(r);
  const auto profile = runtime::autotune_profile(s.profile, r);
  const auto settings = runtime::trial_settings(r, runtime::work_dir_of("", "autotune"));
  const planner::ClusterInputs cluster(data, {s.topology, s.nodes, s.gpu});
  const auto space = runtime::search_space(
      r, {cluster.topology, cluster.table, cluster.gpu, cluster.compute, cluster.overheads},
      settings);
  runtime::ResultsFile results(c.results, runtime::results_header(r, runtime::utc_timestamp()),
                               c.resume);
  const auto outcome = runtime::autotune(r, space, profile, settings, results, progress);
  return tune_summary(outcome, c.results);
}

}  // namespace dtplan::gui
