// The configuration search: caches, enumeration, ranking.
#include "search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "pareto.hpp"

namespace dtplan::planner::detail {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class E, std::size_t N>
std::vector<E> all_of(const std::array<NamedValue<E>, N>& table) {
  std::vector<E> out;
  out.reserve(N);
  for (const auto& row : table)
    out.push_back(row.value);
  return out;
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> low;
  std::vector<std::int64_t> high;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

}  // namespace

Search::Search(const Inputs& in)
    : in_(in),
      goal_(goal_of(in.request)),
      figures_(in.model, in.overheads),
      rejected_(in.request.rejected_kept) {
  const auto& m = in.model;
  if (!m.transformer && !m.layers) {
    throw Error("the planner needs layer shapes to time compute: give {model}, not {params}");
  }
  if (in.request.global_batch < 1) throw FieldError("global_batch", "must be a positive integer");
  if (in.request.rejected_kept < -1) {
    throw Error("rejected configurations kept: " + std::to_string(in.request.rejected_kept) +
                " (must be -1 for every one, or 0 or more)");
  }
  sequence_length(m, in.request.seq_len);  // a request-level error, before any search
  result_.capacity = in.gpu.memory;
  result_.usable = Bytes{static_cast<std::int64_t>(
      std::floor(static_cast<double>(in.gpu.memory.value) * (1.0 - in.request.headroom)))};
  result_.host_capacity =
      in.request.host_memory.value_or(in.topology.node().host_memory_or_default());
}

PlanResult Search::run() {
  const auto t0 = Clock::now();
  set_axes();
  prepare_groups();
  prepare_memory();
  shapes_ = shapes();
  prepare_compute();
  const auto t1 = Clock::now();
  const auto steps = strategies_.size() * dps_.size() + 1;
  tell_progress(steps - 1, "searching " + std::to_string(shapes_.size()) + " shapes");
  search();
  tell_progress(steps, "done");
  result_.search_s = seconds_since(t1);
  finish();
  result_.elapsed_s = seconds_since(t0);
  return result_;
}

void Search::set_axes() {
  const auto& r = in_.request;
  strategies_ = r.strategies.empty() ? all_of(kStrategies) : r.strategies;
  precisions_ = r.precisions;
  if (precisions_.empty()) precisions_ = default_precisions(in_.gpu);
  checkpointings_ = r.checkpointing;
  if (checkpointings_.empty()) {
    checkpointings_ = in_.model.transformer ? all_of(kCheckpointings)
                                            : std::vector<Checkpointing>{Checkpointing::none};
  }
  offloads_ = r.offloads.empty() ? all_of(kOffloads) : r.offloads;
  const auto& t = in_.topology;
  dps_ = gpu_counts(t.gpus_per_node(), t.nodes(), r.max_gpus > 0 ? r.max_gpus : t.gpu_count());
  if (dps_.empty()) throw FieldError("max_gpus", "no GPU count to search");
}

TrainingConfig Search::config(std::size_t s, std::size_t p, std::size_t d, std::size_t c,
                              std::size_t o, std::int64_t mb, std::int64_t accum) const {
  Candidate k;
  k.grad_accum = accum;
  k.strategy = strategies_[s];
  k.precision = precisions_[p];
  k.dp = dps_[d];
  k.micro_batch = mb;
  k.checkpointing = checkpointings_[c];
  k.offload = offloads_[o];
  return training_config(k, in_.request, in_.topology.gpus_per_node(),
                         in_.topology.node().gpus_per_host);
}

std::size_t Search::group_index(std::size_t s, std::size_t p, std::size_t d, std::size_t o,
                                std::size_t y) const {
  return (((s * precisions_.size() + p) * dps_.size() + d) * offloads_.size() + o) * 2 + y;
}

std::size_t Search::memory_index(std::size_t g, std::size_t c, bool accumulating) const {
  return (g * checkpointings_.size() + c) * 2 + (accumulating ? 1 : 0);
}

Candidate Search::candidate(const Shape& shape) const {
  Candidate c;
  c.dp = dps_[shape.dp_index];
  c.micro_batch = micro_batches_.empty() ? 0 : micro_batches_[shape.mb_index];
  c.grad_accum = shape.grad_accum;
  c.global_batch = shape.global_batch;
  return c;
}

void Search::prepare_groups() {
  const auto& t = in_.topology;
  const auto& context = in_.comm;
  for (const auto dp : dps_) {
    all_models_.push_back(std::make_unique<cost::CommModel>(t, in_.table, dp, context));
    node_models_.push_back(
        std::make_unique<cost::CommModel>(t, in_.table, std::min(dp, t.gpus_per_node()), context));
  }
  groups_.resize(strategies_.size() * precisions_.size() * dps_.size() * offloads_.size() * 2);
  for (std::size_t s = 0; s < strategies_.size(); ++s)
    for (std::size_t p = 0; p < precisions_.size(); ++p)
      for (std::size_t d = 0; d < dps_.size(); ++d) {
        if (p == 0)
          tell_progress(s * dps_.size() + d, std::string(name_of(strategies_[s])) +
                                                 " communication over " + std::to_string(dps_[d]) +
                                                 " GPUs");
        for (std::size_t o = 0; o < offloads_.size(); ++o) {
          try {
            for (std::size_t y = 0; y < 2; ++y)
              groups_[group_index(s, p, d, o, y)] = group(s, p, d, o, y);
          } catch (const Error& e) {
            reject_family(s, p, d, o, std::nullopt, e.what());
          }
        }
      }
}

// Steps: one per strategy and GPU count prepared (their communication is most of the time
// on large clusters), then the search.
void Search::tell_progress(std::size_t done, const std::string& what) const {
  if (!in_.request.progress) return;
  const auto steps = strategies_.size() * dps_.size() + 1;
  in_.request.progress(static_cast<std::int64_t>(done), static_cast<std::int64_t>(steps), what);
}

// Communication (y = 0: with no_sync, 1: synchronising every micro-step), optimizer and host
// time of one (strategy, precision, GPUs, offload).
Group Search::group(std::size_t s, std::size_t p, std::size_t d, std::size_t o,
                    std::size_t y) const {
  const auto c = config(s, p, d, 0, o, 1);
  cost::check_supported(c);
  Group g;
  const auto comm = cost::estimate_training_comm(
      in_.model, c, 1, y == 0, {*all_models_[d], *node_models_[d], in_.compute.kernel_overhead_s},
      in_.overheads);
  g.ops = comm.ops;
  const auto full = std::find(checkpointings_.begin(), checkpointings_.end(), Checkpointing::full);
  if (full != checkpointings_.end()) {
    auto recomputing = c;
    recomputing.checkpointing = Checkpointing::full;
    if (cost::recompute_regather(recomputing)) {
      g.ops_full_recompute =
          cost::estimate_training_comm(
              in_.model, recomputing, 1, y == 0,
              {*all_models_[d], *node_models_[d], in_.compute.kernel_overhead_s}, in_.overheads)
              .ops;
    }
  }
  g.optimizer_s = cost::optimizer_step_s(in_.model, c, in_.gpu, in_.compute);
  g.host_s = cost::offload_transfers(in_.model, c, in_.gpu, in_.compute, g.ops);
  if (!g.ops_full_recompute.empty())
    cost::offload_transfers(in_.model, c, in_.gpu, in_.compute, g.ops_full_recompute);
  g.comm = cost::StepComm(g.ops, y == 0);
  g.comm_full_recompute = cost::StepComm(g.ops_full_recompute, y == 0);
  g.ok = true;
  return g;
}

// Peak memory as a line in the micro-batch, two estimates at micro-batch 1 and 2 of the
// backward's peak, floored by the optimizer step's.
MemoryLine Search::memory_line(std::size_t s, std::size_t p, std::size_t d, std::size_t c,
                               std::size_t o, std::int64_t accum, bool no_sync) const {
  auto at = [&](std::int64_t mb) {
    auto cfg = config(s, p, d, c, o, mb, accum);
    cfg.no_sync = no_sync;
    return figures_(cfg);
  };
  const auto one = at(1);
  const auto two = at(2).backward_total;
  return {one.backward_total, two - one.backward_total, true, one.cpu_per_node, one.step_total};
}

// Two lines per configuration and synchronisation mode: a single micro-step, and
// accumulation (where FSDP's no_sync holds unsharded gradients).
void Search::prepare_memory() {
  memory_.resize(groups_.size() * checkpointings_.size() * 2);
  for (std::size_t s = 0; s < strategies_.size(); ++s)
    for (std::size_t p = 0; p < precisions_.size(); ++p)
      for (std::size_t d = 0; d < dps_.size(); ++d)
        for (std::size_t o = 0; o < offloads_.size(); ++o) {
          if (!groups_[group_index(s, p, d, o, 0)].ok) continue;
          for (std::size_t c = 0; c < checkpointings_.size(); ++c) {
            try {
              for (std::size_t y = 0; y < 2; ++y) {
                const auto g = group_index(s, p, d, o, y);
                memory_[memory_index(g, c, false)] = memory_line(s, p, d, c, o, 1, y == 0);
                memory_[memory_index(g, c, true)] = memory_line(s, p, d, c, o, 2, y == 0);
              }
            } catch (const Error& e) {
              reject_family(s, p, d, o, c, e.what());
            }
          }
        }
}

// The per-GPU batches (micro-batch x accumulation) worth trying on dp GPUs: the global batch
// divided by dp when it divides and a searched micro-batch fits it; otherwise the multiples
// of the searched micro-batches just below and above it (the nearest reachable batches).
std::vector<std::int64_t> Search::per_gpu_batches(std::int64_t dp) const {
  const auto g = in_.request.global_batch;
  const auto& filter = in_.request.micro_batches;
  const std::vector<std::int64_t> units = filter.empty() ? std::vector<std::int64_t>{1} : filter;
  std::vector<std::int64_t> exact;
  std::vector<std::int64_t> near;
  for (const auto mb : units) {
    const auto step = dp * mb;
    const auto below = g / step;
    if (g % step == 0) {
      exact.push_back(below * mb);
      continue;
    }
    if (below >= 1) near.push_back(below * mb);
    near.push_back((below + 1) * mb);
  }
  auto& chosen = exact.empty() ? near : exact;
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

// Every (GPU count, micro-batch) with its accumulation: micro-batches are the divisors of the
// per-GPU batch (those searched, with --micro-batch).
std::vector<Shape> Search::shapes() {
  const auto& r = in_.request;
  const auto g = r.global_batch;
  std::vector<Shape> out;
  for (std::size_t d = 0; d < dps_.size(); ++d) {
    const auto dp = dps_[d];
    for (const auto per_gpu : per_gpu_batches(dp)) {
      if (r.exact_batch && per_gpu * dp != g) {
        auto rejected = candidate(Shape{d, 0, 0, 0});
        rejected.micro_batch = 0;
        reject(rejected, Reason::batch_unreachable, 0,
               "global batch " + std::to_string(g) + " is not reachable on " + std::to_string(dp) +
                   " GPUs" + (r.micro_batches.empty() ? "" : " with the micro-batches searched"));
        break;
      }
      for (const auto mb : divisors(per_gpu)) {
        if (!r.micro_batches.empty() && std::find(r.micro_batches.begin(), r.micro_batches.end(),
                                                  mb) == r.micro_batches.end()) {
          continue;
        }
        const auto [it, added] = mb_index_.emplace(mb, micro_batches_.size());
        if (added) micro_batches_.push_back(mb);
        out.push_back({d, it->second, per_gpu / mb, per_gpu * dp});
      }
    }
  }
  return out;
}

void Search::prepare_compute() {
  for (; compute_rows_ < micro_batches_.size(); ++compute_rows_) {
    for (std::size_t p = 0; p < precisions_.size(); ++p) {
      for (std::size_t c = 0; c < checkpointings_.size(); ++c) {
        const auto cfg = config(0, p, 0, c, 0, micro_batches_[compute_rows_]);
        compute_.push_back(cost::estimate_compute(in_.model, cfg, in_.gpu, in_.compute));
      }
    }
  }
}

void Search::search() {
  // With every rejection kept, each configuration is one: no reallocation in that list. The
  // feasible list grows as it goes: reserving the most it could hold took fresh pages from the
  // system for a list that mostly stays short, and their first touch cost more than growing.
  const auto most =
      shapes_.size() * groups_.size() / dps_.size() * checkpointings_.size();  // x2 modes
  rejected_.reserve(most);
  defers_sync_.clear();
  for (const auto s : strategies_)
    defers_sync_.push_back(cost::supports_no_sync(s));
  peak_flops_.clear();
  for (const auto p : precisions_)
    peak_flops_.push_back(in_.gpu.peak_flops_for(p));
  seq_tokens_ = in_.model.transformer ? static_cast<double>(seq_len()) : 1.0;
  for (std::size_t i = 0; i < shapes_.size(); ++i)
    for (std::size_t s = 0; s < strategies_.size(); ++s)
      for (std::size_t p = 0; p < precisions_.size(); ++p)
        for (std::size_t o = 0; o < offloads_.size(); ++o)
          evaluate(i, s, p, o);
}

// The synchronisation modes worth evaluating: both only when there is accumulation, the
// strategy can defer synchronisation, and the request allows both.
void Search::evaluate(std::size_t shape, std::size_t s, std::size_t p, std::size_t o) {
  const auto sync = in_.request.sync;
  if (!defers_sync_[s] || sync == Sync::every_micro_step) {
    evaluate(shape, s, p, o, 1);
  } else if (shapes_[shape].grad_accum == 1 || sync == Sync::no_sync) {
    evaluate(shape, s, p, o, 0);
  } else {
    evaluate(shape, s, p, o, 0);
    evaluate(shape, s, p, o, 1);
  }
}

Candidate Search::candidate(const Shape& shape, std::size_t s, std::size_t p, std::size_t o,
                            std::size_t y) const {
  Candidate c = candidate(shape);
  c.strategy = strategies_[s];
  c.precision = precisions_[p];
  c.offload = offloads_[o];
  c.no_sync = y == 0;
  return c;
}

cost::StepCompute Search::step_compute(const Group& g, const Candidate& c) const {
  cost::StepCompute step;
  step.optimizer_s = g.optimizer_s;
  step.host_transfer_s = g.host_s;
  step.micro_steps = c.grad_accum;
  step.overlap_compute_slowdown = in_.compute.overlap_compute_slowdown;
  return step;
}

// The step time and objective of `c` (its checkpointing `ci`) in group `g`: all the loop needs
// to rank a configuration that fits.
void Search::time_step(Candidate& c, const Group& g, const Shape& shape, std::size_t p,
                       std::size_t ci, cost::StepCompute& step) const {
  const bool regathers = c.checkpointing == Checkpointing::full && !g.ops_full_recompute.empty();
  const auto& ct =
      compute_[(shape.mb_index * precisions_.size() + p) * checkpointings_.size() + ci];
  step.forward_s = ct.forward_s;
  step.backward_s = ct.backward_s;
  c.step_time_s = (regathers ? g.comm_full_recompute : g.comm).step_s(step);
  c.objective = objective(c);
}

// Its throughput and MFU, from the step time: what a listed candidate shows.
void Search::fill_rates(Candidate& c, const Shape& shape, std::size_t p, std::size_t ci) const {
  const auto& ct =
      compute_[(shape.mb_index * precisions_.size() + p) * checkpointings_.size() + ci];
  c.samples_per_s = static_cast<double>(c.global_batch) / c.step_time_s;
  c.tokens_per_s = c.samples_per_s * seq_tokens_;
  c.mfu = ct.model_flops * static_cast<double>(c.grad_accum) / (c.step_time_s * peak_flops_[p]);
}

void Search::price(Candidate& c, const Group& g, const Shape& shape, std::size_t p, std::size_t ci,
                   cost::StepCompute& step) const {
  time_step(c, g, shape, p, ci, step);
  fill_rates(c, shape, p, ci);
}

void Search::evaluate(std::size_t shape, std::size_t s, std::size_t p, std::size_t o,
                      std::size_t y) {
  const auto gi = group_index(s, p, shapes_[shape].dp_index, o, y);
  const auto& g = groups_[gi];
  if (!g.ok) return;
  const auto& sh = shapes_[shape];
  Candidate c = candidate(sh, s, p, o, y);
  auto step = step_compute(g, c);
  for (std::size_t ci = 0; ci < checkpointings_.size(); ++ci) {
    const auto& line = memory_[memory_index(gi, ci, c.grad_accum > 1)];
    if (!line.ok) continue;
    ++result_.configs_evaluated;
    c.checkpointing = checkpointings_[ci];
    c.memory = line.at(c.micro_batch);
    c.host_memory = line.host;
    if (c.memory > result_.usable) {
      reject_evaluated(c, Reason::out_of_memory, to_gib(c.memory - result_.usable));
      continue;
    }
    if (c.host_memory > result_.host_capacity) {
      reject_evaluated(c, Reason::host_out_of_memory,
                       to_gib(c.host_memory - result_.host_capacity));
      continue;
    }
    time_step(c, g, sh, p, ci, step);  // the rates are filled where an entry is listed
    if (const auto max = in_.request.max_run_s; max > 0 && run_seconds(c) > max) {
      fill_rates(c, sh, p, ci);
      reject_evaluated(c, Reason::past_deadline, (run_seconds(c) - max) / 3600.0);
      continue;
    }
    feasible_.push_back(Priced{c.objective, c.memory.value, static_cast<std::uint32_t>(shape),
                               static_cast<std::uint8_t>(s), static_cast<std::uint8_t>(p),
                               static_cast<std::uint8_t>(o),
                               static_cast<std::uint8_t>(ci * 2 + y)});
  }
}

// The candidate a feasible entry was, priced again as the search priced it.
Candidate Search::candidate(const Priced& f) const {
  const auto& sh = shapes_[f.shape];
  const std::size_t y = f.place % 2, ci = f.place / 2;
  const auto gi = group_index(f.strategy, f.precision, sh.dp_index, f.offload, y);
  const auto& g = groups_[gi];
  Candidate c = candidate(sh, f.strategy, f.precision, f.offload, y);
  auto step = step_compute(g, c);
  const auto& line = memory_[memory_index(gi, ci, c.grad_accum > 1)];
  c.checkpointing = checkpointings_[ci];
  c.memory = line.at(c.micro_batch);
  c.host_memory = line.host;
  price(c, g, sh, f.precision, ci, step);
  return c;
}

std::int64_t Search::seq_len() const {
  const auto& m = in_.model;
  return in_.request.seq_len > 0 ? in_.request.seq_len
                                 : (m.transformer ? m.transformer->max_positions : 0);
}

double Search::run_seconds(const Candidate& c) const {
  return planner::run_seconds(goal_, c.step_time_s, c.global_batch);
}

double Search::objective(const Candidate& c) const {
  // objective_value's first case, in place: the search prices every feasible configuration.
  if (goal_.objective == Objective::throughput)
    return c.step_time_s / static_cast<double>(c.global_batch);
  return objective_value(goal_, c.step_time_s, c.global_batch, c.dp);
}

// A combination that cannot run at all: one rejection for every micro-batch.
void Search::reject_family(std::size_t s, std::size_t p, std::size_t d, std::size_t o,
                           std::optional<std::size_t> c, const std::string& why) {
  Candidate r;
  r.strategy = strategies_[s];
  r.precision = precisions_[p];
  r.offload = offloads_[o];
  r.dp = dps_[d];
  r.micro_batch = 0;
  if (c) r.checkpointing = checkpointings_[*c];
  reject(r, Reason::unsupported, 0, why);
}

void Search::reject(const Candidate& c, Reason why, double amount, std::string detail) {
  rejected_.offer(c, why, amount, std::move(detail));
}

// A rejection in the search loop: most are only counted, without building the entry.
void Search::reject_evaluated(const Candidate& c, Reason why, double amount) {
  if (rejected_.would_keep(why, amount, c.strategy)) {
    rejected_.offer(c, why, amount);
  } else {
    rejected_.count_unkept(why, 1);
  }
}

void Search::finish() {
  if (!feasible_.empty()) {
    rank();
    pareto();
  }
  rejected_.finish(result_);
  if (feasible_.empty()) result_.suggestions = suggestions(in_, result_);
}

void Search::rank() {
  std::stable_sort(feasible_.begin(), feasible_.end(), [](const Priced& a, const Priced& b) {
    if (a.objective != b.objective) return a.objective < b.objective;
    return a.memory < b.memory;
  });
  const double best = feasible_.front().objective;
  for (std::size_t i = 0; i < feasible_.size(); ++i) {
    const auto& f = feasible_[i];
    if (static_cast<std::int64_t>(i) < in_.request.top_k) {
      result_.ranked.push_back(candidate(f));
      exact_memory(result_.ranked.back());
    }
    if (i == 0) continue;
    // Priced again only when the rejection would be kept.
    const double behind_pct = 100.0 * (f.objective / best - 1.0);
    if (rejected_.would_keep(Reason::slower, behind_pct, strategies_[f.strategy])) {
      reject(candidate(f), Reason::slower, behind_pct);
    } else {
      rejected_.count_unkept(Reason::slower, 1);
    }
  }
  result_.best = result_.ranked.front();
  const auto g = in_.request.global_batch;
  result_.exact_batch = result_.best->global_batch == g;
  const auto exact = std::find_if(feasible_.begin(), feasible_.end(), [&](const Priced& f) {
    return shapes_[f.shape].global_batch == g;
  });
  if (exact != feasible_.end()) {
    result_.best_exact = candidate(*exact);
    exact_memory(*result_.best_exact);
  }
}

void Search::pareto() {
  for (const auto* f : pareto_front(
           feasible_, [](const Priced& f) { return f.memory; },
           [](const Priced& f) { return f.objective; })) {
    result_.pareto.push_back(candidate(*f));
    exact_memory(result_.pareto.back());
  }
}

// The memory line is exact up to rounding of a few bytes; what is reported is the estimate.
void Search::exact_memory(Candidate& c) const {
  const auto cfg = training_config(c, in_.request, in_.topology.gpus_per_node(),
                                   in_.topology.node().gpus_per_host);
  const auto e = figures_(cfg);
  c.memory = e.gpu.total();
  c.host_memory = e.cpu_per_node;
}

}  // namespace dtplan::planner::detail
