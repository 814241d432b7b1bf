// `dtplan accuracy`: how well the calibrated cost model predicts this machine. Runs the fixed
// held-out configurations (trial_sets.hpp; none is used by calibration) through dtplan-run
// and compares each median step time with the profile's prediction.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "progress.hpp"
#include "runtime_trials.hpp"
#include "table.hpp"
#include "trial_sets.hpp"

namespace dtplan::cli {
namespace {

struct AccuracyOptions {
  std::string profile;
  std::string backend;  // default: the profile's
  std::int64_t np = 2;
  std::int64_t steps = 3;
  std::int64_t limit = 0;  // 0: every configuration
  std::string work_dir;
  std::string data_dir;
  bool json = false;
};

struct Row {
  std::string config;
  double predicted_s = 0, measured_s = 0;
  double error() const { return (predicted_s - measured_s) / measured_s; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<Row> measure_rows(const AccuracyOptions& o, const cost::HardwareProfile& p,
                              const TrialSettings& s, std::ostream& err) {
  auto set = accuracy_set(s.backend);
  if (o.limit > 0 && o.limit < static_cast<std::int64_t>(set.size())) set.resize(o.limit);
  ProgressBar bar(err, ProgressBar::stderr_is_terminal());
  std::vector<Row> rows;
  double spent = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    const double eta = i == 0 ? -1 : spent / double(i) * double(set.size() - i);
    bar.update(double(i), double(set.size()), set[i].label(), eta);
    const double predicted = cost::predict_runtime_step(runtime_run_of(set[i], s), p).step_s;
    const auto m = run_trial(set[i], "accuracy-" + std::to_string(i), s, [](const auto&) {});
    spent += m.median().time_s * double(s.steps + s.warmup) + 0.5;
    rows.push_back({set[i].label(), predicted, m.median().time_s});
  }
  bar.update(double(set.size()), double(set.size()), "done", 0);
  bar.finish();
  return rows;
}

int run_accuracy(const AccuracyOptions& o, const RunContext& ctx) {
  const auto p = profile_from_flag(o.profile);
  TrialSettings s;
  s.np = o.np;
  s.backend = o.backend.empty() ? p.backend : o.backend;
  s.steps = o.steps;
  s.data_dir = o.data_dir;
  if (s.backend != p.backend) {
    throw Error("--backend " + s.backend + ": the profile " + o.profile + " is for " + p.backend);
  }
  if (o.np < 1) throw Error("--np " + std::to_string(o.np) + ": must be >= 1");
  if (o.steps < 1) throw Error("--steps " + std::to_string(o.steps) + ": must be >= 1");
  s.work_dir = work_dir_of(o.work_dir, "accuracy");
  const auto rows = measure_rows(o, p, s, ctx.err);
  std::vector<double> errors;
  errors.reserve(rows.size());
  for (const auto& r : rows)
    errors.push_back(std::abs(r.error()));
  const double med = median(errors);
  const double worst = *std::max_element(errors.begin(), errors.end());
  if (o.json) {
    auto j = report_preamble("accuracy", ctx.args);
    j["profile"] = o.profile;
    j["hardware"] = p.hardware;
    j["np"] = o.np;
    j["median_abs_error"] = med;
    j["max_abs_error"] = worst;
    j["rows"] = nlohmann::json::array();
    for (const auto& r : rows) {
      j["rows"].push_back({{"config", r.config},
                           {"predicted_step_s", r.predicted_s},
                           {"measured_step_s", r.measured_s},
                           {"error", r.error()}});
    }
    ctx.out << report_text(j);
    return 0;
  }
  ctx.out << "dtplan accuracy: " << rows.size() << " held-out configurations on " << o.np
          << " ranks (" << s.backend << "), profile " << o.profile << "\n  " << p.hardware
          << "\n\n";
  TextTable t({"configuration", "predicted", "measured", "error"});
  for (const auto& r : rows)
    t.add_row({r.config, seconds(r.predicted_s), seconds(r.measured_s), signed_percent(r.error())});
  t.print(ctx.out);
  ctx.out << "\nmedian |error| " << percent(med) << ", max |error| " << percent(worst)
          << "; error = (predicted - measured) / measured, median step of " << o.steps
          << " measured steps; runs are in " << s.work_dir.string() << "\n";
  return 0;
}

}  // namespace

Command register_accuracy_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "accuracy", "Measured vs predicted step time on held-out configurations, with a profile");
  auto o = std::make_shared<AccuracyOptions>();
  sub->add_option("--profile", o->profile, "hardware profile (dtplan calibrate --out)")->required();
  sub->add_option("--np", o->np, "ranks")->capture_default_str();
  sub->add_option("--backend", o->backend, "cpu or cuda (default: the profile's)");
  sub->add_option("--steps", o->steps, "measured steps per configuration")->capture_default_str();
  sub->add_option("--limit", o->limit, "only the first N configurations (0: all)");
  sub->add_option("--work-dir", o->work_dir, "keep the runs here (default: a temporary folder)");
  sub->add_option("--data-dir", o->data_dir, "dtplan data directory");
  sub->add_flag("--json", o->json, "JSON: median_abs_error, max_abs_error, rows[]");
  return {"accuracy", [o](const RunContext& ctx) { return run_accuracy(*o, ctx); }};
}

}  // namespace dtplan::cli
