// The planner's public entry points: names, GPU counts, the configuration of a candidate, and
// what to suggest when nothing fits.
#include "dtplan/planner/planner.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/cost/memory.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/planner/search3d.hpp"
#include "search.hpp"

namespace dtplan::planner {

std::string_view name_of(Objective o) {
  switch (o) {
    case Objective::throughput:
      return "throughput";
    case Objective::time:
      return "time";
    case Objective::cost:
      return "cost";
  }
  return "?";
}

RunGoal goal_of(const PlanRequest& r) {
  return {r.objective, r.price_per_gpu_hour, r.steps, r.samples, r.max_run_s};
}

double run_seconds(const RunGoal& g, double step_s, std::int64_t global_batch) {
  const double batch = static_cast<double>(global_batch);
  if (g.steps > 0) return step_s * static_cast<double>(g.steps);
  if (g.samples > 0) return step_s * std::ceil(g.samples / batch);
  return step_s / batch;
}

double objective_value(const RunGoal& g, double step_s, std::int64_t global_batch,
                       std::int64_t gpus) {
  const double per_sample = step_s / static_cast<double>(global_batch);
  switch (g.objective) {
    case Objective::throughput:
      return per_sample;
    case Objective::time:
      return run_seconds(g, step_s, global_batch);
    case Objective::cost:
      return run_seconds(g, step_s, global_batch) * static_cast<double>(gpus) *
             g.price_per_gpu_hour / 3600.0;
  }
  return per_sample;
}

Objective parse_objective(std::string_view text) {
  for (const auto o : {Objective::throughput, Objective::time, Objective::cost}) {
    if (text == name_of(o)) return o;
  }
  throw Error(unknown_name_message("objective", text, {"throughput", "time", "cost"}));
}

std::vector<Precision> default_precisions(const GpuSpec& gpu) {
  return {gpu.peak_flops.bf16 > 0 ? Precision::bf16 : Precision::fp16, Precision::fp32};
}

void check_precisions(const GpuSpec& gpu, const std::vector<Precision>& precisions) {
  for (const auto p : precisions) {
    if (gpu.peak_flops_for(p) > 0) continue;
    std::string has;
    for (const auto& row : kPrecisions) {
      if (gpu.peak_flops_for(row.value) > 0)
        has += (has.empty() ? "" : ", ") + std::string(row.name);
    }
    throw Error(std::string(name_of(p)) + ": " + gpu.name + " has no " +
                std::string(compute_type(p)) + " tensor-core peak (it runs " + has + ")");
  }
}

std::string_view name_of(Reason r) {
  switch (r) {
    case Reason::out_of_memory:
      return "out_of_memory";
    case Reason::host_out_of_memory:
      return "host_out_of_memory";
    case Reason::batch_unreachable:
      return "batch_unreachable";
    case Reason::unsupported:
      return "unsupported";
    case Reason::past_deadline:
      return "past_deadline";
    case Reason::slower:
      return "slower";
  }
  return "?";
}

bool was_evaluated(Reason r) {
  return r != Reason::unsupported && r != Reason::batch_unreachable;
}

std::string SearchCounts::not_evaluated_why() const {
  if (unsupported && batch_unreachable) return "unsupported, batch unreachable";
  return unsupported ? "unsupported" : batch_unreachable ? "batch unreachable" : "";
}

SearchCounts search_counts(const PlanResult& r) {
  SearchCounts c;
  c.evaluated = r.configs_evaluated;
  c.chosen = r.best ? 1 : 0;
  const auto count = [&c](Reason reason, std::int64_t n) {
    (was_evaluated(reason) ? c.rejected_evaluated : c.not_evaluated) += n;
    c.unsupported |= reason == Reason::unsupported && n > 0;
    c.batch_unreachable |= reason == Reason::batch_unreachable && n > 0;
  };
  for (const auto& rej : r.rejected)
    count(rej.reason, 1);
  for (const auto& [reason, omitted] : r.rejected_omitted)
    count(reason, omitted);
  return c;
}

std::vector<std::int64_t> gpu_counts(std::int64_t gpus_per_node, std::int64_t nodes,
                                     std::int64_t max_gpus) {
  if (gpus_per_node < 1 || nodes < 1 || max_gpus < 1) {
    throw Error("GPU counts: gpus per node " + std::to_string(gpus_per_node) + ", nodes " +
                std::to_string(nodes) + " and the most GPUs " + std::to_string(max_gpus) +
                " must be positive");
  }
  std::vector<std::int64_t> out;
  for (std::int64_t g = 1; g < gpus_per_node && g <= max_gpus; g *= 2)
    out.push_back(g);
  // A cap inside a node is a count the user has: search it too (6 of 8 GPUs).
  if (max_gpus < gpus_per_node && out.back() != max_gpus) out.push_back(max_gpus);
  for (std::int64_t n = 1; n <= nodes && n * gpus_per_node <= max_gpus; n *= 2) {
    out.push_back(n * gpus_per_node);
  }
  const auto all = std::min(nodes * gpus_per_node, max_gpus - max_gpus % gpus_per_node);
  if (all >= gpus_per_node && std::find(out.begin(), out.end(), all) == out.end()) {
    out.push_back(all);
  }
  return out;
}

TrainingConfig training_config(const Candidate& c, const PlanRequest& r, std::int64_t gpus_per_node,
                               std::int64_t gpus_per_host) {
  TrainingConfig cfg;
  cfg.gpus_per_host = gpus_per_host;
  cfg.strategy = c.strategy;
  cfg.precision = c.precision;
  cfg.optimizer = r.optimizer;
  cfg.optimizer_impl = r.optimizer_impl;
  // framework: the autocast candidates eager, the others fused; eager: every candidate as a
  // Hugging Face model in eager PyTorch runs it.
  cfg.layer_kernels = r.layer_kernels;
  cfg.zero_grad = r.zero_grad;
  cfg.dp_size = c.dp;
  cfg.gpus_per_node = gpus_per_node;
  cfg.micro_batch = c.micro_batch;
  cfg.seq_len = r.seq_len;
  cfg.checkpointing = c.checkpointing;
  cfg.attention = r.attention;
  cfg.attention_kernel = r.attention_kernel;
  cfg.zero3_gathers = r.zero3_gathers;
  cfg.offload = c.offload;
  cfg.grad_accum = std::max<std::int64_t>(c.grad_accum, 1);
  cfg.no_sync = c.no_sync;
  return cfg;
}

Plan plan_for(const ModelDesc& m, const PlanTarget& target, const TrainingConfig& training) {
  Plan p;
  p.model = target.model;
  p.params = m.params;
  p.topology = target.topology;
  p.nodes = target.nodes;
  p.gpu = target.gpu;
  p.training = training;
  if (m.transformer && p.training.seq_len == 0) p.training.seq_len = m.transformer->max_positions;
  return p;
}

Plan plan_file(const Candidate& c, const PlanRequest& r, const ModelDesc& m,
               const PlanTarget& target) {
  auto p = plan_for(m, target, training_config(c, r, target.gpus_per_node));
  p.grad_accum = c.grad_accum;
  p.global_batch = c.global_batch;
  p.no_sync = c.no_sync;
  p.predicted = {c.step_time_s, c.samples_per_s, c.tokens_per_s, c.mfu, c.memory.value};
  return p;
}

PlanResult plan(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                const GpuSpec& gpu, const PlanRequest& r, const cost::ComputeConstants& k,
                const cost::OverheadConstants& overheads, std::shared_ptr<cost::CommContext> comm) {
  if (r.objective == Objective::cost && !(r.price_per_gpu_hour > 0)) {
    throw FieldError("price_per_gpu_hour", "a positive price is needed for {objective} cost");
  }
  if (!(r.headroom >= 0.0 && r.headroom < 1.0)) {
    throw FieldError("headroom",
                     "a fraction of GPU memory in [0, 1), got " + std::to_string(r.headroom));
  }
  if (r.top_k < 1) throw FieldError("top_k", "must be a positive integer");
  if (r.max_gpus < 0) throw FieldError("max_gpus", "must be a positive integer");
  if (r.max_run_s < 0) throw FieldError("max_run_s", "must be positive");
  if (r.max_run_s > 0 && r.steps == 0 && r.samples == 0) {
    throw FieldError("max_run_s",
                     "needs the run's length: {steps}, or {dataset_size} and {epochs}");
  }
  for (const auto mb : r.micro_batches) {
    if (mb < 1) throw FieldError("micro_batches", "must be positive integers");
  }
  if (!comm) comm = std::make_shared<cost::CommContext>(t);
  return detail::Search({m, t, table, gpu, r, k, overheads, std::move(comm)}).run();
}

namespace detail {

namespace {

const Rejected* leanest_out_of_memory(const PlanResult& result) {
  const Rejected* leanest = nullptr;
  for (const auto& r : result.rejected) {
    if (r.reason != Reason::out_of_memory) continue;
    if (!leanest || r.config.memory < leanest->config.memory) leanest = &r;
  }
  return leanest;
}

// The smallest power-of-two multiple of the GPUs searched at which the leanest configuration
// (micro-batch 1) fits, up to 2^20 GPUs; 0 if none does (the unsharded part alone is too big).
std::int64_t gpus_that_fit(const Search::Inputs& in, const Candidate& c, Bytes usable) {
  auto cfg =
      training_config(c, in.request, in.topology.gpus_per_node(), in.topology.node().gpus_per_host);
  cfg.micro_batch = 1;
  for (std::int64_t dp = c.dp * 2; dp <= (std::int64_t{1} << 20); dp *= 2) {
    cfg.dp_size = dp;
    try {
      if (cost::estimate_memory(in.model, cfg, in.overheads).gpu.total() <= usable) return dp;
    } catch (const Error&) {
      return 0;
    }
  }
  return 0;
}

// The GPU count (whole nodes, doubling) at which `c`, rejected for host memory, fits both its
// GPUs and each node's host memory: ZeRO-3 and FSDP shard what they offload over every rank,
// so each node holds less as nodes are added. 0: none up to 2^20 GPUs.
std::int64_t gpus_that_fit_host(const Search::Inputs& in, const Candidate& c, Bytes usable,
                                Bytes host_capacity) {
  auto cfg =
      training_config(c, in.request, in.topology.gpus_per_node(), in.topology.node().gpus_per_host);
  const std::int64_t per_node = in.topology.gpus_per_node();
  for (std::int64_t dp = std::max(c.dp * 2, per_node); dp <= (std::int64_t{1} << 20); dp *= 2) {
    cfg.dp_size = dp;
    try {
      const auto m = cost::estimate_memory(in.model, cfg, in.overheads);
      if (m.gpu.total() <= usable && m.cpu_per_node <= host_capacity) return dp;
    } catch (const Error&) {
      return 0;
    }
  }
  return 0;
}

// Whether a filter (empty: everything) leaves `value` out.
template <class E>
bool excludes(const std::vector<E>& filter, E value) {
  return !filter.empty() && std::find(filter.begin(), filter.end(), value) == filter.end();
}

std::string describe(const Candidate& c) {
  return std::string(name_of(c.strategy)) + ", " + std::string(name_of(c.precision)) +
         ", checkpointing " + std::string(name_of(c.checkpointing)) + ", offload " +
         std::string(name_of(c.offload)) + ", micro-batch " + std::to_string(c.micro_batch) +
         " on " + std::to_string(c.dp) + (c.dp == 1 ? " GPU" : " GPUs");
}

}  // namespace

std::vector<std::string> suggestions(const Search::Inputs& in, const PlanResult& result) {
  std::vector<std::string> out;
  const Rejected* closest = nullptr;
  for (const auto& r : result.rejected) {
    if (r.reason == Reason::past_deadline && (!closest || r.amount < closest->amount)) closest = &r;
  }
  if (closest) {
    out.push_back("configurations fit, but the fastest (" + describe(closest->config) +
                  ") misses {max_run_s} by " + std::to_string(std::llround(closest->amount)) +
                  " h: more GPUs ({nodes}) or a later deadline");
    return out;  // memory is not what stops the plan
  }
  const Rejected* host = nullptr;
  for (const auto& r : result.rejected) {
    if (r.reason == Reason::host_out_of_memory && (!host || r.amount < host->amount)) host = &r;
  }
  if (host) {
    std::string text = "configurations fit the GPUs with offload (" + describe(host->config) +
                       "), but need " + format_gib(host->config.host_memory) +
                       " of host memory per node; " + format_gib(result.host_capacity) +
                       " per node ({host_memory})";
    if (const auto dp = gpus_that_fit_host(in, host->config, result.usable, result.host_capacity);
        dp > 0) {
      text += "; more nodes share what it offloads: it fits on " + std::to_string(dp) +
              " GPUs ({nodes} " + std::to_string(ceil_div(dp, in.topology.gpus_per_node())) + ")";
    }
    out.push_back(text);
  }
  const auto* leanest = leanest_out_of_memory(result);
  if (!leanest) {
    if (host) return out;
    out.emplace_back("no configuration could be evaluated; see the rejected list");
    return out;
  }
  const auto& c = leanest->config;
  const auto& r = in.request;
  out.push_back("of the configurations over GPU memory, the leanest (" + describe(c) + ") needs " +
                format_gib(c.memory) + " per GPU; " + format_gib(result.usable) +
                " are usable on " + in.gpu.name);
  const bool over_host = c.offload != Offload::none && c.host_memory > result.host_capacity;
  if (over_host) {
    out.push_back("what the leanest configuration offloads would also need " +
                  format_gib(c.host_memory) + " of host memory per node, over the " +
                  format_gib(result.host_capacity) +
                  " per node ({host_memory}): a larger GPU "
                  "alone does not make it fit");
  }
  if (c.micro_batch > 1) out.emplace_back("a smaller micro-batch ({micro_batch} 1)");
  // What the request's filters kept out of the search.
  if (in.model.transformer && excludes(r.checkpointing, Checkpointing::full)) {
    out.emplace_back("activation checkpointing: allow {checkpointing} full");
  }
  if (excludes(r.offloads, Offload::optimizer_and_params)) {
    out.emplace_back("offload to host memory: allow {offload} optimizer+params (zero3, FSDP)");
  }
  if (excludes(r.strategies, Strategy::zero3) && excludes(r.strategies, Strategy::fsdp_full)) {
    out.emplace_back("a strategy that shards parameters: {strategy} zero3 or fsdp-full");
  }
  // Long sequences: activations grow with the tokens a GPU holds; context parallelism splits
  // them (from 8K tokens, where each rank still keeps 4K).
  if (in.model.transformer &&
      sequence_length(in.model, r.seq_len) >= 2 * kMinTokensPerContextRank) {
    out.emplace_back(
        "context parallelism: cp GPUs share each sequence and each keeps seq/cp tokens of "
        "activations ({cp}; the tensor x context x pipeline layouts below)");
  }
  if (const auto dp = gpus_that_fit(in, c, result.usable); dp > 0) {
    out.push_back("more GPUs: the same configuration fits on " + std::to_string(dp) +
                  " GPUs ({nodes} " + std::to_string(ceil_div(dp, in.topology.gpus_per_node())) +
                  ")");
  } else {
    out.emplace_back(
        "more GPUs would not help the leanest configuration: what it does not "
        "shard does not fit on its own");
  }
  const auto needed = Bytes{static_cast<std::int64_t>(
      std::ceil(static_cast<double>(c.memory.value) / (1.0 - r.headroom)))};
  out.push_back("for the leanest configuration: a GPU with at least " + format_gib(needed) +
                " ({gpu}), a shorter {seq_len}, or less {headroom}");
  return out;
}

}  // namespace detail

}  // namespace dtplan::planner
