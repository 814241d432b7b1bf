// Layout of plans.
#include "plan_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "dtplan/model/suggest.hpp"
#include "estimate_report.hpp"
#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

using planner::Candidate;
using planner::Reason;
using planner::Rejected;

std::string behind_word(planner::Objective o) {
  return o == planner::Objective::cost ? "costlier" : "slower";
}

std::string shape_text(const Candidate& c) {
  std::string text = "micro-batch " + std::to_string(c.micro_batch) + " x accumulation " +
                     std::to_string(c.grad_accum) + " x " + std::to_string(c.dp) +
                     " GPUs = " + std::to_string(c.global_batch);
  if (c.grad_accum > 1) text += c.no_sync ? " (no_sync)" : " (sync every micro-step)";
  return text;
}

std::string config_text(const Candidate& c) {
  std::string text = std::string(name_of(c.strategy)) + ", " + std::string(name_of(c.precision));
  if (c.micro_batch > 0)
    text += ", " + shape_text(c);
  else
    text += ", " + std::to_string(c.dp) + " GPUs";
  return text + ", checkpointing " + std::string(name_of(c.checkpointing)) + ", offload " +
         std::string(name_of(c.offload));
}

std::string reason_text(const Rejected& r, planner::Objective o) {
  switch (r.reason) {
    case Reason::out_of_memory:
      return "out of memory by " + fixed(r.amount, 2) + " GiB";
    case Reason::host_out_of_memory:
      return "host memory per node over by " + fixed(r.amount, 2) + " GiB (needs " +
             gib(r.config.host_memory) + " GiB; --host-memory)";
    case Reason::slower:
      return fixed(r.amount, 1) + "% " + behind_word(o);
    case Reason::batch_unreachable:
      return "batch not reachable: " + r.detail;
    case Reason::unsupported:
      return "unsupported: " + r.detail;
    case Reason::past_deadline:
      return "misses --max-hours by " + fixed(r.amount, 1) + " h";
  }
  return r.detail;
}

void print_header(std::ostream& out, const PlanReportContext& ctx) {
  const auto& r = ctx.request;
  const auto& t = ctx.topology;
  const auto& res = ctx.result;
  out << "dtplan plan: " << ctx.model.name << ", " << format_thousands(ctx.model.params)
      << " parameters; up to "
      << (r.max_gpus > 0 ? std::min(r.max_gpus, t.gpu_count()) : t.gpu_count()) << " x "
      << ctx.gpu.name << " on " << t.node().name << " x " << t.nodes()
      << (t.nodes() == 1 ? " node" : " nodes") << '\n';
  out << "  target global batch " << r.global_batch;
  if (ctx.model.transformer) {
    out << ", sequence " << (r.seq_len > 0 ? r.seq_len : ctx.model.transformer->max_positions);
  }
  out << "; objective " << planner::name_of(r.objective) << "; " << gib(res.usable) << " of "
      << gib(res.capacity) << " GiB usable per GPU (" << fixed(100.0 * r.headroom, 0)
      << "% headroom); host " << gib(res.host_capacity) << " GiB per node\n";
  const auto n = planner::search_counts(res);
  out << "  searched " << format_thousands(n.evaluated) << " configurations in "
      << seconds(res.elapsed_s) << ": " << n.chosen << " chosen, "
      << format_thousands(n.rejected_evaluated) << " rejected";
  if (n.not_evaluated > 0) {
    out << "; " << format_thousands(n.not_evaluated)
        << " more combinations rejected without evaluation (unsupported, batch unreachable)";
  }
  out << '\n';
}

// For the time and cost objectives: the run the objective measured.
void print_run(std::ostream& out, const planner::PlanRequest& r, const Candidate& b) {
  if (r.objective == planner::Objective::throughput) return;
  const bool cost = r.objective == planner::Objective::cost;
  const double run_s =
      cost ? b.objective * 3600.0 / (static_cast<double>(b.dp) * r.price_per_gpu_hour)
           : b.objective;
  out << "  run: " << duration(run_s);
  if (r.steps == 0 && r.samples == 0) out << " per sample (give --steps or --dataset-size)";
  const double gpu_hours = run_s * static_cast<double>(b.dp) / 3600.0;
  out << ", " << fixed(gpu_hours, 1) << " GPU-hours";
  if (cost)
    out << ", cost " << fixed(b.objective, 2) << " at " << fixed(r.price_per_gpu_hour, 2)
        << " per GPU-hour";
  out << '\n';
}

// Why the best plan's batch differs from the one asked for, and what the exact one costs.
std::string batch_note(const PlanReportContext& ctx) {
  const auto& b = *ctx.result.best;
  const auto g = ctx.request.global_batch;
  const double change =
      100.0 * (static_cast<double>(b.global_batch) / static_cast<double>(g) - 1.0);
  std::string text = "global batch " + std::to_string(g) + " is not reachable on " +
                     std::to_string(b.dp) + " GPUs; this plan uses " +
                     std::to_string(b.global_batch) + " (" + (change > 0 ? "+" : "") +
                     fixed(change, 1) + "%). ";
  if (const auto& e = ctx.result.best_exact) {
    text += "The best plan with exactly " + std::to_string(g) + " (" + config_text(*e) + ") is " +
            fixed(100.0 * (e->objective / b.objective - 1.0), 1) + "% " +
            behind_word(ctx.request.objective);
  } else {
    text += "No plan with exactly " + std::to_string(g) + " fits";
  }
  return text + "; --exact-batch requires it.";
}

void print_best(std::ostream& out, const PlanReportContext& ctx, const PlanExtras& extras) {
  const auto& b = *ctx.result.best;
  out << "\nbest: " << config_text(b) << '\n';
  if (!ctx.result.exact_batch) out << "  note: " << batch_note(ctx) << '\n';
  out << "  " << fixed(b.samples_per_s, 2) << " samples/s";
  if (ctx.model.transformer)
    out << ", " << format_thousands(std::llround(b.tokens_per_s)) << " tokens/s";
  out << ", step " << seconds(b.step_time_s) << ", MFU " << percent(b.mfu) << ", "
      << format_gib(b.memory) << " per GPU\n";
  print_run(out, ctx.request, b);
  if (!extras.estimate) return;
  const auto& e = *extras.estimate;
  const auto& g = e.memory.gpu;
  out << "  memory: model states " << format_gib(g.model_states()) << ", activations "
      << format_gib(g.activations) << ", buffers " << format_gib(g.buffers) << ", overhead "
      << format_gib(g.overhead) << '\n';
  out << '\n';
  print_step_breakdown(out, e, "  ");
  out << '\n';
  print_gantt(out, e.timeline, 72);
}

void print_ranked(std::ostream& out, const PlanReportContext& ctx) {
  const auto& res = ctx.result;
  out << "\nranking (top " << res.ranked.size() << "):\n";
  TextTable t({"#", "strategy", "precision", "micro", "accum", "sync", "GPUs", "checkpointing",
               "offload", "GiB/GPU", "step", "samples/s", "MFU", "behind"});
  const double best = res.ranked.front().objective;
  for (std::size_t i = 0; i < res.ranked.size(); ++i) {
    const auto& c = res.ranked[i];
    t.add_row({std::to_string(i + 1), std::string(name_of(c.strategy)),
               std::string(name_of(c.precision)), std::to_string(c.micro_batch),
               std::to_string(c.grad_accum),
               c.grad_accum == 1 ? "-"
               : c.no_sync       ? "no_sync"
                                 : "every",
               std::to_string(c.dp), std::string(name_of(c.checkpointing)),
               std::string(name_of(c.offload)), gib(c.memory), seconds(c.step_time_s),
               fixed(c.samples_per_s, 2), percent(c.mfu),
               i == 0 ? "-" : fixed(100.0 * (c.objective / best - 1.0), 1) + "%"});
  }
  t.print(out, {1, 2, 5, 7, 8});
}

// The part of the step where a strategy's best loses the most time against the plan's best,
// per sample so that different batches compare.
std::string why_behind(const Candidate& best, const cost::StepTimes& b, const Candidate& other,
                       const cost::StepTimes& o) {
  const double scale =
      static_cast<double>(best.global_batch) / static_cast<double>(other.global_batch);
  const std::pair<const char*, double> parts[] = {
      {"compute", o.compute_s * scale - b.compute_s},
      {"communication not hidden", o.exposed_comm_s * scale - b.exposed_comm_s},
      {"optimizer step", o.optimizer_s * scale - b.optimizer_s},
      {"host transfers", o.host_transfer_s * scale - b.host_transfer_s},
  };
  const auto* worst = &parts[0];
  for (const auto& p : parts)
    worst = p.second > worst->second ? &p : worst;
  if (worst->second <= 0) return "";
  std::string text = std::string(worst->first) + " +" + seconds(worst->second) + " per step";
  if (worst == &parts[0] && other.micro_batch < best.micro_batch) {
    text += " (micro-batch " + std::to_string(other.micro_batch) + ")";
  }
  return text;
}

void print_strategies(std::ostream& out, const PlanReportContext& ctx, const PlanExtras& extras) {
  out << "\nwhy the other strategies lost (each at its best):\n";
  TextTable t({"strategy", "outcome", "where the time goes", "its best or nearest configuration"});
  const auto& best = ctx.result.best;
  for (const auto& o : planner::by_strategy(ctx.result)) {
    const std::string name(name_of(o.strategy));
    if (!o.best) {
      const auto& miss = *o.nearest_miss;
      t.add_row({name, reason_text(miss, ctx.request.objective), "",
                 miss.reason == Reason::unsupported ? "" : config_text(miss.config)});
      continue;
    }
    const bool winner = best && o.best->strategy == best->strategy && o.behind_pct == 0.0;
    std::string why;
    const auto mine = extras.strategy_times.find(o.strategy);
    const auto theirs =
        best ? extras.strategy_times.find(best->strategy) : extras.strategy_times.end();
    if (!winner && mine != extras.strategy_times.end() && theirs != extras.strategy_times.end()) {
      why = why_behind(*best, theirs->second, *o.best, mine->second);
    }
    t.add_row(
        {name,
         winner ? "chosen" : fixed(o.behind_pct, 1) + "% " + behind_word(ctx.request.objective),
         why, config_text(*o.best) + ", " + format_gib(o.best->memory)});
  }
  t.print(out, {1, 2, 3});
}

void print_pareto(std::ostream& out, const PlanReportContext& ctx) {
  out << "\nPareto front, memory against throughput (each uses more memory and is faster than "
         "the one above):\n";
  // At most 12 rows, evenly spaced from the leanest to the fastest.
  const auto& front = ctx.result.pareto;
  const std::size_t shown = std::min<std::size_t>(front.size(), 12);
  TextTable t({"GiB/GPU", "samples/s", "configuration"});
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& c = front[shown == 1 ? 0 : i * (front.size() - 1) / (shown - 1)];
    t.add_row({gib(c.memory), fixed(c.samples_per_s, 2), config_text(c)});
  }
  t.align_first_right();
  t.print(out, {2});
  if (shown < front.size()) {
    out << "  (" << shown << " of " << front.size() << " shown; --json lists all)\n";
  }
}

// Unsupported combinations repeat one reason over many GPU counts: each reason once.
void print_unsupported(std::ostream& out, const std::vector<const Rejected*>& list) {
  std::vector<std::pair<std::string, std::int64_t>> reasons;
  for (const auto* r : list) {
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const auto& p) { return p.first == r->detail; });
    if (it == reasons.end())
      reasons.emplace_back(r->detail, 1);
    else
      ++it->second;
  }
  for (const auto& [detail, count] : reasons) {
    out << "  unsupported (" << count << "x): " << detail << '\n';
  }
}

void print_rejected(std::ostream& out, const PlanReportContext& ctx) {
  const auto& rejected = ctx.result.rejected;
  std::map<Reason, std::vector<const Rejected*>> by_reason;
  for (const auto& r : rejected)
    by_reason[r.reason].push_back(&r);
  // Two kinds of entry: evaluated configurations, and combinations never evaluated.
  const auto n = planner::search_counts(ctx.result);
  auto breakdown = [&by_reason](bool evaluated) {
    std::string text;
    for (const auto& [reason, list] : by_reason) {
      if (planner::was_evaluated(reason) != evaluated) continue;
      text += (text.empty() ? " (" : ", ") +
              format_thousands(static_cast<std::int64_t>(list.size())) + ' ' +
              std::string(planner::name_of(reason));
    }
    return text.empty() ? text : text + ")";
  };
  out << "\nrejected: " << format_thousands(static_cast<std::int64_t>(rejected.size())) << " = "
      << format_thousands(n.rejected_evaluated) << " of the searched configurations"
      << breakdown(true);
  if (n.not_evaluated > 0) {
    out << " + " << format_thousands(n.not_evaluated) << " combinations not evaluated"
        << breakdown(false);
  }
  out << "; --json lists every one\n";
  for (auto& [reason, list] : by_reason) {
    if (reason == Reason::unsupported) {
      print_unsupported(out, list);
      continue;
    }
    // The nearest misses first: least over memory, least behind.
    std::stable_sort(list.begin(), list.end(),
                     [](const Rejected* a, const Rejected* b) { return a->amount < b->amount; });
    const auto shown =
        std::min<std::size_t>(list.size(), static_cast<std::size_t>(ctx.rejected_shown));
    for (std::size_t i = 0; i < shown; ++i) {
      out << "  " << config_text(list[i]->config) << ": "
          << reason_text(*list[i], ctx.request.objective) << '\n';
    }
    if (list.size() > shown) out << "  ... and " << list.size() - shown << " more\n";
  }
}

void print_schedule(std::ostream& out, const planner::Schedule& s) {
  out << "\nschedule:\n";
  TextTable t({"", ""});
  t.add_row({"optimizer steps", format_thousands(s.optimizer_steps)});
  t.add_row({"micro-steps per GPU", format_thousands(s.micro_steps)});
  t.add_row({"samples", format_thousands(s.samples) +
                            (s.epochs > 0 ? " (" + fixed(s.epochs, 3) + " epochs)" : "")});
  t.add_row({"LR scheduler", "num_training_steps " + format_thousands(s.scheduler_steps) +
                                 ", warm-up " + format_thousands(s.warmup_steps) + " steps"});
  t.add_row({"wall-clock", duration(s.time_s) + " (predicted)"});
  if (s.scaled_lr) {
    t.add_row(
        {"learning rate", significant(*s.scaled_lr, 3) + " (linear scaling to this global batch)"});
  }
  t.print(out, {1});
}

nlohmann::json rejected_json(const Rejected& r, planner::Objective o) {
  nlohmann::json j = {{"config", candidate_json(r.config)},
                      {"reason", std::string(planner::name_of(r.reason))},
                      {"detail", reason_text(r, o)}};
  if (r.reason == Reason::out_of_memory || r.reason == Reason::host_out_of_memory) {
    j["over_gib"] = r.amount;
  }
  if (r.reason == Reason::slower) j["behind_pct"] = r.amount;
  if (r.reason == Reason::past_deadline) j["over_hours"] = r.amount;
  return j;
}

nlohmann::json schedule_json(const planner::Schedule& s) {
  nlohmann::json j = {{"optimizer_steps", s.optimizer_steps},
                      {"micro_steps", s.micro_steps},
                      {"samples", s.samples},
                      {"epochs", s.epochs},
                      {"scheduler_steps", s.scheduler_steps},
                      {"warmup_steps", s.warmup_steps},
                      {"time_s", s.time_s}};
  j["scaled_lr"] = s.scaled_lr ? nlohmann::json(*s.scaled_lr) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json outcomes_json(const PlanReportContext& ctx, const PlanExtras& extras) {
  auto out = nlohmann::json::array();
  for (const auto& o : planner::by_strategy(ctx.result)) {
    nlohmann::json j = {{"strategy", std::string(name_of(o.strategy))}};
    if (o.best) {
      j["best"] = candidate_json(*o.best);
      j["behind_pct"] = o.behind_pct;
      if (const auto t = extras.strategy_times.find(o.strategy); t != extras.strategy_times.end()) {
        const auto& st = t->second;
        j["step"] = {{"compute_s", st.compute_s},
                     {"exposed_comm_s", st.exposed_comm_s},
                     {"hidden_comm_s", st.hidden_comm_s},
                     {"optimizer_s", st.optimizer_s},
                     {"host_transfer_s", st.host_transfer_s}};
      }
    } else {
      j["nearest_miss"] = rejected_json(*o.nearest_miss, ctx.request.objective);
    }
    out.push_back(j);
  }
  return out;
}

nlohmann::json best_json(const Candidate& b, const PlanExtras& extras) {
  auto j = candidate_json(b);
  if (extras.estimate) {
    j["memory"] = step_estimate_json(*extras.estimate).at("per_gpu");
    j["hfu"] = extras.estimate->hfu;
    j["step"] = step_estimate_json(*extras.estimate).at("step");
  }
  return j;
}

}  // namespace

nlohmann::json candidate_json(const Candidate& c) {
  nlohmann::json j = {{"strategy", std::string(name_of(c.strategy))},
                      {"precision", std::string(name_of(c.precision))},
                      {"checkpointing", std::string(name_of(c.checkpointing))},
                      {"offload", std::string(name_of(c.offload))},
                      {"dp", c.dp}};
  if (c.micro_batch == 0) return j;  // the rejection covers every micro-batch
  j["micro_batch"] = c.micro_batch;
  j["grad_accum"] = c.grad_accum;
  j["global_batch"] = c.global_batch;
  j["no_sync"] = c.no_sync;
  if (c.memory.value > 0) j["memory_bytes"] = c.memory.value;
  j["host_memory_bytes_per_node"] = c.host_memory.value;
  if (c.step_time_s > 0) {
    j["step_time_s"] = c.step_time_s;
    j["samples_per_s"] = c.samples_per_s;
    j["tokens_per_s"] = c.tokens_per_s;
    j["mfu"] = c.mfu;
    j["objective"] = c.objective;
  }
  return j;
}

nlohmann::json plan_json(const PlanReportContext& ctx, const PlanExtras& extras) {
  const auto& res = ctx.result;
  const auto& r = ctx.request;
  nlohmann::json j;
  j["request"] = {{"global_batch", r.global_batch},
                  {"seq_len", r.seq_len},
                  {"objective", std::string(planner::name_of(r.objective))},
                  {"headroom", r.headroom},
                  {"max_gpus", r.max_gpus},
                  {"exact_batch", r.exact_batch},
                  {"sync", r.sync == planner::Sync::both      ? "both"
                           : r.sync == planner::Sync::no_sync ? "no-sync"
                                                              : "every-micro-step"}};
  j["exact_batch"] = res.exact_batch;
  j["best_exact"] = res.best_exact ? candidate_json(*res.best_exact) : nlohmann::json(nullptr);
  j["capacity"] = {{"bytes", res.capacity.value},
                   {"usable_bytes", res.usable.value},
                   {"headroom", r.headroom},
                   {"host_bytes_per_node", res.host_capacity.value}};
  j["best"] = res.best ? best_json(*res.best, extras) : nlohmann::json(nullptr);
  j["best_estimate"] =
      extras.estimate ? step_estimate_json(*extras.estimate) : nlohmann::json(nullptr);
  j["candidates"] = nlohmann::json::array();
  for (const auto& c : res.ranked)
    j["candidates"].push_back(candidate_json(c));
  j["pareto"] = nlohmann::json::array();
  for (const auto& c : res.pareto)
    j["pareto"].push_back(candidate_json(c));
  j["by_strategy"] = outcomes_json(ctx, extras);
  j["rejected"] = nlohmann::json::array();
  for (const auto& rej : res.rejected)
    j["rejected"].push_back(rejected_json(rej, r.objective));
  auto rate = [&res](double seconds) {
    return seconds > 0 ? static_cast<double>(res.configs_evaluated) / seconds : 0.0;
  };
  // The search itself (caches built) and the whole plan, caches included.
  // configs_evaluated = configs_chosen + configs_rejected;
  // rejected.size() = configs_rejected + combinations_not_evaluated.
  const auto n = planner::search_counts(res);
  j["stats"] = {{"configs_evaluated", res.configs_evaluated},
                {"configs_chosen", n.chosen},
                {"configs_rejected", n.rejected_evaluated},
                {"combinations_not_evaluated", n.not_evaluated},
                {"elapsed_s", res.elapsed_s},
                {"search_s", res.search_s},
                {"search_configs_per_s", rate(res.search_s)},
                {"overall_configs_per_s", rate(res.elapsed_s)}};
  j["suggestions"] = res.suggestions;
  j["schedule"] = extras.schedule ? schedule_json(*extras.schedule) : nlohmann::json(nullptr);
  j["written"] = nlohmann::json::object();
  for (const auto& [what, path] : extras.written)
    j["written"][what] = path;
  j["launch"] = extras.launch;
  j["notes"] = extras.notes;
  return j;
}

void print_plan(std::ostream& out, const PlanReportContext& ctx, const PlanExtras& extras) {
  print_header(out, ctx);
  print_best(out, ctx, extras);
  print_ranked(out, ctx);
  print_strategies(out, ctx, extras);
  print_pareto(out, ctx);
  print_rejected(out, ctx);
  if (extras.schedule) print_schedule(out, *extras.schedule);
  if (!extras.written.empty()) {
    out << '\n';
    for (const auto& [what, path] : extras.written)
      out << "wrote " << what << ": " << path << '\n';
  }
  if (!extras.launch.empty()) {
    out << "\nlaunch:\n";
    for (const auto& line : extras.launch)
      out << "  " << line << '\n';
  }
  for (const auto& note : extras.notes)
    out << "note: " << note << '\n';
}

void print_no_plan(std::ostream& out, const PlanReportContext& ctx, bool layouts_fit) {
  print_header(out, ctx);
  print_strategies(out, ctx, {});
  print_rejected(out, ctx);
  out << (layouts_fit ? "\nno data-parallel configuration fits (the tensor x context x pipeline "
                        "layouts below do); what else would:\n"
                      : "\nnothing fits; what would:\n");
  for (const auto& s : ctx.result.suggestions)
    out << "  - " << s << '\n';
}

}  // namespace dtplan::cli
