// The tensor x pipeline x data-parallel search (see search3d.hpp).
#include "dtplan/planner/search3d.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <numeric>
#include <set>
#include <tuple>

#include "dtplan/model/error.hpp"
#include "memory_batches.hpp"
#include "pareto.hpp"
#include "rejected_keeper.hpp"

namespace dtplan::planner {
namespace {

// Layouts priced for memory together (memory_batches.hpp): enough to keep each thread busy
// for milliseconds, few enough that the batch and its figures stay a few megabytes.
constexpr std::size_t kMemoryBatch = 2048;

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Pipeline depths: the divisors of the layers, those of the layers + 2 (Megatron-LM's rule
// that counts the embedding and the loss as a layer each), and the powers of two up to half
// the layers, split as balanced_stages does.
std::vector<std::int64_t> pipeline_depths(std::int64_t layers) {
  auto out = divisors(layers);
  for (const auto p : divisors(layers + 2)) {
    if (p > 1 && (layers + 2) / p >= 2 && layers % p != 0) out.push_back(p);
  }
  for (std::int64_t p = 2; 2 * p <= layers; p *= 2)
    out.push_back(p);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The layers of p stages as even as they come: L / p each, the L mod p left over one each to
// the middle stages first (the first holds the embedding, the last the head and loss), then
// to the first stage and the last: DeepSeek-V3's 61 layers at PP 8 come out as 7, 8 x 5, 7, 7
// (NVIDIA's recipes run 7, 8 x 6, 6, the MTP module beside the last stage's layers;
// estimate --pp-layers takes either).
std::vector<std::int64_t> balanced_stages(std::int64_t layers, std::int64_t p) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(p), layers / p);
  std::int64_t left = layers % p;
  for (std::int64_t i = 1; i + 1 < p && left > 0; ++i, --left)
    ++out[static_cast<std::size_t>(i)];
  if (left > 0) ++out.front(), --left;
  if (left > 0) ++out.back();
  return out;
}

// The stage split of pp x v: Megatron-LM's own (even, or the embedding-and-loss rule) where it
// has one, else balanced_stages where every stage holds a layer per chunk; empty: none.
std::vector<std::int64_t> stage_split(const TransformerSpec& s, std::int64_t pp, std::int64_t v) {
  cost::Layout3D split;
  split.pp = pp;
  split.interleave = v;
  if (!cost::stage_split_problem(s, split)) return cost::layers_per_stage(s, split);
  auto out = balanced_stages(s.num_layers, pp);
  if (*std::min_element(out.begin(), out.end()) < v) return {};
  return out;
}

bool allowed(const std::vector<std::int64_t>& only, std::int64_t v) {
  return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
}

struct Space {
  const TransformerSpec& s;
  const Request3D& r;
  std::int64_t gpus, gpus_per_node, seq;
  std::vector<std::int64_t> cps;
  std::vector<cost::CpComm> cp_comms;
};

// The context-parallel sizes to try: the request's, else powers of two that leave each rank
// kMinTokensPerContextRank tokens, the sequence splitting into 2 x cp chunks.
std::vector<std::int64_t> context_sizes(const Request3D& r, std::int64_t seq) {
  if (!r.cps.empty()) return r.cps;
  std::vector<std::int64_t> out{1};
  for (std::int64_t cp = 2; seq / cp >= kMinTokensPerContextRank; cp *= 2) {
    if (seq % (2 * cp) == 0) out.push_back(cp);
  }
  return out;
}

// Ulysses needs the heads of a tensor-parallel rank to divide by cp; a sliding window shorter
// than the sequence is not modelled under context parallelism (check_layout says why).
bool context_fits(const TransformerSpec& s, std::int64_t tp, std::int64_t cp, cost::CpComm c,
                  std::int64_t seq, Attention attention) {
  if (cp == 1) return true;
  if (seq % (2 * cp) != 0 || attention != Attention::flash) return false;
  if (s.sliding_window > 0 && s.sliding_window < seq) return false;
  return c != cost::CpComm::a2a ||
         ((s.num_heads / tp) % cp == 0 && (s.num_kv_heads / tp) % cp == 0);
}

// The layout under each schedule the request allows that can run it (one pipeline stage has
// no schedule).
template <class Visit>
void for_each_schedule(const Request3D& r, cost::Layout3D& l, Visit& visit) {
  if (l.pp == 1 || r.schedules.empty()) {
    if (l.pp > 1 &&
        cost::schedule_problem(l.pipeline_schedule(), l.pp, l.interleave, l.micro_batches)) {
      return;
    }
    visit(l);
    return;
  }
  for (const auto s : r.schedules) {
    if (cost::schedule_problem(s, l.pp, l.interleave, l.micro_batches)) continue;
    l.schedule = s;
    visit(l);
  }
}

// The request's exchange options where Megatron-LM runs them: the overlapped all-to-alls with
// expert parallelism, interleaving under a pipeline and no full recomputation; DeepEP with
// expert parallelism over whole experts.
void set_exchange(const Request3D& r, cost::Layout3D& l) {
  const bool experts = l.framework == cost::Framework::megatron && l.ep > 1;
  l.overlap_ep_comm = r.overlap_ep_comm && experts && (l.pp == 1 || l.interleave > 1) &&
                      l.recompute != Checkpointing::full &&
                      !l.recompute_modules.has(RecomputeModule::moe);
  l.deepep = r.deepep && experts && l.expert_tp() == 1;
}

// A mixture of experts' expert layouts (parallel folding): ep dividing the experts, etp the
// tensor-parallel size or 1 (each expert whole, DeepSeek-V3's choice), etp x ep dividing the
// stage's tp x cp x dp GPUs, each as its framework runs it (cost::expert_layout_problem).
// Megatron-LM's MoE layer runs tensor parallelism only with sequence parallelism.
template <class Visit>
void for_each_expert_layout(const TransformerSpec& s, const Request3D& r, cost::Layout3D& l,
                            Visit& visit) {
  l.ep = 1;
  l.etp = 0;
  if (!s.moe.active()) {
    for_each_schedule(r, l, visit);
    return;
  }
  if (l.framework == cost::Framework::megatron && l.tp > 1 && !l.sequence_parallel) return;
  const std::int64_t ranks = l.tp * l.cp * l.dp;
  std::vector<std::int64_t> etps{l.tp};
  if (l.tp > 1) etps.push_back(1);
  for (const std::int64_t etp : etps) {
    if (!allowed(r.etps, etp) || s.moe.expert_ffn_size % etp) continue;
    for (std::int64_t ep = 1; ep <= s.moe.experts; ++ep) {
      if (s.moe.experts % ep || ranks % (etp * ep) || !allowed(r.eps, ep)) continue;
      l.ep = ep;
      l.etp = etp == l.tp ? 0 : etp;
      set_exchange(r, l);
      if (cost::expert_layout_problem(s, l)) continue;
      for_each_schedule(r, l, visit);
    }
  }
  l.ep = 1;
  l.etp = 0;
  l.overlap_ep_comm = l.deepep = false;
}

// Transformer Engine's recipes under Megatron-LM; torchao's tensorwise and rowwise under FSDP2.
bool runs_fp8(cost::Framework f, Fp8Recipe r) {
  if (r == Fp8Recipe::none) return true;
  if (f == cost::Framework::megatron) return r != Fp8Recipe::rowwise;
  return r == Fp8Recipe::tensorwise || r == Fp8Recipe::rowwise;
}

// Megatron-LM offloads the optimizer, FSDP2 parameters, gradients and optimizer together.
bool runs_offload(cost::Framework f, Offload o) {
  if (o == Offload::none) return true;
  return o == (f == cost::Framework::megatron ? Offload::optimizer : Offload::optimizer_and_params);
}

// The module sets Megatron-LM's selective recomputation is tried with: the request's, else the
// default and the discarding modules (together, and each alone where there are several).
std::vector<RecomputeModules> recompute_sets(const TransformerSpec& s, const Request3D& r) {
  if (!r.recompute_modules.empty()) return r.recompute_modules;
  std::vector<RecomputeModules> sets{RecomputeModules{}};
  const auto discarding = discarding_modules(s, r.fp8);
  if (discarding.bits == 0) return sets;
  sets.push_back(discarding);
  // Each alone too, where there are several: the one that fits may be enough.
  for (const auto& named : kRecomputeModules) {
    if (!discarding.has(named.value) ||
        discarding.bits == (1U << static_cast<unsigned>(named.value)))
      continue;
    auto one = RecomputeModules::empty();
    one.add(named.value);
    sets.push_back(one);
  }
  return sets;
}

// The layout under each recompute module set (Megatron-LM's selective recomputation; other
// modes and FSDP2 have the default set only) the model can run.
template <class Visit>
void for_each_recompute_set(const TransformerSpec& s, const Request3D& r, cost::Layout3D& l,
                            Visit& visit) {
  const bool sets =
      l.recompute == Checkpointing::selective && l.framework == cost::Framework::megatron;
  for (const auto& modules : sets ? recompute_sets(s, r) : std::vector<RecomputeModules>{{}}) {
    l.recompute_modules = modules;
    if (sets && cost::recompute_problem(s, l)) continue;
    for_each_expert_layout(s, r, l, visit);
  }
}

// The layout under each framework, sharding and offload mode the request allows.
template <class Visit>
void for_each_state_sharding(const TransformerSpec& s, const Request3D& r, cost::Layout3D& l,
                             Visit& visit) {
  using cost::DpSharding;
  using cost::Framework;
  const std::pair<Framework, DpSharding> modes[] = {{Framework::megatron, DpSharding::optimizer},
                                                    {Framework::fsdp2, DpSharding::parameters},
                                                    {Framework::fsdp2, DpSharding::gradients}};
  for (const auto& [framework, sharding] : modes) {
    if (!r.frameworks.empty() &&
        std::find(r.frameworks.begin(), r.frameworks.end(), framework) == r.frameworks.end()) {
      continue;
    }
    if (framework == Framework::fsdp2 && l.dp * l.cp == 1) continue;  // nothing to shard
    if (cost::optimizer_problem(framework, r.optimizer)) continue;
    if (cost::optimizer_impl_problem(framework, r.optimizer_impl)) continue;
    if (!runs_fp8(framework, r.fp8)) continue;
    l.framework = framework;
    l.sharding = sharding;
    const bool megatron = framework == Framework::megatron;
    l.overlap_grad_reduce = megatron && r.overlap_grad_reduce;
    l.overlap_param_gather =
        l.overlap_grad_reduce && r.overlap_param_gather && sharding == DpSharding::optimizer;
    l.ddp_bucket_params = l.overlap_grad_reduce ? r.ddp_bucket_params : 0;
    l.grad_reduce_bf16 = megatron && r.grad_reduce_bf16 && r.precision == Precision::bf16;
    l.fp8_param_gather = megatron && r.fp8_param_gather && r.fp8 != Fp8Recipe::none &&
                         sharding == DpSharding::optimizer;
    l.tp_comm_overlap = megatron && r.tp_comm_overlap && l.sequence_parallel;
    static const std::vector<Offload> every{Offload::none, Offload::optimizer,
                                            Offload::optimizer_and_params};
    for (const auto o : r.offloads.empty() ? every : r.offloads) {
      if (!runs_offload(framework, o)) continue;
      l.offload = o;
      for_each_recompute_set(s, r, l, visit);
    }
  }
}

// The pipelines, batch shapes, interleaving, sequence parallelism and recomputation of one
// tp x cp choice.
template <class Visit>
void enumerate_pipelines(const Space& sp, std::int64_t tp, std::int64_t cp, cost::CpComm cc,
                         Visit& visit) {
  const auto& s = sp.s;
  const auto& r = sp.r;
  for (auto pp : pipeline_depths(s.num_layers)) {
    if (!allowed(r.pps, pp) || sp.gpus % (tp * cp * pp)) continue;
    const std::int64_t dp = sp.gpus / (tp * cp * pp);
    if (r.global_batch % dp) continue;
    for (auto b : divisors(r.global_batch / dp)) {
      if (!allowed(r.micro_batches, b)) continue;
      const std::int64_t m = r.global_batch / dp / b;
      for (std::int64_t v = 1; v <= 8; v *= 2) {
        if (!allowed(r.interleaves, v)) continue;
        if (v > 1 && pp == 1) continue;
        const auto stages = stage_split(s, pp, v);
        if (stages.empty()) continue;
        for (bool seqp : {false, true}) {
          if (seqp && tp == 1) continue;
          if (!r.sequence_parallel.empty() &&
              std::find(r.sequence_parallel.begin(), r.sequence_parallel.end(), seqp) ==
                  r.sequence_parallel.end()) {
            continue;
          }
          for (auto rc : {Checkpointing::none, Checkpointing::selective, Checkpointing::full}) {
            if (!r.recompute.empty() &&
                std::find(r.recompute.begin(), r.recompute.end(), rc) == r.recompute.end()) {
              continue;
            }
            cost::Layout3D l;
            l.tp = tp;
            l.cp = cp;
            l.cp_comm = cc;
            l.pp = pp;
            l.dp = dp;
            l.interleave = v;
            l.sequence_parallel = seqp;
            l.micro_batch = b;
            l.micro_batches = m;
            l.seq_len = sp.seq;
            l.recompute = rc;
            l.precision = r.precision;
            l.fp8 = r.fp8;
            l.attention = r.attention;
            l.attention_kernel = r.attention_kernel;
            l.optimizer = r.optimizer;
            l.optimizer_impl = r.optimizer_impl;
            l.zero_grad = r.zero_grad;
            l.stage_layers = stages;
            for_each_state_sharding(s, r, l, visit);
          }
        }
      }
    }
  }
}

// Every layout of the space, handed to `visit`.
template <class Visit>
void enumerate(const Space& sp, Visit visit) {
  const auto& s = sp.s;
  const auto& r = sp.r;
  for (std::int64_t tp = 1; tp <= sp.gpus_per_node; tp *= 2) {
    if (!allowed(r.tps, tp) || s.num_heads % tp || s.num_kv_heads % tp) continue;
    for (auto cp : sp.cps) {
      for (auto cc : sp.cp_comms) {
        if (!context_fits(s, tp, cp, cc, sp.seq, r.attention)) continue;
        if (cp == 1 && cc != sp.cp_comms.front()) continue;  // no exchange to vary
        enumerate_pipelines(sp, tp, cp, cc, visit);
      }
    }
  }
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string out;
  for (auto x : v)
    out += (out.empty() ? "" : ",") + std::to_string(x);
  return out.empty() ? "none" : out;
}

// Why no layout exists: the sizes the model and the restrictions allow, and the batch rule.
// The sizes the model allows, and of them the ones the request allows ("1, 2, 4, 8; the
// request allows: none").
std::string sizes_text(const std::vector<std::int64_t>& valid,
                       const std::vector<std::int64_t>& requested) {
  std::vector<std::int64_t> kept;
  for (const auto v : valid) {
    if (allowed(requested, v)) kept.push_back(v);
  }
  if (requested.empty()) return join(valid);
  return join(valid) + "; of those the request allows: " + join(kept);
}

// For a mixture of experts: the expert sizes it allows and the request's.
std::string experts_reason(const TransformerSpec& s, const Request3D& r) {
  if (!s.moe.active()) return "";
  return "; ep must divide the " + std::to_string(s.moe.experts) + " experts (" +
         sizes_text(divisors(s.moe.experts), r.eps) +
         ") with etp x ep dividing tp x cp x dp, etp being tp or 1 (the request allows: " +
         (r.etps.empty() ? std::string("any") : join(r.etps)) + ")";
}

// FSDP2 alone: it shards over dp x cp, so a layout whose tp x pp takes every GPU has nothing to
// shard (torchtitan applies fully_shard only with data or context parallel ranks).
std::string fsdp2_reason(const Request3D& r) {
  if (r.frameworks.size() != 1 || r.frameworks.front() != cost::Framework::fsdp2) return "";
  return "; FSDP2 layouts need dp x cp > 1, something to shard (torchtitan shards over the "
         "data and context ranks only; with tp x pp on every GPU {framework} megatron runs it)";
}

std::string no_layout_reason(const TransformerSpec& s, const Request3D& r, std::int64_t gpus,
                             std::int64_t per_node, std::int64_t seq) {
  std::vector<std::int64_t> tps, pps, cps;
  for (std::int64_t cp = 1; cp <= seq / 2; cp *= 2) {
    const bool windowed = s.sliding_window > 0 && s.sliding_window < seq;
    if (seq % (2 * cp) == 0 && (cp == 1 || (r.attention == Attention::flash && !windowed)))
      cps.push_back(cp);
  }
  for (std::int64_t tp = 1; tp <= per_node; tp *= 2) {
    if (s.num_heads % tp == 0 && s.num_kv_heads % tp == 0) tps.push_back(tp);
  }
  pps = pipeline_depths(s.num_layers);
  const std::string attention =
      r.attention == Attention::flash
          ? ""
          : " (context parallelism needs fused attention: {attention} is " +
                std::string(name_of(r.attention)) + ")";
  return "no layout: tp must be a power of two up to " + std::to_string(per_node) + " dividing " +
         std::to_string(s.num_heads) + " heads and " + std::to_string(s.num_kv_heads) +
         " key/value heads (" + sizes_text(tps, r.tps) + "), pp must divide " +
         std::to_string(s.num_layers) + " layers or " + std::to_string(s.num_layers + 2) +
         ", or be a power of two up to half the layers (" + sizes_text(pps, r.pps) +
         "), cp must split the " + std::to_string(seq) + "-token sequence into 2 x cp chunks" +
         attention + " (" +
         sizes_text(cps.size() > 8 ? std::vector<std::int64_t>(cps.begin(), cps.begin() + 8) : cps,
                    r.cps) +
         "), and " + std::to_string(gpus) + " GPUs / (tp x cp x pp) must divide the global batch " +
         std::to_string(r.global_batch) + experts_reason(s, r) + fsdp2_reason(r);
}

// Module sets the request names must run on the model as Megatron-LM runs them: refused here,
// not searched past in silence.
void check_recompute_sets(const TransformerSpec& s, const Request3D& r) {
  if (r.recompute_modules.empty()) return;
  const auto named = [&](cost::Framework f) {
    return r.frameworks.empty() ||
           std::find(r.frameworks.begin(), r.frameworks.end(), f) != r.frameworks.end();
  };
  if (!named(cost::Framework::megatron)) {
    throw FieldError("recompute_modules",
                     "Megatron-LM's, and the layouts asked for run under fsdp2 only "
                     "(torchtitan's selective checkpointing is per op)");
  }
  if (!r.recompute.empty() && std::find(r.recompute.begin(), r.recompute.end(),
                                        Checkpointing::selective) == r.recompute.end()) {
    throw FieldError("recompute_modules", "needs selective among {checkpointing}");
  }
  for (const auto& set : r.recompute_modules) {
    cost::Layout3D l;
    l.recompute = Checkpointing::selective;
    l.recompute_modules = set;
    l.fp8 = r.fp8;
    if (const auto why = cost::recompute_problem(s, l)) throw Error(*why);
  }
}

}  // namespace

RecomputeModules discarding_modules(const TransformerSpec& s, Fp8Recipe fp8) {
  auto out = RecomputeModules::empty();
  const bool delayed = fp8 == Fp8Recipe::delayed;
  if (s.mla.active()) out.add(RecomputeModule::mla_up_proj);
  if ((s.mla.active() || s.moe.active()) && !delayed) out.add(RecomputeModule::layernorm);
  if (s.moe.active() && !delayed) out.add(RecomputeModule::moe_act);
  return out;
}

namespace {

// The GPU counts to try: the request's list (each within the cluster), else `gpus` or all.
std::vector<std::int64_t> counts_of(const Request3D& r, std::int64_t cluster) {
  for (const auto n : r.gpu_counts) {
    if (n < 1 || n > cluster) {
      throw Error("GPU count " + std::to_string(n) + ": the cluster has " +
                  std::to_string(cluster));
    }
  }
  if (!r.gpu_counts.empty()) return r.gpu_counts;
  const std::int64_t gpus = r.gpus > 0 ? r.gpus : cluster;
  if (gpus > cluster) {
    throw Error("gpus " + std::to_string(gpus) + ": the cluster has " + std::to_string(cluster));
  }
  return {gpus};
}

// The shape a ranked layout stands for: the best micro-batch and recompute mode of each.
using ShapeKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                            int, std::int64_t, std::int64_t, bool, int, int>;
ShapeKey shape_key(const cost::Layout3D& l) {
  const int schedule = l.pp > 1 ? static_cast<int>(l.pipeline_schedule()) : -1;
  return {l.gpus(),
          l.tp,
          l.cp,
          l.ep,
          l.expert_tp(),
          static_cast<int>(l.cp_comm),
          l.pp,
          l.interleave,
          l.sequence_parallel,
          schedule,
          (static_cast<int>(l.framework) * 8 + static_cast<int>(l.sharding)) * 8 +
              static_cast<int>(l.offload)};
}

}  // namespace

RejectedLayout::RejectedLayout(Candidate3D&& c, Reason why, double by)
    : layout(std::move(c.layout)),
      memory(c.memory),
      objective(c.objective),
      reason(why),
      amount(by) {
  c.time.dp_ops = {};
  time = std::make_shared<const cost::Time3D>(std::move(c.time));
}

Candidate3D RejectedLayout::candidate() const {
  Candidate3D c{layout, {}, time ? *time : cost::Time3D{}, objective};
  static_cast<cost::Memory3DFigures&>(c.memory) = memory;
  return c;
}

namespace {

bool better(const Candidate3D& a, const Candidate3D& b) {
  if (a.objective != b.objective) return a.objective < b.objective;
  return a.memory.total() < b.memory.total();
}

// The fitting layouts' order, best first (ties in the order they were priced). Indices are
// sorted, not the candidates: a Candidate3D is large and a sort moves each one many times.
std::vector<std::size_t> ranking(const std::deque<Candidate3D>& fits) {
  std::vector<std::size_t> order(fits.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return better(fits[a], fits[b]); });
  return order;
}

void rank(const std::deque<Candidate3D>& fits, const std::vector<std::size_t>& order,
          const Request3D& r, Result3D& out) {
  std::set<ShapeKey> seen;
  for (const auto i : order)  // best first: the first of each framework stays
    out.best_of_framework.try_emplace(fits[i].layout.framework, fits[i]);
  for (const auto i : order) {
    const auto& c = fits[i];
    if (!seen.insert(shape_key(c.layout)).second) continue;
    out.ranked.push_back(c);
    if (static_cast<std::int64_t>(out.ranked.size()) >= r.top_k) break;
  }
}

// All but the best, offered as rejected (the fitting layouts are not used after).
void reject_slower(std::deque<Candidate3D>& fits, const std::vector<std::size_t>& order,
                   detail::RejectedKeeper& rejected) {
  for (std::size_t k = 1; k < order.size(); ++k) {
    auto& c = fits[order[k]];
    const double behind = 100.0 * (c.objective / fits[order.front()].objective - 1.0);
    rejected.offer(Reason::slower, behind, c.layout,
                   [&] { return RejectedLayout(std::move(c), Reason::slower, behind); });
  }
  fits.clear();
}

void pareto(const std::deque<Candidate3D>& fits, const std::vector<std::size_t>& order,
            Result3D& out) {
  std::vector<std::reference_wrapper<const Candidate3D>> ranked;
  ranked.reserve(order.size());
  for (const auto i : order)
    ranked.emplace_back(fits[i]);
  using Ref = std::reference_wrapper<const Candidate3D>;
  const auto front = detail::pareto_front(
      ranked, [](const Ref& c) { return c.get().memory.total(); },
      [](const Ref& c) { return c.get().objective; });
  for (const auto* c : front)
    out.pareto.push_back(c->get());
}

// A layout over memory: rejected, and the nearest miss of its framework if it is one.
void over_memory(const cost::Layout3D& l, const cost::Memory3D& mem, cost::Model3D& model,
                 detail::RejectedKeeper& rejected, Result3D& out) {
  ++out.out_of_memory;
  const double total = static_cast<double>(mem.total().value);
  const double over_gib = (total - out.usable_bytes) / double(1LL << 30);
  rejected.offer(Reason::out_of_memory, over_gib, l,
                 [&] { return RejectedLayout(l, mem, Reason::out_of_memory, over_gib); });
  const auto found = out.nearest_miss_of_framework.find(l.framework);
  if (found != out.nearest_miss_of_framework.end() &&
      total >= double(found->second.memory.total().value)) {
    return;
  }
  out.nearest_miss_of_framework[l.framework] = Candidate3D{l, mem, model.time(l), 0};
}

// Bytes a node's offloaded states exceed its host memory by (<= 0: they fit).
double host_over_bytes(const cost::Layout3D& l, const cost::Memory3D& mem, const Request3D& r,
                       std::int64_t gpus_per_node) {
  if (mem.host.value == 0 || r.host_per_node.value <= 0) return 0;
  const auto on_node = static_cast<double>(std::min(l.gpus(), gpus_per_node));
  return static_cast<double>(mem.host.value) * on_node - static_cast<double>(r.host_per_node.value);
}

// The least over memory of all frameworks, when nothing fits.
std::optional<Candidate3D> nearest_of_all(const Result3D& out) {
  std::optional<Candidate3D> nearest;
  for (const auto& [framework, miss] : out.nearest_miss_of_framework) {
    if (!nearest || miss.memory.total() < nearest->memory.total()) nearest = miss;
  }
  return nearest;
}

}  // namespace

Result3D search_3d(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                   const GpuSpec& gpu, const Request3D& r, const cost::ComputeConstants& k,
                   const cost::OverheadConstants& overheads,
                   std::shared_ptr<cost::CommContext> comm) {
  const auto start = std::chrono::steady_clock::now();
  if (!m.transformer) {
    throw Error("model " + m.name + ": tensor and pipeline parallelism need layer shapes");
  }
  if (r.global_batch < 1) throw Error("global batch: a positive number of samples");
  if (r.rejected_kept < -1) {
    throw Error("rejected layouts kept: " + std::to_string(r.rejected_kept) +
                " (-1 keeps all, n >= 0 the n nearest of each reason)");
  }
  check_recompute_sets(*m.transformer, r);
  const auto counts = counts_of(r, t.gpu_count());
  std::int64_t seq = r.seq_len;
  sequence_length(m, seq);
  if (seq == 0) seq = m.transformer->max_positions;
  Result3D out;
  out.usable_bytes = static_cast<double>(gpu.memory.value) * (1 - r.headroom);
  cost::Model3D model(m, t, table, gpu, k, std::move(comm));
  std::deque<Candidate3D> fits;  // a deque: growing a vector held two copies at its peak
  // The stage pieces and activations the layouts share, a cache per thread; freed once they
  // are priced, before the ranking (the plan's peak memory).
  auto memory = std::make_unique<detail::MemoryBatches>(m, overheads, r.threads);
  detail::RejectedKeeper rejected(r.rejected_kept);
  auto price = [&](const cost::Layout3D& l, const cost::Memory3D& mem) {
    ++out.evaluated;
    const double total = static_cast<double>(mem.total().value);
    if (total > out.usable_bytes) {
      over_memory(l, mem, model, rejected, out);
      return;
    }
    if (const double over = host_over_bytes(l, mem, r, t.gpus_per_node()); over > 0) {
      ++out.host_out_of_memory;
      const double over_gib = over / double(1LL << 30);
      rejected.offer(Reason::host_out_of_memory, over_gib, l,
                     [&] { return RejectedLayout(l, mem, Reason::host_out_of_memory, over_gib); });
      return;
    }
    Candidate3D c{l, mem, model.time(l), 0};
    c.objective = objective_value(r.goal, c.time.step_s, l.global_batch(), l.gpus());
    if (r.goal.max_run_s > 0 &&
        run_seconds(r.goal, c.time.step_s, l.global_batch()) > r.goal.max_run_s) {
      ++out.past_deadline;
      const double over_h =
          (run_seconds(r.goal, c.time.step_s, l.global_batch()) - r.goal.max_run_s) / 3600.0;
      rejected.offer(Reason::past_deadline, over_h, l,
                     [&] { return RejectedLayout(std::move(c), Reason::past_deadline, over_h); });
      return;
    }
    fits.push_back(std::move(c));
  };
  // Layouts are priced for memory a batch at a time on the threads, then in the order met.
  std::vector<cost::Layout3D> batch;
  std::vector<cost::Memory3D> figures;
  auto flush = [&] {
    const auto priced = memory->price(batch, figures);
    for (std::size_t i = 0; i < priced.count; ++i)
      price(batch[i], figures[i]);
    if (priced.error) std::rethrow_exception(priced.error);
    batch.clear();
  };
  auto add = [&](const cost::Layout3D& l) {
    if (auto why = cost::expert_exchange_problem(l, t.gpus_per_node())) {
      if (out.exchange_unpriced++ == 0) out.exchange_unpriced_why = std::move(*why);
      return;
    }
    batch.push_back(l);
    if (batch.size() == kMemoryBatch) flush();
  };
  for (const auto gpus : counts) {
    const Space space{
        *m.transformer,
        r,
        gpus,
        t.gpus_per_node(),
        seq,
        context_sizes(r, seq),
        r.cp_comms.empty() ? std::vector<cost::CpComm>{cost::CpComm::p2p} : r.cp_comms};
    enumerate(space, add);
  }
  flush();
  memory.reset();
  if (out.evaluated == 0) {
    out.no_layout = no_layout_reason(
        *m.transformer, r, *std::max_element(counts.begin(), counts.end()), t.gpus_per_node(), seq);
  }
  out.fit = static_cast<std::int64_t>(fits.size());
  const auto order = ranking(fits);
  rank(fits, order, r, out);
  pareto(fits, order, out);
  reject_slower(fits, order, rejected);
  rejected.finish(out);
  if (out.ranked.empty()) out.nearest_miss = nearest_of_all(out);
  for (const auto& [framework, best] : out.best_of_framework)
    out.nearest_miss_of_framework.erase(framework);
  out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace dtplan::planner
