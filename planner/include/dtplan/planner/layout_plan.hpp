// A tensor x pipeline x data layout as a Plan file that dtplan-run executes (`dtplan plan
// --save-plan` when the best plan is a layout): the layout's shape, strategy over the
// data-parallel ranks, batch and recomputation in the Plan's fields, and its prediction.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "dtplan/model/plan.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/search3d.hpp"

namespace dtplan::planner {

// The data-parallel strategy a layout runs over its dp ranks: Megatron-LM's distributed
// optimizer is ZeRO-1, FSDP2's sharding its FSDP mode; nothing sharded is DDP.
Strategy strategy_of(const cost::Layout3D& l);

// `c` as the Plan dtplan-run executes, or why it cannot (what the layout has that a Plan does
// not record, or the runtime's own refusal of the plan, cost::runtime_run_of). `r` gives what
// the layouts share with the data-parallel search (attention, zero_grad, sequence length).
std::variant<Plan, std::string> layout_plan_file(const Candidate3D& c, const PlanRequest& r,
                                                 const ModelDesc& m, const PlanTarget& target);

}  // namespace dtplan::planner
