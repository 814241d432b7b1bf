// `dtplan accuracy`: how well the calibrated cost model predicts this machine
// (runtime/accuracy.hpp runs the held-out configurations), or, with --published, how well
// the bundled cost model predicts measured runs from public sources
// (planner/published_accuracy.hpp); a table or JSON.
#include <memory>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/planner/published_accuracy.hpp"
#include "dtplan/runtime/accuracy.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "progress.hpp"
#include "published_report.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

struct AccuracyOptions {
  runtime::AccuracyRequest request;
  std::string profile;
  bool json = false;
  const CLI::Option* published = nullptr;
  std::string published_dir;  // empty: the data directory's published/
  std::string family;         // step, comm, memory; empty: all
  std::string source;         // one source id; empty: all
  bool rows = false;
  std::string bands_file;  // --write-bands
};

int run_published(const AccuracyOptions& o, const RunContext& ctx) {
  const auto data = resolve_data_dir(o.request.data_dir);
  const auto dir =
      o.published_dir.empty() ? data / "published" : std::filesystem::path(o.published_dir);
  const auto set = planner::load_published(dir);
  planner::PublishedRequest r;
  r.data_dir = data;
  if (!o.family.empty()) r.family = parse_flag("--family", o.family, planner::parse_family);
  r.source = o.source;
  if (!r.source.empty()) {
    bool known = false;
    std::vector<std::string> ids;
    for (const auto& s : set.sources) {
      known = known || s.id == r.source;
      ids.push_back(s.id);
    }
    if (!known) throw Error(unknown_name_message("--source", r.source, ids));
  }
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  if (ProgressBar::stderr_is_terminal()) {
    r.progress = [&](std::int64_t done, std::int64_t total) {
      bar.update(double(done), double(total), "measured runs", 0);
    };
  }
  if (!o.bands_file.empty() && (r.family || !r.source.empty())) {
    throw Error(
        "--write-bands: bands come from every source and family; drop --family and "
        "--source");
  }
  const auto a = planner::published_accuracy(set, r);
  bar.finish();
  if (!o.bands_file.empty()) {
    write_file_atomically(o.bands_file, planner::bands_json(a.bands).dump(2) + "\n",
                          "--write-bands");
  }
  if (o.json) {
    auto j = report_preamble("accuracy", ctx.args);
    j["published"] = dir.string();
    j.update(published_json(set, a));
    ctx.out << report_text(j);
    return 0;
  }
  print_published(ctx.out, set, a, o.rows);
  return 0;
}

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
  if (o.published->count() > 0) return run_published(o, ctx);
  if (o.profile.empty()) {
    throw Error(
        "--profile: a hardware profile to measure against (dtplan calibrate --out), or "
        "--published for the measured runs of public sources");
  }
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
      "accuracy",
      "Measured vs predicted: held-out configurations run here with a profile, or "
      "--published runs from public sources");
  auto o = std::make_shared<AccuracyOptions>();
  sub->add_option("--profile", o->profile, "hardware profile (dtplan calibrate --out)");
  o->published = sub->add_option("--published", o->published_dir,
                                 "predict the measured runs of data/published (or of DIR)")
                     ->expected(0, 1);
  sub->add_option("--family", o->family, "with --published: step|comm|memory (default: all)");
  sub->add_option("--source", o->source, "with --published: one source id");
  sub->add_flag("--rows", o->rows, "with --published: list every row, not the largest errors");
  sub->add_option("--write-bands", o->bands_file,
                  "with --published: write the error bands estimate shows (data/error_bands.json)");
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
