// One search over every layout (see unified_plan.hpp).
#include "dtplan/planner/unified_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dtplan/cost/layout_text.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/layout_spec.hpp"
#include "pareto.hpp"

namespace dtplan::planner {

const Candidate* UnifiedPlan::data_parallel_of(const RejectedChoice& r) const {
  using From = RejectedChoice::From;
  if (r.from == From::data_parallel_rejected) return &data_parallel.rejected.at(r.index).config;
  if (r.from == From::data_parallel_best) return &data_parallel.best.value();
  return nullptr;
}

const cost::Layout3D* UnifiedPlan::layout_of(const RejectedChoice& r) const {
  using From = RejectedChoice::From;
  if (r.from == From::layout_rejected) return &layouts.value().rejected.at(r.index).layout;
  if (r.from == From::layout_best) return &layouts.value().ranked.front().layout;
  return nullptr;
}

double UnifiedPlan::objective_of(const RejectedChoice& r) const {
  using From = RejectedChoice::From;
  switch (r.from) {
    case From::data_parallel_rejected:
    case From::data_parallel_best:
      return data_parallel_of(r)->objective;
    case From::layout_rejected:
      return layouts.value().rejected.at(r.index).objective;
    case From::layout_best:
      return layouts.value().ranked.front().objective;
  }
  return 0;
}

LayoutChoice UnifiedPlan::choice_of(const RejectedChoice& r) const {
  using From = RejectedChoice::From;
  LayoutChoice c;
  if (const auto* d = data_parallel_of(r)) c.data_parallel = *d;
  if (r.from == From::layout_rejected) c.layout = layouts.value().rejected.at(r.index).candidate();
  if (r.from == From::layout_best) c.layout = layouts.value().ranked.front();
  return c;
}

const std::string& UnifiedPlan::detail_of(const RejectedChoice& r) const {
  static const std::string none;
  return r.from == RejectedChoice::From::data_parallel_rejected
             ? data_parallel.rejected.at(r.index).detail
             : none;
}

std::int64_t LayoutChoice::gpus() const {
  return data_parallel ? data_parallel->dp : layout->layout.gpus();
}
std::int64_t LayoutChoice::global_batch() const {
  return data_parallel ? data_parallel->global_batch : layout->layout.global_batch();
}
Bytes LayoutChoice::memory() const {
  return data_parallel ? data_parallel->memory : layout->memory.total();
}
double LayoutChoice::step_s() const {
  return data_parallel ? data_parallel->step_time_s : layout->time.step_s;
}
double LayoutChoice::samples_per_s() const {
  return data_parallel ? data_parallel->samples_per_s : layout->time.samples_per_s;
}
double LayoutChoice::tokens_per_s() const {
  return data_parallel ? data_parallel->tokens_per_s : layout->time.tokens_per_s;
}
double LayoutChoice::mfu() const {
  return data_parallel ? data_parallel->mfu : layout->time.mfu;
}
double LayoutChoice::objective() const {
  return data_parallel ? data_parallel->objective : layout->objective;
}
std::string LayoutChoice::family() const {
  return std::string(data_parallel ? name_of(data_parallel->strategy)
                                   : name_of(layout->layout.framework));
}

double UnifiedPlan::behind_pct(double objective) const {
  if (ranked.empty()) return 0;
  return 100.0 * (objective / ranked.front().objective() - 1.0);
}

namespace {

bool allows_one(const std::vector<std::int64_t>& only) {
  return only.empty() || std::find(only.begin(), only.end(), 1) != only.end();
}

// Why the data-parallel family (tp = pp = cp = 1, one model chunk) is left out, or empty.
std::string data_parallel_left_out(const LayoutRequest& r) {
  if (r.strategies_named && r.plan.strategies.empty()) {
    return "only layout frameworks were named (megatron, fsdp2)";
  }
  if (!allows_one(r.tps)) return "tensor-parallel sizes without 1";
  if (!allows_one(r.pps)) return "pipeline sizes without 1";
  if (!allows_one(r.cps)) return "context-parallel sizes without 1";
  if (!allows_one(r.eps)) return "expert-parallel sizes without 1";
  if (!allows_one(r.etps)) return "expert tensor-parallel sizes without 1";
  if (r.fp8 != Fp8Recipe::none) {
    return "FP8 (" + std::string(name_of(r.fp8)) +
           ") is modelled for the layouts (megatron, fsdp2), not the data-parallel strategies";
  }
  if (!allows_one(r.interleaves)) return "interleaving without 1";
  return {};
}

// Why the tensor x context x pipeline layouts are left out, or empty.
std::string layouts_left_out(const ModelDesc& m, const LayoutRequest& r) {
  if (!m.transformer) return "the model has no transformer shapes to split";
  const bool expert_sizes =
      std::any_of(r.eps.begin(), r.eps.end(), [](auto v) { return v != 1; }) ||
      std::any_of(r.etps.begin(), r.etps.end(), [](auto v) { return v != 1; });
  if (expert_sizes && !m.transformer->moe.active()) {
    throw FieldError("ep", "expert parallelism ({ep}, {etp}) needs a mixture-of-experts model; " +
                               m.name + " has a dense MLP");
  }
  if (r.strategies_named && r.frameworks.empty()) {
    return "only data-parallel strategies were named (add megatron or fsdp2 to the strategies)";
  }
  const auto& p = r.plan;
  if (p.layer_kernels == LayerKernels::eager) {
    return "--layer-kernels " + std::string(kEagerLayouts);
  }
  if (std::none_of(p.precisions.begin(), p.precisions.end(), is_mixed)) {
    return "the layouts run in mixed precision (bf16 or fp16), and none was asked for";
  }
  const auto named = [&](cost::Framework f) {
    return r.frameworks.empty() ||
           std::find(r.frameworks.begin(), r.frameworks.end(), f) != r.frameworks.end();
  };
  // Megatron-LM offloads the optimizer, FSDP2 parameters, gradients and optimizer together.
  const auto offloads = [&](cost::Framework f) {
    const auto own =
        f == cost::Framework::megatron ? Offload::optimizer : Offload::optimizer_and_params;
    return p.offloads.empty() || std::any_of(p.offloads.begin(), p.offloads.end(), [&](Offload o) {
             return o == Offload::none || o == own;
           });
  };
  if (!(named(cost::Framework::megatron) && offloads(cost::Framework::megatron)) &&
      !(named(cost::Framework::fsdp2) && offloads(cost::Framework::fsdp2))) {
    return "no layout framework runs the offload modes asked for (Megatron-LM offloads the "
           "optimizer, FSDP2 optimizer+params)";
  }
  const auto runs = [&](cost::Framework f) {
    return named(f) && !cost::optimizer_problem(f, p.optimizer) &&
           !cost::optimizer_impl_problem(f, p.optimizer_impl);
  };
  if (!runs(cost::Framework::megatron) && !runs(cost::Framework::fsdp2)) {
    return "no layout framework runs optimizer " + std::string(name_of(p.optimizer)) +
           " as --optimizer-impl " + std::string(name_of(p.optimizer_impl)) +
           " (Megatron-LM: adam, adamw, sgd, sgd-momentum, fused; torchtitan: adam, adamw, fused "
           "or foreach)";
  }
  return {};
}

Request3D layouts_request(const LayoutRequest& r, const Topology& t) {
  const auto& p = r.plan;
  Request3D x;
  x.global_batch = p.global_batch;
  x.seq_len = p.seq_len;
  x.gpus = p.max_gpus;
  const auto most = p.max_gpus > 0 ? std::min(p.max_gpus, t.gpu_count()) : t.gpu_count();
  x.gpu_counts = gpu_counts(t.gpus_per_node(), t.nodes(), most);
  x.micro_batches = p.micro_batches;
  x.tps = r.tps;
  x.pps = r.pps;
  x.cps = r.cps;
  x.interleaves = r.interleaves;
  x.cp_comms = r.cp_comms;
  x.eps = r.eps;
  x.etps = r.etps;
  x.fp8 = r.fp8;
  x.frameworks = r.frameworks;
  x.sequence_parallel = r.sequence_parallel;
  x.schedules = r.schedules;
  x.recompute = p.checkpointing;
  x.recompute_modules = r.recompute_modules;
  x.overlap_ep_comm = r.overlap_ep_comm;
  x.deepep = r.deepep;
  x.overlap_grad_reduce = r.overlap_grad_reduce;
  x.overlap_param_gather = r.overlap_param_gather;
  x.ddp_bucket_params = r.ddp_bucket_size;
  x.grad_reduce_bf16 = r.grad_reduce_in_bf16;
  x.fp8_param_gather = r.fp8_param_gather;
  x.tp_comm_overlap = r.tp_comm_overlap;
  x.attention = p.attention;
  x.attention_kernel = p.attention_kernel;
  x.precision = *std::find_if(p.precisions.begin(), p.precisions.end(), is_mixed);
  x.optimizer = p.optimizer;
  x.optimizer_impl = p.optimizer_impl;
  x.zero_grad = p.zero_grad;
  x.offloads = p.offloads;
  x.host_per_node = p.host_memory.value_or(t.node().host_memory_or_default());
  x.headroom = p.headroom;
  x.top_k = p.top_k;
  x.goal = goal_of(p);
  x.rejected_kept = p.rejected_kept;
  x.threads = p.threads;
  return x;
}

// What the data-parallel search would have reported as capacity, without running it.
void capacity_only(const GpuSpec& gpu, const Topology& t, const PlanRequest& r, PlanResult& out) {
  out.capacity = gpu.memory;
  out.usable = Bytes{static_cast<std::int64_t>(
      std::floor(static_cast<double>(gpu.memory.value) * (1.0 - r.headroom)))};
  out.host_capacity = r.host_memory.value_or(t.node().host_memory_or_default());
  out.exact_batch = true;
}

bool before(const LayoutChoice& a, const LayoutChoice& b) {
  if (a.objective() != b.objective()) return a.objective() < b.objective();
  return a.memory() < b.memory();
}

// Whether some entry reaches the requested batch exactly (every layout does).
bool reaches_batch(const UnifiedPlan& p, std::int64_t global_batch) {
  if (p.layouts && !p.layouts->ranked.empty()) return true;
  return std::any_of(p.data_parallel.ranked.begin(), p.data_parallel.ranked.end(),
                     [&](const Candidate& c) { return c.global_batch == global_batch; });
}

// A data-parallel entry with more ranks than the global batch (a sample each at least, so a
// batch of dp or more) competes only when no entry reaches the batch: then the nearest batch
// is the answer (Llama 2 13B at batch 7 fits ZeRO-3 on 8 GPUs only, at 8). Otherwise it would
// buy speed by training another way (Llama 3.1 405B at batch 2048 on 4,096 GPUs ranked ZeRO-3
// at 4,096 samples first, +100% batch for 1.6%). Nearest batches below the rank count (96 or
// 104 for 100 on 8 GPUs) still compete, within half a sample a rank.
void merge(UnifiedPlan& p, std::int64_t top_k, std::int64_t global_batch) {
  std::vector<LayoutChoice> ranked, front;
  const bool exact = reaches_batch(p, global_batch);
  const auto competes = [&](const Candidate& c) { return !exact || c.dp <= global_batch; };
  bool dropped = false;
  for (const auto& c : p.data_parallel.ranked) {
    if (competes(c)) {
      ranked.push_back({c, std::nullopt});
    } else {
      dropped = true;
    }
  }
  // The data-parallel ranking keeps top_k entries: with some left out, the best at the batch
  // itself stands for the family (it may have ranked below them).
  if (const auto& e = p.data_parallel.best_exact; dropped && e)
    ranked.push_back({*e, std::nullopt});
  for (const auto& c : p.data_parallel.pareto) {
    if (competes(c)) front.push_back({c, std::nullopt});
  }
  if (p.layouts) {
    for (const auto& c : p.layouts->ranked)
      ranked.push_back({std::nullopt, c});
    for (const auto& c : p.layouts->pareto)
      front.push_back({std::nullopt, c});
  }
  std::stable_sort(ranked.begin(), ranked.end(), before);
  if (static_cast<std::int64_t>(ranked.size()) > top_k)
    ranked.resize(static_cast<std::size_t>(top_k));
  p.ranked = std::move(ranked);
  // The front of the union is the front of the two fronts.
  for (const auto* c : detail::pareto_front(
           front, [](const LayoutChoice& c) { return c.memory(); },
           [](const LayoutChoice& c) { return c.objective(); })) {
    p.pareto.push_back(*c);
  }
}

// The one rejected list: every data-parallel rejection and every layout not chosen, "slower"
// measured against the plan's best. Each entry names its place in the lists the searches left
// in the plan: a large search rejects 10^5 layouts, and copies of them were half the plan's
// peak memory.
void collect_rejected(UnifiedPlan& p) {
  using From = RejectedChoice::From;
  const auto* best = p.best();
  auto rebased = [&](Reason reason, double amount, double objective) {
    return reason == Reason::slower && best ? p.behind_pct(objective) : amount;
  };
  p.rejected_omitted = p.data_parallel.rejected_omitted;
  p.rejected.reserve(p.data_parallel.rejected.size() +
                     (p.layouts ? p.layouts->rejected.size() : 0) + 2);
  for (std::size_t i = 0; i < p.data_parallel.rejected.size(); ++i) {
    const auto& r = p.data_parallel.rejected[i];
    p.rejected.push_back({From::data_parallel_rejected, i, r.reason,
                          rebased(r.reason, r.amount, r.config.objective)});
  }
  if (const auto& b = p.data_parallel.best; b && best && best->layout) {
    p.rejected.push_back({From::data_parallel_best, 0, Reason::slower, p.behind_pct(b->objective)});
  }
  if (!p.layouts) return;
  for (const auto& [reason, omitted] : p.layouts->rejected_omitted)
    p.rejected_omitted[reason] += omitted;
  for (std::size_t i = 0; i < p.layouts->rejected.size(); ++i) {
    const auto& r = p.layouts->rejected[i];
    p.rejected.push_back(
        {From::layout_rejected, i, r.reason, rebased(r.reason, r.amount, r.objective)});
  }
  if (!p.layouts->ranked.empty() && best && best->data_parallel) {
    const auto& b = p.layouts->ranked.front();
    p.rejected.push_back({From::layout_best, 0, Reason::slower, p.behind_pct(b.objective)});
  }
}

// When nothing fits: the data-parallel search's suggestions, and the nearest layout.
void suggest(UnifiedPlan& p) {
  if (!p.ranked.empty()) return;
  p.suggestions = p.data_parallel.suggestions;
  if (p.layouts && !p.layouts->no_layout.empty()) p.suggestions.push_back(p.layouts->no_layout);
  if (!p.layouts || !p.layouts->nearest_miss) return;
  const auto& miss = *p.layouts->nearest_miss;
  const double need = static_cast<double>(miss.memory.total().value) / double(1LL << 30);
  const double usable = p.layouts->usable_bytes / double(1LL << 30);
  char figures[96];
  std::snprintf(figures, sizeof figures, "%.2f GiB per GPU of %.2f GiB usable", need, usable);
  p.suggestions.push_back("the nearest tensor x context x pipeline layout (" +
                          cost::describe(miss.layout) + ") needs " + figures +
                          ": more GPUs, a shorter sequence or less {headroom}");
}

}  // namespace

void check_framework_flags(const LayoutRequest& r) {
  const std::pair<bool, const char*> flags[] = {{r.overlap_grad_reduce, "overlap_grad_reduce"},
                                                {r.overlap_param_gather, "overlap_param_gather"},
                                                {r.ddp_bucket_size > 0, "ddp_bucket_size"},
                                                {r.grad_reduce_in_bf16, "grad_reduce_in_bf16"},
                                                {r.fp8_param_gather, "fp8_param_gather"},
                                                {r.tp_comm_overlap, "tp_comm_overlap"}};
  const auto& f = r.frameworks;
  const bool megatron =
      !r.strategies_named || std::find(f.begin(), f.end(), cost::Framework::megatron) != f.end();
  for (const auto& [given, field] : flags) {
    if (given && !megatron)
      throw FieldError(field, "Megatron-LM's: add megatron to {strategies} (or {framework})");
  }
  if (r.ddp_bucket_size > 0 && !r.overlap_grad_reduce) {
    throw FieldError("ddp_bucket_size",
                     "needs {overlap_grad_reduce}: without it Megatron-LM reduces the gradients "
                     "in one bucket");
  }
  if (r.fp8_param_gather && r.fp8 == Fp8Recipe::none)
    throw FieldError("fp8_param_gather", "needs an FP8 recipe: give {fp8_recipe}");
  const auto& p = r.plan.precisions;
  if (r.grad_reduce_in_bf16 && !p.empty() &&
      std::find(p.begin(), p.end(), Precision::bf16) == p.end())
    throw FieldError("grad_reduce_in_bf16", "needs bf16 among {precision}");
}

UnifiedPlan plan_layouts(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                         const GpuSpec& gpu, const LayoutRequest& r,
                         const cost::ComputeConstants& k, const cost::OverheadConstants& overheads,
                         std::shared_ptr<cost::CommContext> comm) {
  if (!comm) comm = std::make_shared<cost::CommContext>(t);
  check_framework_flags(r);
  if (r.plan.precisions.empty()) {  // the data-parallel search's default, for both families
    auto with_defaults = r;
    with_defaults.plan.precisions = default_precisions(gpu);
    return plan_layouts(m, t, table, gpu, with_defaults, k, overheads, std::move(comm));
  }
  UnifiedPlan out;
  const auto dp_out = data_parallel_left_out(r);
  out.layouts_left_out = layouts_left_out(m, r);
  if (!dp_out.empty() && !out.layouts_left_out.empty()) {
    throw Error("strategies and sizes: nothing left to search (data-parallel family: " + dp_out +
                "; layouts: " + out.layouts_left_out + ")");
  }
  if (dp_out.empty()) {
    out.data_parallel = plan(m, t, table, gpu, r.plan, k, overheads, comm);
    out.data_parallel_searched = true;
  } else {
    capacity_only(gpu, t, r.plan, out.data_parallel);
  }
  if (out.layouts_left_out.empty()) {
    out.layouts = search_3d(m, t, table, gpu, layouts_request(r, t), k, overheads, comm);
  }
  merge(out, r.plan.top_k, r.plan.global_batch);
  collect_rejected(out);
  suggest(out);
  out.elapsed_s = out.data_parallel.elapsed_s + (out.layouts ? out.layouts->elapsed_s : 0.0);
  return out;
}

std::int64_t UnifiedPlan::rejected_total() const {
  auto n = static_cast<std::int64_t>(rejected.size());
  for (const auto& [reason, omitted] : rejected_omitted)
    n += omitted;
  return n;
}

std::int64_t UnifiedPlan::omitted(Reason reason) const {
  const auto found = rejected_omitted.find(reason);
  return found == rejected_omitted.end() ? 0 : found->second;
}

UnifiedCounts counts_of(const UnifiedPlan& p) {
  UnifiedCounts n;
  const auto dp = search_counts(p.data_parallel);
  n.data_parallel_evaluated = dp.evaluated;
  n.layouts_evaluated = p.layouts ? p.layouts->evaluated : 0;
  n.evaluated = n.data_parallel_evaluated + n.layouts_evaluated;
  n.chosen = p.ranked.empty() ? 0 : 1;
  n.rejected_evaluated = n.evaluated - n.chosen;
  n.not_evaluated = dp.not_evaluated;
  n.not_evaluated_why = dp.not_evaluated_why();
  return n;
}

std::vector<FamilyOutcome> by_family(const UnifiedPlan& p) {
  std::vector<FamilyOutcome> out;
  if (p.data_parallel_searched) {
    for (const auto& o : by_strategy(p.data_parallel)) {
      FamilyOutcome f;
      f.family = std::string(name_of(o.strategy));
      if (o.best) {
        f.best = LayoutChoice{o.best, std::nullopt};
        f.behind_pct = p.behind_pct(o.best->objective);
      }
      f.nearest_miss = o.nearest_miss;
      out.push_back(std::move(f));
    }
  }
  if (!p.layouts) return out;
  for (const auto framework : {cost::Framework::megatron, cost::Framework::fsdp2}) {
    FamilyOutcome f;
    f.family = std::string(name_of(framework));
    if (const auto* best = best_layout_of(p, framework)) {
      f.best = LayoutChoice{std::nullopt, *best};
      f.behind_pct = p.behind_pct(best->objective);
    } else if (const auto miss = p.layouts->nearest_miss_of_framework.find(framework);
               miss != p.layouts->nearest_miss_of_framework.end()) {
      f.nearest_layout_miss = miss->second;
    } else {
      continue;  // not searched
    }
    out.push_back(std::move(f));
  }
  return out;
}

const Candidate3D* best_layout_of(const UnifiedPlan& p, cost::Framework f) {
  if (!p.layouts) return nullptr;
  const auto found = p.layouts->best_of_framework.find(f);
  return found == p.layouts->best_of_framework.end() ? nullptr : &found->second;
}

}  // namespace dtplan::planner
