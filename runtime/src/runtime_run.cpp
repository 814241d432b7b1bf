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
  const auto count = [](std::int64_t n, const std::string& one, const std::string& many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string layout = count(dp, "data-parallel", "data-parallel");
  if (plan.tp > 1) layout += " x " + std::to_string(plan.tp) + " tensor-parallel";
  if (plan.pp > 1) layout += " x " + std::to_string(plan.pp) + " pipeline-stage";
  layout += dp * replica == 1 ? " rank" : " ranks";
  const auto want = std::to_string(dp * replica);
  std::string text = "the plan is for " + layout + " (" +
                     count(dp * replica, "process", "processes") + "), not " +
                     std::to_string(ranks) + ": start " + want + " (dtplan run --np " + want +
                     ", or mpirun -np " + want + ")";
  // A data-parallel plan for the ranks given is one dtplan plan can make; a split one's
  // data-parallel count follows from the layout the planner picks.
  if (replica == 1) {
    text += ", or make a plan for " + count(ranks, "GPU", "GPUs") + " (dtplan plan --gpus " +
            std::to_string(ranks) + ")";
  }
  return text;
}

}  // namespace dtplan::runtime
