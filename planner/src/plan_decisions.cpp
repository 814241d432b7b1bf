// What a plan decides beyond its ranking (see plan_decisions.hpp).
#include "dtplan/planner/plan_decisions.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "dtplan/cost/layout_text.hpp"

namespace dtplan::planner {

std::string one_decimal(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

namespace {

std::string behind_word(Objective o) {
  return o == Objective::cost ? "costlier" : "slower";
}

}  // namespace

ExportChoice deepspeed_choice(const PlanResult& result, Objective objective) {
  const auto& best = *result.best;
  const auto zero = best_among(result, {Strategy::zero1, Strategy::zero2, Strategy::zero3});
  if (!zero || zero->best->strategy == best.strategy) return {best, {}};
  const auto& z = *zero->best;
  return {z, "DeepSpeed does not run " + std::string(name_of(best.strategy)) +
                 "; the DeepSpeed config and deepspeed line hold the best ZeRO plan, " +
                 std::string(name_of(zero->strategy)) + " with micro-batch " +
                 std::to_string(z.micro_batch) + " x accumulation " + std::to_string(z.grad_accum) +
                 " x " + std::to_string(z.dp) + " GPUs, " + one_decimal(zero->behind_pct) + "% " +
                 behind_word(objective)};
}

std::optional<std::string> layout_beats_exports_note(const UnifiedPlan& p, Objective objective,
                                                     bool plan_file) {
  const auto* best = p.best();
  if (!best || best->data_parallel || !p.data_parallel.best) return std::nullopt;
  const auto& dp = *p.data_parallel.best;
  const auto framework = best->layout->layout.framework;
  return "the best plan is a layout (" + cost::describe(best->layout->layout) +
         "); the DeepSpeed, Accelerate" + (plan_file ? " and Plan files" : " files") +
         " and launch lines hold the best "
         "data-parallel plan, " +
         std::string(name_of(dp.strategy)) + " on " + std::to_string(dp.dp) + " GPUs, " +
         one_decimal(p.behind_pct(dp.objective)) + "% " + behind_word(objective) + "; " +
         (framework == cost::Framework::megatron ? "{export_megatron}" : "{export_torchtitan}") +
         " writes the layout";
}

namespace {

// The best outcome of one alternative: the best objective among those that fit, else the least
// memory over.
struct Outcome {
  std::optional<double> objective;
  double over_gib = 0;
  bool over = false;
  void fit(double o) {
    if (!objective || o < *objective) objective = o;
  }
  void missed(double gib) {
    if (!over || gib < over_gib) over_gib = gib;
    over = true;
  }
};

// Each alternative to the chosen layout's `name` the search priced, at its best, nearest first:
// those that fit by how far behind, then those over memory by how much; eight at most.
// Empty when the search priced no alternative.
template <class Name>
std::string alternatives(const UnifiedPlan& p, Objective objective, const Name& name) {
  const auto& chosen = name(p.best()->layout->layout);
  std::map<std::string, Outcome> outcomes;
  for (const auto& r : p.rejected) {
    const auto* layout = p.layout_of(r);
    if (!layout) continue;
    const auto key = name(*layout);
    if (key == chosen) continue;
    auto& o = outcomes[key];
    if (r.reason == Reason::out_of_memory || r.reason == Reason::host_out_of_memory) {
      o.missed(r.amount);
    } else if (r.reason == Reason::slower) {
      o.fit(p.objective_of(r));
    }
  }
  std::vector<std::pair<std::string, Outcome>> ordered(outcomes.begin(), outcomes.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    const auto& x = a.second;
    const auto& y = b.second;
    if (x.objective.has_value() != y.objective.has_value()) return x.objective.has_value();
    return x.objective ? *x.objective < *y.objective : x.over_gib < y.over_gib;
  });
  std::string text;
  int shown = 0;
  for (const auto& [key, o] : ordered) {
    if (!o.objective && !o.over) continue;
    if (shown++ == 8) {
      text += "; ...";
      break;
    }
    text += "; " + key + ": ";
    text += o.objective ? one_decimal(p.behind_pct(*o.objective)) + "% " + behind_word(objective)
                        : "out of memory by " + one_decimal(o.over_gib) + " GiB";
  }
  return text;
}

std::string expert_layout_name(const cost::Layout3D& l) {
  return "ep " + std::to_string(l.ep) + " x etp " + std::to_string(l.expert_tp());
}

// A layout's recomputation: its mode, and under selective its modules.
std::string recompute_name(const cost::Layout3D& l) {
  if (l.recompute != Checkpointing::selective) return std::string(name_of(l.recompute));
  return "selective (" + text_of(l.recompute_modules) + ")";
}

}  // namespace

std::optional<std::string> expert_layout_note(const UnifiedPlan& p, Objective objective) {
  const auto* best = p.best();
  if (!best || !best->layout || !p.layouts) return std::nullopt;
  const auto& chosen = best->layout->layout;
  const bool experts =
      std::any_of(p.rejected.begin(), p.rejected.end(), [&p](const RejectedChoice& r) {
        const auto* layout = p.layout_of(r);
        if (!layout) return false;
        const auto& l = *layout;
        return l.ep > 1 || l.etp > 0;
      });
  if (!experts && chosen.ep == 1 && chosen.etp == 0) return std::nullopt;
  return "expert layout " + expert_layout_name(chosen) + " (tp " + std::to_string(chosen.tp) +
         ") chosen" + alternatives(p, objective, expert_layout_name) +
         " (each at its best; {ep}, {etp} restrict them)";
}

std::optional<std::string> recompute_note(const UnifiedPlan& p, Objective objective) {
  const auto* best = p.best();
  if (!best || !best->layout || !p.layouts) return std::nullopt;
  const auto& chosen = best->layout->layout;
  const bool modules =
      std::any_of(p.rejected.begin(), p.rejected.end(), [&p](const RejectedChoice& r) {
        const auto* layout = p.layout_of(r);
        if (!layout) return false;
        const auto& l = *layout;
        return l.recompute == Checkpointing::selective && !l.recompute_modules.is_default();
      });
  const bool chosen_modules =
      chosen.recompute == Checkpointing::selective && !chosen.recompute_modules.is_default();
  if (!modules && !chosen_modules) return std::nullopt;
  return "recompute " + recompute_name(chosen) + " chosen" +
         alternatives(p, objective, recompute_name) +
         " (each at its best; {checkpointing}, {recompute_modules} restrict them)";
}

std::optional<std::string> idle_gpus_note(const PlanResult& result, std::int64_t batch) {
  if (!result.best) return std::nullopt;
  std::int64_t largest = 0;
  for (const auto& r : result.rejected) {
    if (r.reason == Reason::batch_unreachable && r.config.micro_batch == 0) {
      largest = std::max(largest, r.config.dp);
    }
  }
  if (largest <= result.best->dp) return std::nullopt;
  const auto below = batch / largest * largest;
  std::string text = "global batch " + std::to_string(batch) + " is not a multiple of " +
                     std::to_string(largest) + " GPUs, so the plan uses " +
                     std::to_string(result.best->dp) + "; on " + std::to_string(largest) + " GPUs ";
  text += below > 0 ? std::to_string(below) + " or " + std::to_string(below + largest)
                    : std::to_string(largest);
  return text + " would be reachable ({global_batch})";
}

CandidateEstimator::CandidateEstimator(const ModelDesc& m, const Topology& t,
                                       const InterconnectTable& table, const GpuSpec& gpu,
                                       const cost::ComputeConstants& k,
                                       const cost::OverheadConstants& overheads,
                                       const PlanRequest& r,
                                       std::shared_ptr<cost::CommContext> comm)
    : model_(m),
      topology_(t),
      table_(table),
      gpu_(gpu),
      compute_(k),
      overheads_(overheads),
      request_(r),
      comm_(std::move(comm)) {}

cost::StepEstimate CandidateEstimator::operator()(const Candidate& c) const {
  const auto config =
      training_config(c, request_, topology_.gpus_per_node(), topology_.node().gpus_per_host);
  cost::CommModel all(topology_, table_, config.dp_size, comm_);
  cost::CommModel node(topology_, table_, std::min(config.dp_size, topology_.gpus_per_node()),
                       comm_);
  return cost::estimate_step(model_, config, {c.grad_accum, c.no_sync, 1.0}, gpu_, compute_,
                             overheads_, {all, node});
}

}  // namespace dtplan::planner
