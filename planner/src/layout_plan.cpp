// A layout as the Plan file dtplan-run executes (layout_plan.hpp).
#include "dtplan/planner/layout_plan.hpp"

#include <vector>

#include "dtplan/cost/layout_text.hpp"
#include "dtplan/cost/runtime_run.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::planner {

namespace {

// What the layout has that a Plan file does not record (dtplan-run splits blocks by tensor and
// pipeline, nothing else), each with the dtplan plan flag that leaves it out; empty when it has
// none.
std::vector<std::string> unrecorded_parts(const cost::Layout3D& l, const ModelDesc& m) {
  std::vector<std::string> parts;
  if (l.cp > 1) parts.push_back("context parallelism (cp " + std::to_string(l.cp) + "; --cp 1)");
  if (l.ep > 1 || (m.transformer && m.transformer->moe.active())) {
    parts.emplace_back("a mixture of experts");
  }
  if (l.sequence_parallel) parts.emplace_back("sequence parallelism (--sp off)");
  if (l.interleave > 1) {
    parts.push_back("an interleaved pipeline (" + std::to_string(l.interleave) +
                    " chunks per GPU; --interleave 1)");
  } else if (l.pp > 1 && l.pipeline_schedule() != cost::PipelineSchedule::one_f_one_b) {
    parts.push_back("the " + std::string(name_of(l.pipeline_schedule())) +
                    " schedule (--schedule 1f1b)");
  }
  if (l.fp8 != Fp8Recipe::none) parts.emplace_back("FP8 GEMMs");
  if (l.offload != Offload::none) parts.emplace_back("offloaded states (--offload none)");
  if (l.hybrid()) parts.emplace_back("hybrid sharding");
  return parts;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

// The memory model's settings for the layout (cost::layout_training: the framework's optimizer
// step, no_sync as it reduces), with what a Plan records beyond them.
TrainingConfig training_of(const cost::Layout3D& l, const PlanRequest& r,
                           std::int64_t gpus_per_node) {
  TrainingConfig t = cost::layout_training(l);
  t.strategy = strategy_of(l);
  t.layer_kernels = l.layer_kernels;
  t.dp_size = l.dp;  // context parallelism is refused before this
  t.gpus_per_node = gpus_per_node;
  if (t.seq_len == 0) t.seq_len = r.seq_len;
  t.recompute_modules = l.recompute_modules;
  t.selective_policy = cost::selective_policy_of(l.framework);
  t.checkpoint_every = l.checkpoint_every;
  t.attention_kernel = l.attention_kernel;
  // Megatron-LM reduces the gradients once, after the last micro-batch: dtplan-run's no_sync.
  // (The memory model keeps it apart; FSDP2 defers only under a pipeline.)
  if (l.framework == cost::Framework::megatron) t.no_sync = true;
  return t;
}

}  // namespace

Strategy strategy_of(const cost::Layout3D& l) {
  const bool fsdp2 = l.framework == cost::Framework::fsdp2;
  switch (l.sharding) {
    case cost::DpSharding::none:
      return Strategy::ddp;
    case cost::DpSharding::optimizer:
      return Strategy::zero1;
    case cost::DpSharding::gradients:
      return fsdp2 ? Strategy::fsdp_grad_op : Strategy::zero2;
    case cost::DpSharding::parameters:
      return fsdp2 ? Strategy::fsdp_full : Strategy::zero3;
  }
  return Strategy::ddp;
}

std::variant<Plan, std::string> layout_plan_file(const Candidate3D& c, const PlanRequest& r,
                                                 const ModelDesc& m, const PlanTarget& target) {
  const auto& l = c.layout;
  if (const auto parts = unrecorded_parts(l, m); !parts.empty()) {
    return "it has " + joined(parts) + ", which dtplan-run does not execute";
  }
  auto p = plan_for(m, target, training_of(l, r, target.gpus_per_node));
  p.tp = l.tp;
  p.pp = l.pp;
  p.grad_accum = l.micro_batches;
  p.global_batch = l.global_batch();
  p.no_sync = p.training.no_sync;
  p.predicted = {c.time.step_s, c.time.samples_per_s, c.time.tokens_per_s, c.time.mfu,
                 c.memory.total().value};
  try {
    (void)cost::runtime_run_of(p, m, 1.0);  // the runtime's own refusals, before writing
  } catch (const Error& e) {
    return "dtplan-run would refuse it: " + std::string(e.what());
  }
  return p;
}

}  // namespace dtplan::planner
