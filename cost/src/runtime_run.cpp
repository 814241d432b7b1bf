#include "dtplan/cost/runtime_run.hpp"

#include <algorithm>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

// The plan's activation recomputation, as dtplan-run executes it: every block, or the
// attention core.
Checkpointing recompute_of(const TrainingConfig& t) {
  if (t.checkpointing == Checkpointing::full && t.checkpoint_every != 1) {
    throw Error("/checkpoint_every: " + std::to_string(t.checkpoint_every) +
                ": dtplan-run recomputes every block under full checkpointing, not every Nth");
  }
  if (t.checkpointing == Checkpointing::selective &&
      (t.selective_policy != SelectivePolicy::modules || !t.recompute_modules.is_default())) {
    throw Error(
        "/recompute_modules: dtplan-run's selective checkpointing recomputes the "
        "attention core (core_attn) only");
  }
  return t.checkpointing;
}

// Pipeline stages split the stack; with a tied embedding the first and last stage sum its
// gradient whole, which gradients sharded by ZeRO-2/3 do not allow.
void check_tied_stages(const Plan& plan, const DenseStack& stack) {
  const auto s = plan.training.strategy;
  const auto mode = traits_of(s).runtime;
  const bool sharded_gradients = mode == RuntimeMode::zero2 || mode == RuntimeMode::zero3;
  if (plan.pp > 1 && stack.tied && sharded_gradients) {
    throw Error("/strategy: " + std::string(name_of(s)) +
                " with a tied embedding across pipeline stages: the stages' embedding "
                "gradients are summed whole, which sharded gradients do not allow (use ddp or "
                "zero1)");
  }
}

// What the plan asks for that dtplan-run does not execute: refused, so that a measurement is
// never read as confirming a plan it did not run.
void check_executed(const TrainingConfig& t) {
  if (t.offload != Offload::none) {
    throw Error("/offload: " + std::string(name_of(t.offload)) +
                ": dtplan-run keeps every state on the device and steps the optimizer there; it "
                "does not execute offloaded states (plan with --offload none)");
  }
  if (t.fp8 != Fp8Recipe::none) {
    throw Error("/fp8: " + std::string(name_of(t.fp8)) +
                ": dtplan-run has no FP8 GEMMs; it runs plans in fp32, bf16 or fp16");
  }
}

}  // namespace

RuntimeRun runtime_run_of(const Plan& plan, const ModelDesc& model, double scale) {
  const auto& t = plan.training;
  check_executed(t);
  if (!model.transformer) {
    throw Error("/model: " + plan.model +
                " is not a transformer; dtplan-run executes transformer plans only");
  }
  if (t.seq_len < 1) {
    throw Error("/seq_len: " + std::to_string(t.seq_len) +
                ": a transformer plan records the sequence length it was planned for");
  }
  RuntimeRun r;
  r.stack = dense_stack_of(*model.transformer, scale, sequence_length(model, t.seq_len));
  r.not_executed = not_executed(*model.transformer);
  r.stack.recompute = recompute_of(t);
  r.stack.compute = compute_element(t.precision);
  r.strategy = t.strategy;
  r.optimizer = t.optimizer;
  r.ranks = t.dp_size;
  r.micro_batch = t.micro_batch;
  r.grad_accum = plan.grad_accum;
  r.no_sync = runtime_no_sync(t.strategy, plan.no_sync);
  // Buckets shrink with the model so that the scaled run has as many as the real one.
  const double ratio = static_cast<double>(params_of(r.stack)) / static_cast<double>(plan.params);
  r.bucket_cap_bytes = std::max<std::int64_t>(
      4, static_cast<std::int64_t>(static_cast<double>(t.bucket_cap_bytes) * ratio));
  if (plan.tp > 1) {
    try {
      r.stack = tensor_parallel_share(r.stack, plan.tp);
    } catch (const Error& e) {
      throw Error("/tp: " + std::string(e.what()) + " (model " + plan.model + ")");
    }
  }
  if (plan.pp > 1) {  // the first stage's: what rank 0 runs
    try {
      r.stack = pipeline_stage(r.stack, plan.pp, 0);
    } catch (const Error& e) {
      throw Error("/pp: " + std::string(e.what()) + " (model " + plan.model + ")");
    }
  }
  check_tied_stages(plan, r.stack);
  return r;
}

}  // namespace dtplan::cost
