// Text and JSON layout of collective estimates and of training-step communication.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/training_comm.hpp"

namespace dtplan::cli {

nlohmann::json collective_json(const cost::CollectiveEstimate& e);
// A table in the layout of nccl-tests' output, with the algorithm and bottleneck added.
void print_collective_table(std::ostream& out, const Topology& t, cost::CommModel& model,
                            cost::Collective c, cost::Algorithm a,
                            const std::vector<cost::CollectiveEstimate>& results);

struct TrainingCommContext {
  const ModelDesc& model;
  const TrainingConfig& config;
  const Topology& topology;
  std::int64_t micro_steps;
  bool no_sync;
};

nlohmann::json training_comm_json(const cost::TrainingComm& r);
void print_training_comm(std::ostream& out, const TrainingCommContext& ctx,
                         const std::vector<cost::TrainingComm>& results);

}  // namespace dtplan::cli
