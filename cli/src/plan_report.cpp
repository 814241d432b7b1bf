// Layout of plans.
#include "plan_report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "dtplan/cost/layout_text.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/planner/layout_json.hpp"
#include "estimate_report.hpp"
#include "format.hpp"
#include "layout_report.hpp"
#include "reproduce.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

using planner::Candidate;
using planner::LayoutChoice;
using planner::Reason;
using planner::Rejected;
using planner::RejectedChoice;

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

// A data-parallel configuration or a layout in words, led by its strategy or framework.
std::string entry_text(const LayoutChoice& c) {
  if (c.data_parallel) return config_text(*c.data_parallel);
  const auto& l = c.layout->layout;
  return std::string(name_of(l.framework)) + ", " + std::string(name_of(l.precision)) + ", " +
         cost::describe(l);
}

std::string reason_text(Reason reason, double amount, const std::string& detail, Bytes host_memory,
                        planner::Objective o) {
  switch (reason) {
    case Reason::out_of_memory:
      return "out of memory by " + gib_or_mib(amount);
    case Reason::host_out_of_memory:
      // A layout's entry holds the excess alone (its node's need is the capacity plus it).
      return "host memory per node over by " + fixed(amount, 2) + " GiB (" +
             (host_memory.value > 0 ? "needs " + gib(host_memory) + " GiB; " : std::string()) +
             "--host-memory)";
    case Reason::slower:
      return fixed(amount, 1) + "% " + behind_word(o);
    case Reason::batch_unreachable:
      return "batch not reachable: " + with_flags(detail);
    case Reason::unsupported:
      return "unsupported: " + with_setting_names(detail);
    case Reason::past_deadline:
      return "misses --max-hours by " + fixed(amount, 1) + " h";
  }
  return detail;
}

std::string reason_text(const Rejected& r, planner::Objective o) {
  return reason_text(r.reason, r.amount, r.detail, r.config.host_memory, o);
}

std::string reason_text(const planner::UnifiedPlan& p, const RejectedChoice& r,
                        planner::Objective o) {
  const auto* config = p.data_parallel_of(r);
  const Bytes host = config ? config->host_memory : Bytes{};
  return reason_text(r.reason, r.amount, p.detail_of(r), host, o);
}

void print_header(std::ostream& out, const PlanReportContext& ctx) {
  const auto& r = ctx.request;
  const auto& t = ctx.topology;
  const auto& res = ctx.result();
  out << "dtplan plan: " << ctx.model.name << ", " << format_thousands(ctx.model.params)
      << " parameters; up to "
      << (r.max_gpus > 0 ? std::min(r.max_gpus, t.gpu_count()) : t.gpu_count()) << " x "
      << ctx.gpu.name << " on " << t.node().name << " x " << t.nodes()
      << (t.nodes() == 1 ? " node" : " nodes") << '\n';
  std::string target = "target global batch " + std::to_string(r.global_batch);
  if (ctx.model.transformer) {
    target += ", sequence " +
              std::to_string(r.seq_len > 0 ? r.seq_len : ctx.model.transformer->max_positions);
    if (r.attention != Attention::flash || r.attention_kernel != AttentionKernel::framework) {
      TrainingConfig attention;
      attention.attention = r.attention;
      attention.attention_kernel = r.attention_kernel;
      target += ", " + attention_text(ctx.model, attention);
    }
  }
  print_wrapped(out, "  ",
                {{"", target},
                 {"; ", "objective " + std::string(planner::name_of(r.objective))},
                 {"; ", gib(res.usable) + " of " + gib(res.capacity) + " GiB usable per GPU (" +
                            fixed(100.0 * r.headroom, 0) + "% headroom)"},
                 {"; ", "host " + gib(res.host_capacity) + " GiB per node"}});
  const auto n = planner::counts_of(ctx.plan);
  std::vector<LinePart> searched{
      {"", "searched " + format_thousands(n.evaluated) + " configurations in " +
               seconds(ctx.plan.elapsed_s)},
      {" (", format_thousands(n.data_parallel_evaluated) + " data-parallel"},
      {", ", format_thousands(n.layouts_evaluated) + " tensor x context x pipeline layouts):"},
      {" ", std::to_string(n.chosen) + " chosen"},
      {", ", format_thousands(n.rejected_evaluated) + " rejected"}};
  if (n.not_evaluated > 0) {
    searched.push_back({"; ", format_thousands(n.not_evaluated) +
                                  " more combinations rejected without evaluation (" +
                                  n.not_evaluated_why + ")"});
  }
  print_wrapped(out, "  ", searched);
  if (ctx.plan.layouts && !ctx.plan.layouts->no_layout.empty()) {
    out << "  tensor x context x pipeline layouts: " << with_flags(ctx.plan.layouts->no_layout)
        << '\n';
  }
  if (!ctx.plan.layouts_left_out.empty() && ctx.model.transformer) {
    out << "  tensor x context x pipeline layouts not searched: " << ctx.plan.layouts_left_out
        << '\n';
  }
}

// For the time and cost objectives: the run the objective measured.
void print_run(std::ostream& out, const planner::PlanRequest& r, const LayoutChoice& b) {
  if (r.objective == planner::Objective::throughput) return;
  const bool cost = r.objective == planner::Objective::cost;
  const double gpus = static_cast<double>(b.gpus());
  const double run_s =
      cost ? b.objective() * 3600.0 / (gpus * r.price_per_gpu_hour) : b.objective();
  out << "  run: " << duration(run_s);
  if (r.steps == 0 && r.samples == 0) out << " per sample (give --steps or --dataset-size)";
  const double gpu_hours = run_s * gpus / 3600.0;
  out << ", " << fixed(gpu_hours, 1) << " GPU-hours";
  if (cost)
    out << ", cost " << fixed(b.objective(), 2) << " at " << fixed(r.price_per_gpu_hour, 2)
        << " per GPU-hour";
  out << '\n';
}

// Why the best plan's batch differs from the one asked for, and what the exact one costs: the
// best data-parallel plan at that batch, or the best layout (layouts reach it exactly).
std::string batch_note(const PlanReportContext& ctx) {
  const auto& b = *ctx.plan.best()->data_parallel;
  const auto g = ctx.request.global_batch;
  const double change =
      100.0 * (static_cast<double>(b.global_batch) / static_cast<double>(g) - 1.0);
  std::string text = "global batch " + std::to_string(g) + " is not reachable on " +
                     std::to_string(b.dp) + " GPUs; this plan uses " +
                     std::to_string(b.global_batch) + " (" + (change > 0 ? "+" : "") +
                     fixed(change, 1) + "%). ";
  std::optional<LayoutChoice> exact;
  if (const auto& e = ctx.result().best_exact) exact = LayoutChoice{e, std::nullopt};
  const auto& layouts = ctx.plan.layouts;
  if (layouts && !layouts->ranked.empty() &&
      (!exact || layouts->ranked.front().objective < exact->objective())) {
    exact = LayoutChoice{std::nullopt, layouts->ranked.front()};
  }
  if (exact) {
    text += "The best plan with exactly " + std::to_string(g) + " (" + entry_text(*exact) +
            ") is " + fixed(ctx.plan.behind_pct(exact->objective()), 1) + "% " +
            behind_word(ctx.request.objective);
  } else {
    text += "No plan with exactly " + std::to_string(g) + " fits";
  }
  return text + "; --exact-batch requires it.";
}

void print_best_layout(std::ostream& out, const PlanReportContext& ctx) {
  const auto& b = *ctx.plan.best();
  out << "\nbest: " << entry_text(b) << '\n';
  print_layout_figures(out, *b.layout, ctx.gpu, "  ");
  print_run(out, ctx.request, b);
}

void print_best(std::ostream& out, const PlanReportContext& ctx, const PlanExtras& extras) {
  if (ctx.plan.best()->layout) {
    print_best_layout(out, ctx);
    return;
  }
  const auto& b = *ctx.plan.best()->data_parallel;
  out << "\nbest: " << config_text(b) << '\n';
  if (b.global_batch != ctx.request.global_batch) out << "  note: " << batch_note(ctx) << '\n';
  out << "  " << fixed(b.samples_per_s, 2) << " samples/s";
  if (ctx.model.transformer)
    out << ", " << format_thousands(std::llround(b.tokens_per_s)) << " tokens/s";
  out << ", step " << seconds(b.step_time_s) << ", MFU " << percent(b.mfu) << ", "
      << format_gib(b.memory) << " per GPU\n";
  print_run(out, ctx.request, *ctx.plan.best());
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

// A layout's particulars beyond tp, cp and pp: who holds the states, interleaving and
// schedule, sequence parallelism, the context exchange; "-" for a data-parallel strategy.
std::string layout_cell(const LayoutChoice& c) {
  if (!c.layout) return "-";
  const auto& l = c.layout->layout;
  std::string text = cost::states_name(l);
  if (l.cp > 1) text += ", " + std::string(name_of(l.cp_comm));
  if (l.ep > 1) text += ", ep " + std::to_string(l.ep);
  if (l.etp > 0 && l.etp != l.tp) text += ", etp " + std::to_string(l.etp);
  if (l.pp > 1) text += ", " + std::string(name_of(l.pipeline_schedule()));
  if (l.interleave > 1) text += " v" + std::to_string(l.interleave);
  if (l.sequence_parallel) text += ", sp";
  if (l.fp8 != Fp8Recipe::none) text += ", fp8 " + std::string(name_of(l.fp8));
  return text;
}

std::vector<std::string> ranked_row(std::size_t i, const LayoutChoice& c,
                                    const std::string& behind) {
  const auto* d = c.data_parallel ? &*c.data_parallel : nullptr;
  const auto* l = c.layout ? &c.layout->layout : nullptr;
  const auto accum = d ? d->grad_accum : l->micro_batches;
  const std::string sync = !d || d->grad_accum == 1 ? "-" : d->no_sync ? "no_sync" : "every";
  return {std::to_string(i + 1),
          c.family(),
          std::string(name_of(d ? d->precision : l->precision)),
          std::to_string(c.gpus()),
          std::to_string(l ? l->tp : 1),
          std::to_string(l ? l->cp : 1),
          std::to_string(l ? l->pp : 1),
          layout_cell(c),
          std::to_string(d ? d->micro_batch : l->micro_batch),
          std::to_string(accum),
          sync,
          std::string(name_of(d ? d->checkpointing : l->recompute)),
          std::string(name_of(d ? d->offload : l->offload)),
          gib(c.memory()),
          seconds(c.step_s()),
          fixed(c.samples_per_s(), 2),
          percent(c.mfu()),
          behind};
}

// The layout column's words, those the ranking uses, with the estimate flags that set them.
void print_layout_legend(std::ostream& out, const std::vector<LayoutChoice>& ranked) {
  const std::array<std::pair<const char*, const char*>, 5> words{{
      {"dist-opt", "Megatron-LM's distributed optimizer (--sharding optimizer)"},
      {"replicated", "states on every data-parallel rank (--sharding none)"},
      {"fsdp2-keep",
       "FSDP2 keeping each block gathered from forward to backward (--sharding "
       "gradients)"},
      {"fsdp2", "FSDP2 gathering each block per pass (--sharding parameters)"},
      {"sp", "sequence parallelism (--sp)"},
  }};
  std::vector<std::string> used;
  for (const auto& entry : words) {
    const std::string w(entry.first);  // not a structured binding: lambdas capture it (clang 14)
    const bool seen = std::any_of(ranked.begin(), ranked.end(), [&](const LayoutChoice& c) {
      const auto cell = layout_cell(c);
      // a whole word of the cell: "fsdp2" is not the start of "fsdp2-keep"
      for (std::size_t at = cell.find(w); at != std::string::npos; at = cell.find(w, at + 1)) {
        const std::size_t end = at + w.size();
        if ((at == 0 || cell[at - 1] == ' ') && (end == cell.size() || cell[end] == ','))
          return true;
      }
      return false;
    });
    if (seen) used.push_back(w + ": " + entry.second);
  }
  if (std::any_of(ranked.begin(), ranked.end(), [](const LayoutChoice& c) {
        return layout_cell(c).find(" v") != std::string::npos;
      })) {
    used.emplace_back("vN: N interleaved model chunks per GPU (--interleave N)");
  }
  if (used.empty()) return;
  out << "  layout column: ";
  for (std::size_t i = 0; i < used.size(); ++i)
    out << (i ? "; " : "") << used[i];
  out << '\n';
}

void print_ranked(std::ostream& out, const PlanReportContext& ctx) {
  const auto& plan = ctx.plan;
  out << "\nranking (top " << plan.ranked.size() << "), "
      << (plan.layouts ? "data-parallel strategies and tensor x context x pipeline layouts "
                         "together:\n"
                       : "data-parallel strategies (tensor x context x pipeline layouts not "
                         "searched):\n");
  // The column says what the objective ranks by: step time per sample, cost, or time to train.
  const std::string behind = ctx.request.objective == planner::Objective::cost   ? "costlier"
                             : ctx.request.objective == planner::Objective::time ? "longer run"
                                                                                 : "behind";
  TextTable t({"#", "strategy", "precision", "GPUs", "tp", "cp", "pp", "layout", "micro", "accum",
               "sync", "checkpointing", "offload", "GiB/GPU", "step", "samples/s", "MFU", behind});
  for (std::size_t i = 0; i < plan.ranked.size(); ++i) {
    const auto& c = plan.ranked[i];
    t.add_row(ranked_row(i, c, i == 0 ? "-" : fixed(plan.behind_pct(c.objective()), 1) + "%"));
  }
  t.print(out, {1, 2, 7, 10, 11, 12});
  print_layout_legend(out, plan.ranked);
}

// How many runners-up of the ranking are closer to the best than dtplan's median error on
// published runs like the best: their measured order could be either way.
std::int64_t within_error(const planner::UnifiedPlan& plan, const BandReport& band) {
  if (!band.band) return 0;
  std::int64_t close = 0;
  for (std::size_t i = 1; i < plan.ranked.size(); ++i) {
    close += plan.behind_pct(plan.ranked[i].objective()) < 100.0 * band.band->median_abs_error;
  }
  return close;
}

void print_close_calls(std::ostream& out, const PlanReportContext& ctx, const BandReport& band) {
  const auto close = within_error(ctx.plan, band);
  if (close == 0) return;
  out << "  " << (close == 1 ? "#2 is" : "#2 to #" + std::to_string(close + 1) + " are")
      << " within " << percent(band.band->median_abs_error)
      << " of the best, dtplan's median error on published runs of " << band.group
      << ": measured, they could rank either way (dtplan autotune runs candidates and "
         "keeps the fastest)\n";
}

// Where a step goes, in parts every entry has.
struct StepParts {
  double compute_s = 0, bubble_s = 0, comm_s = 0, optimizer_s = 0, host_s = 0;
};

std::optional<StepParts> parts_of(const LayoutChoice& c, const PlanExtras& extras) {
  if (c.layout) {
    const auto& t = c.layout->time;
    const double m = static_cast<double>(c.layout->layout.micro_batches);
    return StepParts{
        t.compute_s * m, t.bubble_s,
        (t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.p2p_s + t.fsdp_comm_s) * m + t.dp_sync_s,
        t.optimizer_s, 0};
  }
  const auto found = extras.strategy_times.find(c.data_parallel->strategy);
  if (found == extras.strategy_times.end()) return std::nullopt;
  const auto& st = found->second;
  return StepParts{st.compute_s, 0, st.exposed_comm_s, st.optimizer_s, st.host_transfer_s};
}

// The part of the step where an entry loses the most time against the plan's best, per
// sample so that different batches compare.
std::string why_behind(const LayoutChoice& best, const StepParts& b, const LayoutChoice& other,
                       const StepParts& o) {
  const double scale =
      static_cast<double>(best.global_batch()) / static_cast<double>(other.global_batch());
  const std::pair<const char*, double> parts[] = {
      {"compute", o.compute_s * scale - b.compute_s},
      {"pipeline bubble", o.bubble_s * scale - b.bubble_s},
      {"communication not hidden", o.comm_s * scale - b.comm_s},
      {"optimizer step", o.optimizer_s * scale - b.optimizer_s},
      {"host transfers", o.host_s * scale - b.host_s},
  };
  const auto* worst = &parts[0];
  for (const auto& p : parts)
    worst = p.second > worst->second ? &p : worst;
  if (worst->second <= 0) return "";
  std::string text = std::string(worst->first) + " +" + seconds(worst->second) + " per step";
  const auto* od = other.data_parallel ? &*other.data_parallel : nullptr;
  const auto* bd = best.data_parallel ? &*best.data_parallel : nullptr;
  if (worst == &parts[0] && od && bd && od->micro_batch < bd->micro_batch) {
    text += " (micro-batch " + std::to_string(od->micro_batch) + ")";
  }
  return text;
}

std::vector<std::string> outcome_row(const PlanReportContext& ctx, const PlanExtras& extras,
                                     const planner::FamilyOutcome& o) {
  const auto objective = ctx.request.objective;
  if (o.nearest_miss) {
    const auto& miss = *o.nearest_miss;
    return {o.family, reason_text(miss, objective), "",
            miss.reason == Reason::unsupported ? "" : config_text(miss.config)};
  }
  if (o.nearest_layout_miss) {
    const auto& miss = *o.nearest_layout_miss;
    const double over =
        (static_cast<double>(miss.memory.total().value) - double(ctx.result().usable.value)) /
        double(1LL << 30);
    return {o.family, "out of memory by " + gib_or_mib(over), "", entry_text({std::nullopt, miss})};
  }
  const auto& best = *ctx.plan.best();
  const bool winner = o.family == best.family() && o.behind_pct == 0.0;
  // Its best runs more GPUs than samples, so a larger batch, and stays out of the ranking while
  // some plan runs the batch itself (unified_plan.cpp, merge).
  const auto g = ctx.request.global_batch;
  if (!winner && o.best->data_parallel && o.best->data_parallel->dp > g &&
      best.global_batch() == g) {
    const double change =
        100.0 * (static_cast<double>(o.best->global_batch()) / static_cast<double>(g) - 1.0);
    return {o.family,
            "batch " + std::to_string(o.best->global_batch()) + " (+" + fixed(change, 1) +
                "%): more GPUs than samples",
            "", entry_text(*o.best) + ", " + format_gib(o.best->memory())};
  }
  std::string why;
  const auto mine = parts_of(*o.best, extras);
  const auto theirs = parts_of(best, extras);
  if (!winner && mine && theirs) why = why_behind(best, *theirs, *o.best, *mine);
  return {o.family, winner ? "chosen" : fixed(o.behind_pct, 1) + "% " + behind_word(objective), why,
          entry_text(*o.best) + ", " + format_gib(o.best->memory())};
}

void print_strategies(std::ostream& out, const PlanReportContext& ctx, const PlanExtras& extras) {
  out << "\nwhy the other strategies lost (each at its best):\n";
  TextTable t({"strategy", "outcome", "where the time goes", "its best or nearest configuration"});
  for (const auto& o : planner::by_family(ctx.plan))
    t.add_row(outcome_row(ctx, extras, o));
  t.print(out, {1, 2, 3});
}

void print_pareto(std::ostream& out, const PlanReportContext& ctx) {
  out << "\nPareto front, memory against throughput (each uses more memory and is faster than "
         "the one above):\n";
  // At most 12 rows, evenly spaced from the leanest to the fastest.
  const auto& front = ctx.plan.pareto;
  const std::size_t shown = std::min<std::size_t>(front.size(), 12);
  std::vector<const LayoutChoice*> rows;
  for (std::size_t i = 0; i < shown; ++i)
    rows.push_back(&front[shown == 1 ? 0 : i * (front.size() - 1) / (shown - 1)]);
  // Enough decimals that each row reads faster than the one above (10.540 and 10.545 samples/s
  // both read 10.54 at two), up to six.
  int decimals = 2;
  const auto distinct = [&] {
    for (std::size_t i = 1; i < rows.size(); ++i) {
      if (fixed(rows[i]->samples_per_s(), decimals) ==
          fixed(rows[i - 1]->samples_per_s(), decimals))
        return false;
    }
    return true;
  };
  while (decimals < 6 && !distinct())
    ++decimals;
  TextTable t({"GiB/GPU", "samples/s", "configuration"});
  for (const auto* c : rows)
    t.add_row({gib(c->memory()), fixed(c->samples_per_s(), decimals), entry_text(*c)});
  t.align_first_right();
  t.print(out, {2});
  if (shown < front.size()) {
    out << "  (" << shown << " of " << front.size() << " shown; --json lists all)\n";
  }
}

// Unsupported combinations repeat one reason over many GPU counts: each reason once, with how
// many entries give it, in the order met.
std::vector<std::pair<std::string, std::int64_t>> detail_counts(
    const planner::UnifiedPlan& p, const std::vector<const RejectedChoice*>& list) {
  std::vector<std::pair<std::string, std::int64_t>> reasons;
  for (const auto* r : list) {
    const auto& detail = p.detail_of(*r);
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const auto& counted) { return counted.first == detail; });
    if (it == reasons.end())
      reasons.emplace_back(detail, 1);
    else
      ++it->second;
  }
  return reasons;
}

void print_unsupported(std::ostream& out, const planner::UnifiedPlan& p,
                       const std::vector<const RejectedChoice*>& list) {
  for (const auto& [detail, count] : detail_counts(p, list)) {
    out << "  unsupported (" << count << "x): " << with_setting_names(detail) << '\n';
  }
}

// The rejected entries by reason, each reason's nearest misses first (least over memory, least
// behind; entries with equal amounts in the order the search met them).
std::map<Reason, std::vector<const RejectedChoice*>> rejected_by_reason(
    const planner::UnifiedPlan& p) {
  std::map<Reason, std::vector<const RejectedChoice*>> by_reason;
  for (const auto& r : p.rejected)
    by_reason[r.reason].push_back(&r);
  for (auto& [reason, list] : by_reason) {
    std::stable_sort(
        list.begin(), list.end(),
        [](const RejectedChoice* a, const RejectedChoice* b) { return a->amount < b->amount; });
  }
  return by_reason;
}

// Entries of one reason, listed and omitted (the search keeps the nearest few of 10^5).
std::int64_t count_of(const planner::UnifiedPlan& p, Reason reason,
                      const std::vector<const RejectedChoice*>& list) {
  return static_cast<std::int64_t>(list.size()) + p.omitted(reason);
}

void print_rejected(std::ostream& out, const PlanReportContext& ctx) {
  const auto by_reason = rejected_by_reason(ctx.plan);
  // Two kinds of entry: evaluated configurations, and combinations never evaluated.
  const auto n = planner::counts_of(ctx.plan);
  auto breakdown = [&](bool evaluated) {
    std::string text;
    for (const auto& [reason, list] : by_reason) {
      if (planner::was_evaluated(reason) != evaluated) continue;
      text += (text.empty() ? " (" : ", ") + format_thousands(count_of(ctx.plan, reason, list)) +
              ' ' + std::string(planner::name_of(reason));
    }
    return text.empty() ? text : text + ")";
  };
  out << "\nrejected: " << format_thousands(ctx.plan.rejected_total()) << " = "
      << format_thousands(n.rejected_evaluated) << " of the searched configurations"
      << breakdown(true);
  if (n.not_evaluated > 0) {
    out << " + " << format_thousands(n.not_evaluated) << " combinations not evaluated"
        << breakdown(false);
  }
  out << "; --json --all-rejected lists every one\n";
  for (const auto& [reason, list] : by_reason) {
    if (reason == Reason::unsupported) {
      print_unsupported(out, ctx.plan, list);
      continue;
    }
    const auto shown =
        std::min<std::size_t>(list.size(), static_cast<std::size_t>(ctx.rejected_shown));
    for (std::size_t i = 0; i < shown; ++i) {
      out << "  " << entry_text(ctx.plan.choice_of(*list[i])) << ": "
          << reason_text(ctx.plan, *list[i], ctx.request.objective) << '\n';
    }
    if (const auto count = count_of(ctx.plan, reason, list);
        count > static_cast<std::int64_t>(shown))
      out << "  ... and " << format_thousands(count - static_cast<std::int64_t>(shown))
          << " more\n";
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
                                 ", warm-up " + format_thousands(s.warmup_steps) + " steps (" +
                                 percent(s.warmup_ratio) + " of them, --warmup-ratio)"});
  t.add_row({"wall-clock", duration(s.time_s) + " (predicted)"});
  if (s.scaled_lr) {
    t.add_row(
        {"learning rate", significant(*s.scaled_lr, 3) + " (linear scaling to this global batch)"});
  }
  t.print(out, {1});
}

nlohmann::json rejected_fields(Reason reason, double amount) {
  nlohmann::json j = {{"reason", std::string(planner::name_of(reason))}};
  if (reason == Reason::out_of_memory || reason == Reason::host_out_of_memory) {
    j["over_gib"] = amount;
  }
  if (reason == Reason::slower) j["behind_pct"] = amount;
  if (reason == Reason::past_deadline) j["over_hours"] = amount;
  return j;
}

nlohmann::json rejected_json(const Rejected& r, planner::Objective o) {
  auto j = rejected_fields(r.reason, r.amount);
  j["config"] = candidate_json(r.config);
  j["detail"] = reason_text(r, o);
  return j;
}

// One entry of a plan with its full layout under "layout" (the same keys for both families)
// and its figures; a data-parallel entry keeps its strategy's keys beside them, a layout its
// memory by component and step by part.
nlohmann::json entry_json(const LayoutChoice& c, const PlanReportContext& ctx) {
  auto j = c.data_parallel ? candidate_json(*c.data_parallel) : planner::to_json(*c.layout);
  j["layout"] = planner::layout_json(c, ctx.topology.gpus_per_node());
  j["gpus"] = c.gpus();
  // One shape for both kinds of entry, as the text's columns read: a layout's framework is its
  // strategy and its recomputation its checkpointing.
  j["strategy"] = c.family();
  if (c.layout) j["checkpointing"] = std::string(name_of(c.layout->layout.recompute));
  if (c.data_parallel && c.data_parallel->micro_batch == 0) return j;  // a whole family
  j["global_batch"] = c.global_batch();
  j["memory_bytes"] = c.memory().value;
  if (c.step_s() > 0) {
    j["step_time_s"] = c.step_s();
    j["samples_per_s"] = c.samples_per_s();
    j["tokens_per_s"] = c.tokens_per_s();
    j["mfu"] = c.mfu();
    j["objective"] = c.objective();
  }
  return j;
}

nlohmann::json rejected_json(const RejectedChoice& r, const PlanReportContext& ctx) {
  auto j = rejected_fields(r.reason, r.amount);
  j["config"] = entry_json(ctx.plan.choice_of(r), ctx);
  j["config"].erase("collectives");  // a rejected layout's figures, not its collectives
  j["detail"] = reason_text(ctx.plan, r, ctx.request.objective);
  return j;
}

// Per reason: how many entries, whether they were evaluated, the --show-rejected nearest
// misses in full, and for combinations never evaluated each distinct reason with its count.
// Every entry is in "rejected" with --all-rejected (a large plan rejects 10^5 of them).
nlohmann::json rejected_summary_json(const PlanReportContext& ctx) {
  auto out = nlohmann::json::array();
  for (const auto& [reason, list] : rejected_by_reason(ctx.plan)) {
    nlohmann::json j = {{"reason", std::string(planner::name_of(reason))},
                        {"count", count_of(ctx.plan, reason, list)},
                        {"evaluated", planner::was_evaluated(reason)}};
    const auto shown =
        std::min<std::size_t>(list.size(), static_cast<std::size_t>(ctx.rejected_shown));
    j["nearest"] = nlohmann::json::array();
    for (std::size_t i = 0; i < shown; ++i)
      j["nearest"].push_back(rejected_json(*list[i], ctx));
    if (!planner::was_evaluated(reason)) {
      j["details"] = nlohmann::json::array();
      for (const auto& [detail, count] : detail_counts(ctx.plan, list))
        j["details"].push_back({{"detail", with_setting_names(detail)}, {"count", count}});
    }
    out.push_back(j);
  }
  return out;
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
  for (const auto& o : planner::by_family(ctx.plan)) {
    nlohmann::json j = {{"strategy", o.family}};
    if (o.best) {
      j["best"] = entry_json(*o.best, ctx);
      j["behind_pct"] = o.behind_pct;
      if (const auto parts = parts_of(*o.best, extras)) {
        j["step"] = {{"compute_s", parts->compute_s},
                     {"bubble_s", parts->bubble_s},
                     {"exposed_comm_s", parts->comm_s},
                     {"optimizer_s", parts->optimizer_s},
                     {"host_transfer_s", parts->host_s}};
      }
    } else if (o.nearest_miss) {
      j["nearest_miss"] = rejected_json(*o.nearest_miss, ctx.request.objective);
    } else if (o.nearest_layout_miss) {
      j["nearest_miss"] = {{"config", entry_json({std::nullopt, *o.nearest_layout_miss}, ctx)},
                           {"reason", "out_of_memory"}};
    }
    out.push_back(j);
  }
  return out;
}

nlohmann::json best_json(const PlanReportContext& ctx, const PlanExtras& extras) {
  const auto& b = *ctx.plan.best();
  auto j = entry_json(b, ctx);
  if (b.data_parallel && extras.estimate) {
    j["memory"] = step_estimate_json(*extras.estimate).at("per_gpu");
    j["hfu"] = extras.estimate->hfu;
    j["step"] = step_estimate_json(*extras.estimate).at("step");
  }
  return j;
}

nlohmann::json layout_search_json(const planner::UnifiedPlan& p) {
  if (!p.layouts) return {{"searched", false}, {"left_out", p.layouts_left_out}};
  const auto& x = *p.layouts;
  return {{"searched", true},
          // evaluated = fit + out_of_memory + host_out_of_memory + past_deadline
          {"evaluated", x.evaluated},
          {"fit", x.fit},
          {"out_of_memory", x.out_of_memory},
          {"host_out_of_memory", x.host_out_of_memory},
          {"past_deadline", x.past_deadline},
          {"no_layout", with_flags(x.no_layout)},
          {"elapsed_s", x.elapsed_s}};
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
  const auto& plan = ctx.plan;
  const auto& res = ctx.result();
  const auto& r = ctx.request;
  nlohmann::json j;
  j["request"] = {{"global_batch", r.global_batch},
                  {"seq_len", r.seq_len},
                  {"objective", std::string(planner::name_of(r.objective))},
                  {"headroom", r.headroom},
                  {"max_gpus", r.max_gpus},
                  {"exact_batch", r.exact_batch},
                  {"optimizer_impl", name_of(r.optimizer_impl)},
                  {"layer_kernels", name_of(r.layer_kernels)},
                  {"zero_grad", name_of(r.zero_grad)},
                  {"sync", r.sync == planner::Sync::both      ? "both"
                           : r.sync == planner::Sync::no_sync ? "no-sync"
                                                              : "every-micro-step"}};
  const auto* best = plan.best();
  j["exact_batch"] = !best || best->global_batch() == r.global_batch;
  j["best_exact"] = res.best_exact ? candidate_json(*res.best_exact) : nlohmann::json(nullptr);
  j["capacity"] = {{"bytes", res.capacity.value},
                   {"usable_bytes", res.usable.value},
                   {"headroom", r.headroom},
                   {"host_bytes_per_node", res.host_capacity.value}};
  j["best"] = best ? best_json(ctx, extras) : nlohmann::json(nullptr);
  j["error_band"] = extras.band ? band_json(*extras.band) : nlohmann::json(nullptr);
  // Each ranked entry on its own: the estimate command that prices it as the plan did.
  const auto reproduce = [&](const LayoutChoice& c) -> nlohmann::json {
    if (extras.plan_args.empty()) return nullptr;
    const auto args = estimate_args(extras.plan_args, c);
    return {{"args", args}, {"line", shell_line(args)}};
  };
  j["reproduce"] = plan.best() ? reproduce(*plan.best()) : nlohmann::json(nullptr);
  // The runners-up (ranked[1..]) closer to the best than the band's median error.
  j["within_error_band"] = extras.band ? within_error(plan, *extras.band) : 0;
  j["best_estimate"] =
      extras.estimate ? step_estimate_json(*extras.estimate) : nlohmann::json(nullptr);
  j["candidates"] = nlohmann::json::array();
  for (const auto& c : plan.ranked) {
    j["candidates"].push_back(entry_json(c, ctx));
    j["candidates"].back()["estimate"] = reproduce(c);
  }
  j["pareto"] = nlohmann::json::array();
  for (const auto& c : plan.pareto)
    j["pareto"].push_back(entry_json(c, ctx));
  j["by_strategy"] = outcomes_json(ctx, extras);
  j["rejected_summary"] = rejected_summary_json(ctx);
  if (ctx.all_rejected) {
    j["rejected"] = nlohmann::json::array();
    for (const auto& rej : plan.rejected)
      j["rejected"].push_back(rejected_json(rej, ctx));
  }
  auto rate = [&res](double seconds) {
    return seconds > 0 ? static_cast<double>(res.configs_evaluated) / seconds : 0.0;
  };
  // configs_evaluated = configs_chosen + configs_rejected (both families);
  // rejected_total() = configs_rejected + combinations_not_evaluated.
  const auto n = planner::counts_of(plan);
  j["stats"] = {{"configs_evaluated", n.evaluated},
                {"data_parallel_evaluated", n.data_parallel_evaluated},
                {"layouts_evaluated", n.layouts_evaluated},
                {"configs_chosen", n.chosen},
                {"configs_rejected", n.rejected_evaluated},
                {"combinations_not_evaluated", n.not_evaluated},
                {"elapsed_s", plan.elapsed_s},
                {"search_s", res.search_s},
                {"search_configs_per_s", rate(res.search_s)},
                {"overall_configs_per_s", rate(res.elapsed_s)}};
  j["layout_search"] = layout_search_json(plan);
  j["suggestions"] = nlohmann::json::array();
  for (const auto& s : plan.suggestions)
    j["suggestions"].push_back(with_flags(s));
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
  if (extras.band) print_band(out, *extras.band);
  if (!extras.plan_args.empty()) {
    out << "  on its own (timeline, --trace, exports): "
        << shell_line(estimate_args(extras.plan_args, *ctx.plan.best())) << '\n';
  }
  print_ranked(out, ctx);
  if (extras.band) print_close_calls(out, ctx, *extras.band);
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

void print_no_plan(std::ostream& out, const PlanReportContext& ctx) {
  print_header(out, ctx);
  print_strategies(out, ctx, {});
  print_rejected(out, ctx);
  out << "\nnothing fits; what would:\n";
  for (const auto& s : ctx.plan.suggestions)
    out << "  - " << with_flags(s) << '\n';
}

}  // namespace dtplan::cli
