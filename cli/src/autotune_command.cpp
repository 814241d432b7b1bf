// `dtplan autotune`: pick the fastest configuration by measurement. The planner's candidates
// for the global batch on --np ranks (checkpointing and offload off: the runtime executes
// neither), merged where the runtime executes them the same way, are tried through dtplan-run
// in the calibrated model's order with early stopping (autotune_search.hpp); every trial is
// appended to a JSON-lines results file (autotune_log.hpp). The report ranks the measured
// results next to their predictions and exports the best (DeepSpeed config, launch lines, Plan).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "autotune_log.hpp"
#include "autotune_report.hpp"
#include "autotune_search.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/planner/exports.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/runtime/host_info.hpp"
#include "format.hpp"
#include "interrupt.hpp"
#include "json_output.hpp"
#include "progress.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

std::string mode_name(cost::RuntimeMode m) {
  switch (m) {
    case cost::RuntimeMode::ddp:
      return "ddp";
    case cost::RuntimeMode::dp:
      return "dp";
    case cost::RuntimeMode::zero1:
      return "zero1";
    case cost::RuntimeMode::zero2:
      return "zero2";
    case cost::RuntimeMode::zero3:
      return "zero3";
  }
  return "?";
}

std::string key_of(const planner::Candidate& c) {
  std::string k = mode_name(cost::runtime_mode(c.strategy)) + " mb " +
                  std::to_string(c.micro_batch) + " x " + std::to_string(c.grad_accum);
  if (c.grad_accum > 1) k += cost::runtime_no_sync(c.strategy, c.no_sync) ? " no_sync" : " sync";
  return k;
}

void check(const AutotuneOptions& o) {
  if (o.global_batch < 1) throw Error("--global-batch: a positive number of samples");
  if (o.np >= 1 && o.global_batch % o.np != 0) {
    throw Error("--global-batch " + std::to_string(o.global_batch) + ": not a multiple of --np " +
                std::to_string(o.np) + " (every rank takes the same share)");
  }
  if (o.np < 1) throw Error("--np " + std::to_string(o.np) + ": must be >= 1");
  if (!(o.scale > 0 && o.scale <= 1)) throw Error("--scale: in (0, 1]");
  if (o.max_trials < 0) throw Error("--max-trials: 0 (no limit) or more");
  if (!(o.time_budget_s >= 0)) throw Error("--time-budget: seconds, 0 for none");
  if (o.steps < 1 || o.warmup < 0) throw Error("--steps >= 1 and --warmup >= 0");
  if (o.backend != "cpu" && o.backend != "cuda") {
    throw Error("--backend " + o.backend + ": expected cpu or cuda");
  }
}

TrialSettings settings_of(const AutotuneOptions& o, const std::filesystem::path& work) {
  TrialSettings s;
  s.np = o.np;
  s.backend = o.backend;
  s.steps = o.steps;
  s.warmup = o.warmup;
  s.work_dir = work;
  s.data_dir = o.model.data_dir;
  return s;
}

Space search_space(const AutotuneOptions& o, const TrialSettings& s) {
  const auto data = data_dir_of(o.model);
  Space sp;
  sp.model = resolve_model(o.model);
  TopologyOptions topo;
  topo.topology = o.topology;
  const auto loaded = load_topology(topo, data);
  const auto gpu = find_gpu(o.gpu, data, "--gpu");
  auto& r = sp.request;
  r.global_batch = o.global_batch;
  r.seq_len = o.seq_len;
  r.max_gpus = o.np;
  r.exact_batch = true;
  r.top_k = 100000;
  r.precisions = {parse_precision(o.precision)};
  r.checkpointing = {Checkpointing::none};
  r.offloads = {Offload::none};
  r.optimizer = parse_optimizer(o.optimizer);
  r.micro_batches = o.micro_batches;
  for (const auto& name : o.strategies)
    r.strategies.push_back(parse_strategy(name));
  const auto result =
      planner::plan(sp.model, loaded.topology, loaded.table, gpu, r, compute_constants_of({}, data),
                    cost::load_overheads(data / "overheads.json"));
  sp.gpus_per_node = loaded.topology.gpus_per_node();
  sp.planner_configs = result.configs_evaluated;
  for (const auto& c : result.ranked) {
    if (c.dp != o.np || c.global_batch != o.global_batch || c.strategy == Strategy::fsdp_hybrid) {
      continue;
    }
    const auto key = key_of(c);
    auto& same = sp.planned[key];
    same.push_back(c);
    if (same.size() > 1) continue;  // the runtime executes it as an earlier candidate
    TuneCandidate t;
    t.key = key;
    t.config = {o.model.model, o.scale,       o.seq_len,    c.strategy, r.optimizer,
                c.precision,   c.micro_batch, c.grad_accum, c.no_sync};
    t.run = runtime_run_of(t.config, s);
    sp.candidates.push_back(t);
  }
  if (sp.candidates.empty()) {
    throw Error("dtplan autotune: the planner found no configuration of global batch " +
                std::to_string(o.global_batch) + " on " + std::to_string(o.np) + " x " + o.gpu +
                " that fits (dtplan plan --gpus " + std::to_string(o.np) + " says why)");
  }
  return sp;
}

nlohmann::json header_of(const AutotuneOptions& o) {
  return {{"type", "autotune"},
          {"schema_version", 1},
          {"model", o.model.model},
          {"scale", o.scale},
          {"seq_len", o.seq_len},
          {"global_batch", o.global_batch},
          {"np", o.np},
          {"backend", o.backend},
          {"steps", o.steps},
          {"warmup", o.warmup},
          {"precision", o.precision},
          {"optimizer", o.optimizer},
          {"topology", o.topology},
          {"gpu", o.gpu},
          {"strategies", o.strategies},
          {"micro_batches", o.micro_batches},
          {"created", runtime::utc_timestamp()}};
}

TrialRunner runner_of(const TrialSettings& s, const cost::HardwareProfile& p, int& index) {
  return [&s, &p, &index](const TuneCandidate& c, double) {
    TrialRecord t;
    t.label = c.config.model + "@" + std::to_string(c.config.scale).substr(0, 6) + " " + c.key;
    const auto start = std::chrono::steady_clock::now();
    const std::string name = "trial-" + std::to_string(index++);
    try {
      const auto m = run_trial(c.config, name, s, [](const std::string&) {});
      t.measured_s = m.median().time_s;
      t.samples_per_s = m.samples_per_s();
      for (const auto& r : m.memory)
        t.peak_bytes = std::max(t.peak_bytes, r.peak_bytes);
      t.sample = step_sample_of(t.label, m, p);
      t.measurement = (s.work_dir / (name + ".json")).string();
    } catch (const Error& e) {
      t.failure = e.what();
    }
    t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return t;
  };
}

std::string default_profile(const AutotuneOptions& o) {
  return cost::bundled_profile(resolve_data_dir(o.model.data_dir), o.backend, o.np).string();
}

int run_autotune(AutotuneOptions o, const RunContext& ctx) {
  check(o);
  // The trials' plans and the results header record the length actually run: a default of
  // "the model's maximum" is resolved here, not passed on as 0.
  o.seq_len = sequence_length(resolve_model(o.model), o.seq_len);
  const InterruptScope interrupts;  // Ctrl-C stops the trials, keeps the finished ones
  if (o.profile.empty()) o.profile = default_profile(o);
  const auto profile = profile_from_flag(o.profile);
  if (profile.backend != o.backend) {
    throw Error("--profile " + o.profile + ": measured on backend " + profile.backend +
                ", not --backend " + o.backend);
  }
  const auto work = work_dir_of(o.work_dir, "autotune");
  const auto settings = settings_of(o, work);
  const auto space = search_space(o, settings);
  ResultsFile results(o.results, header_of(o), o.resume);
  if (!results.repair_note().empty())
    ctx.err << "dtplan autotune: " << results.repair_note() << "\n";
  TuneSettings ts;
  ts.max_trials = o.max_trials;
  ts.time_budget_s = o.time_budget_s;
  ts.exhaustive = o.exhaustive;
  ts.runs_per_trial = static_cast<double>(o.steps + o.warmup);
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  int index = static_cast<int>(results.previous().size());
  std::size_t kept = results.previous().size();
  TuneOutcome outcome;
  try {
    outcome = tune(
        space.candidates, profile, results.previous(), ts, runner_of(settings, profile, index),
        [&](const TrialRecord& t) {
          results.append(t);
          ++kept;
        },
        [&](const TuneProgress& pr) {
          throw_if_interrupted();  // between trials
          std::string what = "trial: " + pr.now;
          if (pr.best_s) what += "; best " + seconds(*pr.best_s);
          bar.update(double(pr.done), double(pr.total), what, pr.eta_s);
        });
  } catch (const Interrupted&) {
    bar.finish();
    // The trial in flight is not a failed trial: it is not logged, and a resume runs it.
    ctx.err << "dtplan autotune: stopped; " << kept << " finished trials are kept in " << o.results
            << " (continue with --resume)\n";
    throw;
  }
  bar.finish();
  const auto* best = best_trial(outcome.trials);
  const Exports ex = best ? export_best(o, space, best->key) : Exports{};
  if (o.json) {
    ctx.out << report_json(o, space, outcome, ex, ctx).dump(2) << "\n";
  } else {
    print_report(ctx.out, o, space, outcome, results.previous().size(), profile, ex);
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
