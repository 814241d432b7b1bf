// `dtplan autotune`: pick the fastest configuration by measurement (runtime/autotune.hpp does
// the work). The report ranks the measured results next to their predictions and exports the
// best (DeepSpeed config, launch lines, Plan).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "autotune_report.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/planner/cluster_inputs.hpp"
#include "dtplan/planner/exports.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/runtime/autotune_log.hpp"
#include "dtplan/runtime/autotune_search.hpp"
#include "dtplan/runtime/host_info.hpp"
#include "dtplan/runtime/interrupt.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "progress.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

runtime::AutotuneRequest request_of(const AutotuneOptions& o) {
  runtime::AutotuneRequest r;
  r.model_name = o.model.model;
  r.model = resolve_model(o.model);
  r.scale = o.scale;
  r.seq_len = o.seq_len;
  r.global_batch = o.global_batch;
  r.np = o.np;
  r.backend = o.backend;
  r.steps = o.steps;
  r.warmup = o.warmup;
  r.precision = parse_flag("--precision", o.precision, parse_precision);
  r.optimizer = parse_optimizer(o.optimizer);
  for (const auto& name : o.strategies)
    r.strategies.push_back(parse_strategy(name));
  r.micro_batches = o.micro_batches;
  for (const auto& name : o.checkpointing)
    r.checkpointings.push_back(parse_flag("--checkpointing", name, parse_checkpointing));
  r.topology_name = o.topology;
  r.gpu_name = o.gpu;
  r.max_trials = o.max_trials;
  r.time_budget_s = o.time_budget_s;
  r.exhaustive = o.exhaustive;
  r.work_dir = o.work_dir;
  r.data_dir = o.model.data_dir;
  return runtime::checked(r);
}

runtime::TuneSpace search_space(const AutotuneOptions& o, const runtime::AutotuneRequest& r,
                                const runtime::TrialSettings& s) {
  const planner::ClusterInputs c(data_dir_of(o.model), {o.topology, 1, o.gpu});
  return runtime::search_space(r, {c.topology, c.table, c.gpu, c.compute, c.overheads}, s);
}

int run_autotune(AutotuneOptions o, const RunContext& ctx) {
  const auto r = request_of(o);
  o.seq_len = r.seq_len;                     // the length actually run, for the report
  const runtime::InterruptScope interrupts;  // Ctrl-C stops the trials, keeps the finished ones
  const auto profile = runtime::autotune_profile(o.profile, r);
  const auto settings = runtime::trial_settings(r, runtime::work_dir_of(o.work_dir, "autotune"));
  const auto space = search_space(o, r, settings);
  runtime::ResultsFile results(o.results, runtime::results_header(r, runtime::utc_timestamp()),
                               o.resume);
  if (!results.repair_note().empty())
    ctx.err << "dtplan autotune: " << results.repair_note() << "\n";
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  const std::size_t resumed = results.previous().size();
  runtime::TuneOutcome outcome;
  try {
    outcome = runtime::autotune(
        r, space, profile, settings, results,
        [&](const runtime::WorkProgress& p) { bar.update(p.done, p.total, p.what, p.eta_s); });
  } catch (const runtime::Interrupted&) {
    bar.finish();
    // The trial in flight is not a failed trial: it is not logged, and a resume runs it.
    ctx.err << "dtplan autotune: stopped; " << results.appended() + resumed
            << " finished trials are kept in " << o.results << " (continue with --resume)\n";
    throw;
  }
  bar.finish();
  const auto* best = runtime::best_trial(outcome.trials);
  const Exports ex = best ? export_best(o, space, best->key) : Exports{};
  if (o.json) {
    ctx.out << report_json(o, space, outcome, ex, ctx).dump(2) << "\n";
  } else {
    print_report(ctx.out, o, space, outcome, resumed, profile, ex);
  }
  return best ? 0 : 1;
}

}  // namespace

Command register_autotune_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "autotune", "Run the planner's candidates through the runtime and pick the fastest");
  auto o = std::make_shared<AutotuneOptions>();
  add_model_options(*sub, o->model);
  sub->add_option("--global-batch", o->global_batch, "samples per optimizer step")->required();
  sub->add_option("--seq-len", o->seq_len, "tokens per sample (default: the model's maximum)");
  sub->add_option("--np", o->np, "ranks (one per device)")->capture_default_str();
  sub->add_option("--backend", o->backend, "cpu or cuda")->capture_default_str();
  sub->add_option("--scale", o->scale, "run the model at this width (dtplan-run --scale)")
      ->capture_default_str()
      ->check(number_check(NumberRange::positive(1.0)));
  sub->add_option("--profile", o->profile,
                  "hardware profile (dtplan calibrate); default: the bundled one for the "
                  "backend and ranks");
  sub->add_option("--results", o->results, "JSON-lines file every trial is appended to")
      ->capture_default_str();
  sub->add_flag("--resume", o->resume, "continue --results, skipping the trials it holds");
  sub->add_option("--max-trials", o->max_trials, "stop after N trials (0: no limit)");
  sub->add_option("--time-budget", o->time_budget_s,
                  "seconds of trials (resumed ones count); 0: none")
      ->check(number_check(kSeconds));
  sub->add_flag("--exhaustive", o->exhaustive, "try every candidate (no early stop)");
  sub->add_option("--steps", o->steps, "measured steps per trial")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "warm-up steps per trial")->capture_default_str();
  sub->add_option("--topology", o->topology, "the planner's cluster (memory checks, exports)")
      ->capture_default_str();
  sub->add_option("--gpu", o->gpu, "the planner's GPU")->capture_default_str();
  sub->add_option("--strategy", o->strategies, "only these strategies")->delimiter(',');
  sub->add_option("--micro-batch", o->micro_batches, "only these micro-batches")->delimiter(',');
  sub->add_option("--checkpointing", o->checkpointing,
                  "recomputation to search: none, selective (the attention core), full "
                  "(default: none)")
      ->delimiter(',');
  sub->add_option("--precision", o->precision, "the plan's precision")->capture_default_str();
  sub->add_option("--optimizer", o->optimizer, "adamw, adam, sgd, ...")->capture_default_str();
  sub->add_option("--work-dir", o->work_dir, "keep the runs here (default: a temporary folder)");
  sub->add_option("--export-deepspeed", o->deepspeed_file, "DeepSpeed config of the best");
  sub->add_option("--save-plan", o->plan_file, "Plan JSON of the best");
  sub->add_flag("--export-launch", o->launch, "torchrun / deepspeed lines for the best");
  sub->add_flag("--json", o->json, "JSON report");
  return {"autotune", [o](const RunContext& ctx) { return run_autotune(*o, ctx); }};
}

}  // namespace dtplan::cli
