#include "dtplan/runtime/runtime_run.hpp"

#include <algorithm>

#include "dtplan/cost/runtime_run.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"

namespace dtplan::runtime {

cost::RuntimeRun runtime_run_of(const Plan& plan, double scale, const std::string& data_dir) {
  // Errors name the plan's field (a JSON pointer), so that a caller can prefix the file.
  const auto model = [&] {
    try {
      return load_model(plan.model, resolve_data_dir(data_dir) / "models");
    } catch (const Error& e) {
      throw Error("/model: " + std::string(e.what()));
    }
  }();
  return cost::runtime_run_of(plan, model, scale);
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
