// `dtplan accuracy`: how well the calibrated cost model predicts this machine
// (runtime/accuracy.hpp runs the held-out configurations); a table or JSON.
#include <memory>

#include "commands.hpp"
#include "dtplan/runtime/accuracy.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "progress.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

struct AccuracyOptions {
  runtime::AccuracyRequest request;
  std::string profile;
  bool json = false;
};

void print_json(const AccuracyOptions& o, const cost::HardwareProfile& p,
                const runtime::AccuracyReport& r, const RunContext& ctx) {
  auto j = report_preamble("accuracy", ctx.args);
  j["profile"] = o.profile;
  j["hardware"] = p.hardware;
  j["np"] = o.request.np;
  j["median_abs_error"] = r.median_abs_error;
  j["max_abs_error"] = r.max_abs_error;
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    j["rows"].push_back({{"config", row.config},
                         {"predicted_step_s", row.predicted_s},
                         {"measured_step_s", row.measured_s},
                         {"error", row.error()}});
  }
  ctx.out << report_text(j);
}

int run_accuracy(const AccuracyOptions& o, const RunContext& ctx) {
  const auto p = runtime::load_profile_field(o.profile);
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  const auto r = runtime::measure_accuracy(o.request, p, [&](const runtime::WorkProgress& w) {
    bar.update(w.done, w.total, w.what, w.eta_s);
  });
  bar.finish();
  if (o.json) {
    print_json(o, p, r, ctx);
    return 0;
  }
  ctx.out << "dtplan accuracy: " << r.rows.size() << " held-out configurations on " << o.request.np
          << " ranks (" << r.backend << "), profile " << o.profile << "\n  " << p.hardware
          << "\n\n";
  TextTable t({"configuration", "predicted", "measured", "error"});
  for (const auto& row : r.rows) {
    t.add_row({row.config, seconds(row.predicted_s), seconds(row.measured_s),
               signed_percent(row.error())});
  }
  t.print(ctx.out);
  ctx.out << "\nmedian |error| " << percent(r.median_abs_error) << ", max |error| "
          << percent(r.max_abs_error)
          << "; error = (predicted - measured) / measured, median step of " << o.request.steps
          << " measured steps; runs are in " << r.work_dir.string() << "\n";
  return 0;
}

}  // namespace

Command register_accuracy_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "accuracy", "Measured vs predicted step time on held-out configurations, with a profile");
  auto o = std::make_shared<AccuracyOptions>();
  sub->add_option("--profile", o->profile, "hardware profile (dtplan calibrate --out)")->required();
  sub->add_option("--np", o->request.np, "ranks")->capture_default_str();
  sub->add_option("--backend", o->request.backend, "cpu or cuda (default: the profile's)");
  sub->add_option("--steps", o->request.steps, "measured steps per configuration")
      ->capture_default_str();
  sub->add_option("--limit", o->request.limit, "only the first N configurations (0: all)");
  sub->add_option("--work-dir", o->request.work_dir,
                  "keep the runs here (default: a temporary folder)");
  sub->add_option("--data-dir", o->request.data_dir, "dtplan data directory");
  sub->add_flag("--json", o->json, "JSON: median_abs_error, max_abs_error, rows[]");
  return {"accuracy", [o](const RunContext& ctx) { return run_accuracy(*o, ctx); }};
}

}  // namespace dtplan::cli
