#include "dtplan/runtime/runtime_run.hpp"

#include <algorithm>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"

namespace dtplan::runtime {

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

}  // namespace

cost::RuntimeRun runtime_run_of(const Plan& plan, double scale, const std::string& data_dir) {
  const auto& t = plan.training;
  // Errors name the plan's field (a JSON pointer), so that a caller can prefix the file.
  const auto model = [&] {
    try {
      return load_model(plan.model, resolve_data_dir(data_dir) / "models");
    } catch (const Error& e) {
      throw Error("/model: " + std::string(e.what()));
    }
  }();
  if (!model.transformer) {
    throw Error("/model: " + plan.model +
                " is not a transformer; dtplan-run executes transformer plans only");
  }
  if (t.seq_len < 1) {
    throw Error("/seq_len: " + std::to_string(t.seq_len) +
                ": a transformer plan records the sequence length it was planned for");
  }
  cost::RuntimeRun r;
  r.stack = cost::dense_stack_of(*model.transformer, scale, sequence_length(model, t.seq_len));
  r.not_executed = cost::not_executed(*model.transformer);
  r.stack.recompute = recompute_of(t);
  r.stack.compute = cost::compute_element(t.precision);
  r.strategy = t.strategy;
  r.optimizer = t.optimizer;
  r.ranks = t.dp_size;
  r.micro_batch = t.micro_batch;
  r.grad_accum = plan.grad_accum;
  r.no_sync = cost::runtime_no_sync(t.strategy, plan.no_sync);
  // Buckets shrink with the model so that the scaled run has as many as the real one.
  const double ratio =
      static_cast<double>(cost::params_of(r.stack)) / static_cast<double>(plan.params);
  r.bucket_cap_bytes = std::max<std::int64_t>(
      4, static_cast<std::int64_t>(static_cast<double>(t.bucket_cap_bytes) * ratio));
  if (plan.tp > 1) {
    try {
      r.stack = cost::tensor_parallel_share(r.stack, plan.tp);
    } catch (const Error& e) {
      throw Error("/tp: " + std::string(e.what()) + " (model " + plan.model + ")");
    }
  }
  if (plan.pp > 1) {  // the first stage's: what rank 0 runs
    try {
      r.stack = cost::pipeline_stage(r.stack, plan.pp, 0);
    } catch (const Error& e) {
      throw Error("/pp: " + std::string(e.what()) + " (model " + plan.model + ")");
    }
  }
  return r;
}

std::optional<std::string> rank_count_problem(const Plan& plan, std::int64_t ranks) {
  const std::int64_t dp = plan.training.dp_size, replica = plan.tp * plan.pp;
  if (dp * replica == ranks) return std::nullopt;
  std::string layout = std::to_string(dp) + " data-parallel";
  if (plan.tp > 1) layout += " x " + std::to_string(plan.tp) + " tensor-parallel";
  if (plan.pp > 1) layout += " x " + std::to_string(plan.pp) + " pipeline-stage";
  const auto want = std::to_string(dp * replica);
  std::string text = "the plan is for " + layout + " ranks (" + want + " processes), not " +
                     std::to_string(ranks) + ": start " + want + " (dtplan run --np " + want +
                     ", or mpirun -np " + want + ")";
  if (ranks % replica == 0) {
    text += ", or make a plan for " + std::to_string(ranks / replica) +
            " data-parallel ranks (dtplan plan --gpus " + std::to_string(ranks / replica) + ")";
  }
  return text;
}

}  // namespace dtplan::runtime
