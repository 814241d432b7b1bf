// The workload dtplan-run executes for a Plan (cost/runtime_run.hpp maps it), loaded: what the
// launcher side (validate, trials, calibration) predicts before a run starts, without the
// execution backends (MPI, CUDA) that dtplan-run links.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/plan.hpp"

namespace dtplan::runtime {

// What dtplan-run executes for `plan` at `scale` (the scaled stack, the runtime's strategy
// settings, the bucket cap shrunk with the model), as the cost model's RuntimeRun: predicting a
// run before starting it. Throws naming the plan's field (/model, /seq_len) when
// the model is unknown or not a transformer, or the sequence length is missing. Under tensor
// or pipeline parallelism the stack is rank 0's: its share of the first stage.
cost::RuntimeRun runtime_run_of(const Plan& plan, double scale, const std::string& data_dir);

// Why `ranks` processes cannot run `plan` (its dp x tp x pp), naming how many to start and,
// where one exists, the plan that would use them; nullopt when they can.
std::optional<std::string> rank_count_problem(const Plan& plan, std::int64_t ranks);

}  // namespace dtplan::runtime
