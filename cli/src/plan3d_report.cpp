// Tensor x pipeline x data-parallel report (see plan3d_report.hpp).
#include "plan3d_report.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

std::string ms(double s) {
  return s > 0 ? seconds(s) : "-";
}

// A part of the step in prose: "none" when the layout has no such part.
std::string part(double s) {
  return s > 0 ? seconds(s) : "none";
}

// The best ZeRO-3 or FSDP full-sharding outcome, if either fits; else the nearest miss.
const planner::StrategyOutcome* sharded_outcome(const std::vector<planner::StrategyOutcome>& all) {
  const planner::StrategyOutcome* best = nullptr;
  for (const auto& o : all) {
    if (o.strategy != Strategy::zero3 && o.strategy != Strategy::fsdp_full) continue;
    if (!best || (o.best && (!best->best || o.best->step_time_s < best->best->step_time_s)))
      best = &o;
  }
  return best;
}

}  // namespace

nlohmann::json layout_json(const planner::Candidate3D& c) {
  const auto& l = c.layout;
  const auto& t = c.time;
  return {{"tp", l.tp},
          {"pp", l.pp},
          {"dp", l.dp},
          {"cp", l.cp},
          {"framework", std::string(name_of(l.framework))},
          {"sharding", std::string(name_of(l.sharding))},
          {"shard_ranks", l.shard_ranks()},
          {"cp_comm", l.cp > 1 ? std::string(name_of(l.cp_comm)) : "none"},
          {"interleave", l.interleave},
          {"schedule", l.pp > 1 ? std::string(name_of(l.pipeline_schedule())) : "none"},
          {"stage_layers", l.stage_layers},
          {"heaviest_stage", c.memory.stage},
          {"sequence_parallel", l.sequence_parallel},
          {"micro_batch", l.micro_batch},
          {"micro_batches", l.micro_batches},
          {"recompute", std::string(name_of(l.recompute))},
          {"memory_bytes", c.memory.total().value},
          {"memory",
           {{"weights", c.memory.weights.value},
            {"gradients", c.memory.gradients.value},
            {"optimizer_states", c.memory.optimizer_states.value},
            {"activations", c.memory.activations.value},
            {"logits", c.memory.logits.value},
            {"buffers", c.memory.buffers.value},
            {"overhead", c.memory.overhead.value}}},
          {"step_time_s", t.step_s},
          {"samples_per_s", t.samples_per_s},
          {"tokens_per_s", t.tokens_per_s},
          {"mfu", t.mfu},
          {"time",
           {{"compute_per_microbatch_s", t.compute_s},
            {"tp_comm_per_microbatch_s", t.tp_comm_s},
            {"cp_comm_per_microbatch_s", t.cp_comm_s},
            {"fsdp_comm_per_microbatch_s", t.fsdp_comm_s},
            {"p2p_per_microbatch_s", t.p2p_s},
            {"pipeline_s", t.pipeline_s},
            {"bubble_s", t.bubble_s},
            {"dp_sync_s", t.dp_sync_s},
            {"optimizer_s", t.optimizer_s}}}};
}

namespace {

// "7, 8 x 14, 7": equal neighbours as one run.
std::string runs_text(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i])
      ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(v[i]);
    if (j - i > 1) out += " x " + std::to_string(j - i);
    i = j;
  }
  return out;
}

}  // namespace

std::string layout_text(const cost::Layout3D& l) {
  std::ostringstream s;
  s << "tp " << l.tp;
  if (l.cp > 1) s << " x cp " << l.cp << " (" << name_of(l.cp_comm) << ")";
  s << " x pp " << l.pp << " x dp " << l.dp;
  if (l.framework == cost::Framework::fsdp2) {
    s << ", FSDP2 over " << l.shard_ranks() << " ranks ("
      << (l.sharding == cost::DpSharding::gradients
              ? "blocks kept gathered from forward to backward"
              : "resharded after forward")
      << ")";
  } else if (l.sharding == cost::DpSharding::none) {
    s << ", no distributed optimizer";
  }
  if (l.interleave > 1) s << ", interleave " << l.interleave;
  if (l.pp > 1) s << ", schedule " << name_of(l.pipeline_schedule());
  const auto& split = l.stage_layers;
  if (!split.empty() &&
      std::adjacent_find(split.begin(), split.end(), std::not_equal_to<>()) != split.end()) {
    s << ", layers per stage " << runs_text(split);
  }
  if (l.sequence_parallel) s << ", sequence parallel";
  s << ", micro-batch " << l.micro_batch << " x " << l.micro_batches << ", recompute "
    << name_of(l.recompute);
  return s.str();
}

// Who holds the model states: "dist-opt" (Megatron's distributed optimizer), "replicated",
// "fsdp2" (sharded, blocks gathered per pass), "fsdp2-keep" (gathered forward to backward).
std::string states_text(const cost::Layout3D& l) {
  if (l.framework == cost::Framework::fsdp2)
    return l.sharding == cost::DpSharding::gradients ? "fsdp2-keep" : "fsdp2";
  return l.sharding == cost::DpSharding::optimizer ? "dist-opt" : "replicated";
}

void print_plan_3d(std::ostream& out, const Plan3DReport& r) {
  const auto& x = r.layouts;
  out << "\ntensor x context x pipeline x data parallel (Megatron-LM with its distributed "
         "optimizer, or FSDP2 as torchtitan runs it; bf16): "
      << x.evaluated << " layouts evaluated in " << ms(x.elapsed_s) << ": " << x.fit
      << " fit (the fastest of each shape below), " << x.out_of_memory << " over memory\n";
  if (x.ranked.empty()) {
    if (!x.no_layout.empty()) {
      out << "  " << x.no_layout << "\n";
      return;
    }
    out << "  none fits";
    if (x.nearest_miss) {
      out << "; nearest: " << layout_text(x.nearest_miss->layout) << " needs "
          << gib(x.nearest_miss->memory.total()) << " GiB";
    }
    out << "\n";
  } else {
    TextTable t({"#",       "tp",        "cp",        "pp",     "dp",     "states",
                 "v",       "schedule",  "sp",        "micro",  "m",      "recompute",
                 "GiB/GPU", "step",      "samples/s", "MFU",    "bubble", "TP comm",
                 "CP comm", "FSDP comm", "p2p",       "DP sync"});
    for (std::size_t i = 0; i < x.ranked.size(); ++i) {
      const auto& c = x.ranked[i];
      const auto& l = c.layout;
      const auto& tm = c.time;
      const double m = static_cast<double>(l.micro_batches);
      t.add_row({std::to_string(i + 1),
                 std::to_string(l.tp),
                 l.cp > 1 ? std::to_string(l.cp) + " " + std::string(name_of(l.cp_comm)) : "1",
                 std::to_string(l.pp),
                 std::to_string(l.dp),
                 states_text(l),
                 std::to_string(l.interleave),
                 l.pp > 1 ? std::string(name_of(l.pipeline_schedule())) : "-",
                 l.sequence_parallel ? "yes" : "no",
                 std::to_string(l.micro_batch),
                 std::to_string(l.micro_batches),
                 std::string(name_of(l.recompute)),
                 gib(c.memory.total()),
                 ms(tm.step_s),
                 fixed(tm.samples_per_s, 2),
                 percent(tm.mfu),
                 ms(tm.bubble_s),
                 ms(tm.tp_comm_s * m),
                 ms(tm.cp_comm_s * m),
                 ms(tm.fsdp_comm_s * m),
                 ms(tm.p2p_s * m),
                 ms(tm.dp_sync_s)});
    }
    t.print(out);
  }
  const auto outcomes = planner::by_strategy(r.sharded);
  const auto* z = sharded_outcome(outcomes);
  if (!z) return;
  const std::string name(name_of(z->strategy));
  if (z->best && !x.ranked.empty()) {
    const double ours = x.ranked.front().time.step_s, theirs = z->best->step_time_s;
    out << "compared with full sharding: the best " << name << " plan (micro-batch "
        << z->best->micro_batch << " x " << z->best->grad_accum << ", checkpointing "
        << name_of(z->best->checkpointing) << ", " << gib(z->best->memory) << " GiB) takes "
        << ms(theirs) << " per step; the best 3D layout is "
        << (ours <= theirs ? percent(theirs / ours - 1) + " faster"
                           : percent(ours / theirs - 1) + " slower")
        << "\n";
    const auto& tm = x.ranked.front().time;
    out << "  where the best layout's step goes: compute "
        << ms(tm.compute_s * double(x.ranked.front().layout.micro_batches)) << ", pipeline bubble "
        << part(tm.bubble_s) << ", tensor-parallel all-reduces "
        << part(tm.tp_comm_s * double(x.ranked.front().layout.micro_batches))
        << ", context-parallel exchange "
        << part(tm.cp_comm_s * double(x.ranked.front().layout.micro_batches))
        << ", FSDP gathers and reductions "
        << part(tm.fsdp_comm_s * double(x.ranked.front().layout.micro_batches))
        << ", pipeline sends " << part(tm.p2p_s * double(x.ranked.front().layout.micro_batches))
        << ", data-parallel gradients " << part(tm.dp_sync_s) << ", optimizer "
        << ms(tm.optimizer_s) << "\n";
  } else if (!z->best) {
    out << "compared with full sharding: " << name << " does not fit";
    if (z->nearest_miss)
      out << " (nearest miss " << fixed(z->nearest_miss->amount, 2) << " GiB over)";
    out << "\n";
  }
}

nlohmann::json plan_3d_json(const Plan3DReport& r) {
  nlohmann::json j;
  j["evaluated"] = r.layouts.evaluated;
  j["fit"] = r.layouts.fit;  // evaluated = fit + out_of_memory
  j["out_of_memory"] = r.layouts.out_of_memory;
  j["elapsed_s"] = r.layouts.elapsed_s;
  j["ranked"] = nlohmann::json::array();
  for (const auto& c : r.layouts.ranked)
    j["ranked"].push_back(layout_json(c));
  j["nearest_miss"] =
      r.layouts.nearest_miss ? layout_json(*r.layouts.nearest_miss) : nlohmann::json();
  return j;
}

}  // namespace dtplan::cli
