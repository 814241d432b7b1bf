// The workload dtplan-run executes for a Plan, as the cost model describes it: the one mapping
// the launcher side (validate, trials, calibration) and the planner (a layout it saves as a
// plan) share with dtplan-run itself, so that a plan the planner writes is one the runtime runs.
#pragma once

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/plan.hpp"

namespace dtplan::cost {

// What dtplan-run executes for `plan` of `model` at `scale` (the scaled stack, the runtime's
// strategy settings, the bucket cap shrunk with the model). Throws naming the plan's field (a
// JSON pointer: /model, /seq_len, /tp, /pp, /strategy, /recompute_modules, ...) when the
// runtime cannot run it. Under tensor or pipeline parallelism the stack is rank 0's: its share
// of the first stage.
RuntimeRun runtime_run_of(const Plan& plan, const ModelDesc& model, double scale);

}  // namespace dtplan::cost
