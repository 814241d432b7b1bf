// Autotuning workflow (see autotune.hpp).
#include "dtplan/runtime/autotune.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/runtime/interrupt.hpp"

namespace dtplan::runtime {
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

// What the runtime executes: candidates with the same key run identically.
std::string key_of(const planner::Candidate& c) {
  std::string k = mode_name(cost::runtime_mode(c.strategy)) + " mb " +
                  std::to_string(c.micro_batch) + " x " + std::to_string(c.grad_accum);
  if (c.grad_accum > 1) k += cost::runtime_no_sync(c.strategy, c.no_sync) ? " no_sync" : " sync";
  if (c.checkpointing != Checkpointing::none) {
    k += " " + std::string(name_of(c.checkpointing)) + " recompute";
  }
  return k;
}

planner::PlanRequest plan_request_of(const AutotuneRequest& r) {
  planner::PlanRequest p;
  p.global_batch = r.global_batch;
  p.seq_len = r.seq_len;
  p.max_gpus = r.np;
  p.exact_batch = true;
  p.top_k = 100000;
  p.precisions = {r.precision};
  p.checkpointing =
      r.checkpointings.empty() ? std::vector<Checkpointing>{Checkpointing::none} : r.checkpointings;
  p.offloads = {Offload::none};
  p.optimizer = r.optimizer;
  p.micro_batches = r.micro_batches;
  p.strategies = r.strategies;
  return p;
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
      for (const auto& rank : m.memory)
        t.peak_bytes = std::max(t.peak_bytes, rank.peak_bytes);
      t.sample = step_sample_of(t.label, m, p);
      t.measurement = (s.work_dir / (name + ".json")).string();
    } catch (const Error& e) {
      t.failure = e.what();
    }
    t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return t;
  };
}

std::vector<std::string> names_of(const std::vector<Strategy>& strategies) {
  std::vector<std::string> out;
  out.reserve(strategies.size());
  for (const auto s : strategies)
    out.emplace_back(name_of(s));
  return out;
}

std::string short_seconds(double s) {
  char buf[32];
  if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  }
  return buf;
}

}  // namespace

AutotuneRequest checked(AutotuneRequest r) {
  if (r.global_batch < 1) throw FieldError("global_batch", "a positive number of samples");
  if (r.np < 1) throw FieldError("np", std::to_string(r.np) + ": must be >= 1");
  if (r.global_batch % r.np != 0) {
    throw FieldError("global_batch", std::to_string(r.global_batch) + ": not a multiple of {np} " +
                                         std::to_string(r.np) +
                                         " (every rank takes the same share)");
  }
  if (!(r.scale > 0 && r.scale <= 1)) throw FieldError("scale", "in (0, 1]");
  if (r.max_trials < 0) throw FieldError("max_trials", "0 (no limit) or more");
  if (!(r.time_budget_s >= 0)) throw FieldError("time_budget_s", "seconds, 0 for none");
  if (r.steps < 1) throw FieldError("steps", "1 or more");
  if (r.warmup < 0) throw FieldError("warmup", "0 or more");
  if (r.backend != "cpu" && r.backend != "cuda") {
    throw FieldError("backend", r.backend + ": expected cpu or cuda");
  }
  r.seq_len = sequence_length(r.model, r.seq_len);
  return r;
}

cost::HardwareProfile autotune_profile(const std::string& path, const AutotuneRequest& r) {
  const auto file =
      path.empty() ? cost::bundled_profile(resolve_data_dir(r.data_dir), r.backend, r.np).string()
                   : path;
  auto profile = load_profile_field(file);
  if (profile.backend != r.backend) {
    throw FieldError("profile", file + ": measured on backend " + profile.backend +
                                    ", not {backend} " + r.backend);
  }
  return profile;
}

TrialSettings trial_settings(const AutotuneRequest& r, const std::filesystem::path& work_dir) {
  TrialSettings s;
  s.np = r.np;
  s.backend = r.backend;
  s.steps = r.steps;
  s.warmup = r.warmup;
  s.work_dir = work_dir;
  s.data_dir = r.data_dir;
  return s;
}

TuneSpace search_space(const AutotuneRequest& r, const PlannerInputs& in, const TrialSettings& s) {
  TuneSpace sp;
  sp.model = r.model;
  sp.request = plan_request_of(r);
  const auto result =
      planner::plan(sp.model, in.topology, in.table, in.gpu, sp.request, in.compute, in.overheads);
  sp.gpus_per_node = in.topology.gpus_per_node();
  sp.planner_configs = result.configs_evaluated;
  for (const auto& c : result.ranked) {
    if (c.dp != r.np || c.global_batch != r.global_batch || c.strategy == Strategy::fsdp_hybrid) {
      continue;
    }
    const auto key = key_of(c);
    auto& same = sp.planned[key];
    same.push_back(c);
    if (same.size() > 1) continue;  // the runtime executes it as an earlier candidate
    TuneCandidate t;
    t.key = key;
    t.config = {r.model_name, r.scale,       r.seq_len,    c.strategy, r.optimizer,
                c.precision,  c.micro_batch, c.grad_accum, c.no_sync,  c.checkpointing};
    t.run = runtime_run_of(t.config, s);
    sp.candidates.push_back(t);
  }
  if (sp.candidates.empty()) {
    throw Error("autotune: the planner found no configuration of global batch " +
                std::to_string(r.global_batch) + " on " + std::to_string(r.np) + " x " +
                r.gpu_name + " that fits (dtplan plan --gpus " + std::to_string(r.np) +
                " says why)");
  }
  return sp;
}

nlohmann::json results_header(const AutotuneRequest& r, const std::string& created) {
  nlohmann::json header{{"type", "autotune"},
                        {"schema_version", 1},
                        {"model", r.model_name},
                        {"scale", r.scale},
                        {"seq_len", r.seq_len},
                        {"global_batch", r.global_batch},
                        {"np", r.np},
                        {"backend", r.backend},
                        {"steps", r.steps},
                        {"warmup", r.warmup},
                        {"precision", std::string(name_of(r.precision))},
                        {"optimizer", std::string(name_of(r.optimizer))},
                        {"topology", r.topology_name},
                        {"gpu", r.gpu_name},
                        {"strategies", names_of(r.strategies)},
                        {"micro_batches", r.micro_batches},
                        {"created", created}};
  // Only when recomputation is searched, so that files of runs without it still resume.
  if (!r.checkpointings.empty() &&
      r.checkpointings != std::vector<Checkpointing>{Checkpointing::none}) {
    auto names = nlohmann::json::array();
    for (const auto c : r.checkpointings)
      names.push_back(std::string(name_of(c)));
    header["checkpointing"] = names;
  }
  return header;
}

TuneOutcome autotune(const AutotuneRequest& r, const TuneSpace& space,
                     const cost::HardwareProfile& profile, const TrialSettings& s,
                     ResultsFile& results, const ProgressFn& progress) {
  TuneSettings ts;
  ts.max_trials = r.max_trials;
  ts.time_budget_s = r.time_budget_s;
  ts.exhaustive = r.exhaustive;
  ts.runs_per_trial = static_cast<double>(r.steps + r.warmup);
  int index = static_cast<int>(results.previous().size());
  return tune(
      space.candidates, profile, results.previous(), ts, runner_of(s, profile, index),
      [&](const TrialRecord& t) { results.append(t); },
      [&](const TuneProgress& pr) {
        throw_if_interrupted();  // between trials
        std::string what = "trial: " + pr.now;
        if (pr.best_s) what += "; best " + short_seconds(*pr.best_s);
        progress({double(pr.done), double(pr.total), what, pr.eta_s});
      });
}

}  // namespace dtplan::runtime
