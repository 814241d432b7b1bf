// A training plan: what to run (model, cluster, strategy, batch shape) and what dtplan
// predicted for it. `dtplan plan --save-plan` writes it; the runtime executes it and compares.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "dtplan/model/training.hpp"

namespace dtplan {

class ObjectReader;

struct PlanPrediction {
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  std::int64_t memory_per_gpu_bytes = 0;
};

struct Plan {
  std::string model;  // preset name or path, as given
  std::int64_t params = 0;
  std::string topology;  // preset name or path
  std::int64_t nodes = 1;
  std::string gpu;
  TrainingConfig training;  // strategy, precision, optimizer, dp_size, micro_batch, ...
  // Tensor-parallel ranks per data-parallel replica (Megatron-LM's split of each block,
  // cost::DenseStack::tp): the job runs dp x tp processes, consecutive ranks forming a
  // tensor-parallel group. dtplan-run executes it on the CPU backend.
  std::int64_t tp = 1;
  // Pipeline stages (Megatron-LM's one-forward-one-backward over grad_accum micro-batches):
  // the job runs dp x tp x pp processes, stages outermost. CPU backend.
  std::int64_t pp = 1;
  std::int64_t grad_accum = 1;
  std::int64_t global_batch = 0;
  bool no_sync = true;
  PlanPrediction predicted;
};

nlohmann::json to_json(const Plan& p);
Plan plan_from_json(const std::filesystem::path& path);
// The same from a plan object inside another document (a measurement records its plan).
Plan plan_from_reader(const ObjectReader& r);

}  // namespace dtplan
