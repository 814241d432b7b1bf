// The process groups of a job of tp x dp x pp ranks, in Megatron-LM's order: the tp ranks of a
// tensor-parallel group are consecutive, data-parallel replicas come next, pipeline stages
// last (rank = tp_rank + tp (dp_rank + dp stage)). Built collectively over the world.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/mpi_group.hpp"
#include "dtplan/runtime/trainer.hpp"

namespace dtplan::runtime {

class ParallelGroups {
 public:
  // The data-parallel communicator comes from `make_dp` (MPI or NCCL); the model-parallel ones
  // are MPI's. Throws naming the sizes when tp x pp does not divide the world.
  using CommFactory = std::function<std::unique_ptr<Communicator>(const MpiGroup&)>;
  ParallelGroups(const MpiGroup& world, int tp, int pp, bool tied, const CommFactory& make_dp);

  int stage() const { return stage_; }
  Communicator& data_parallel() const { return *dp_; }
  // The groups Trainer needs beyond the data-parallel one (null where tp or pp is 1).
  ModelParallel model_parallel() const;

 private:
  int stage_ = 0;
  std::optional<MpiGroup> tp_host_, pp_host_, emb_host_, mp_host_, dp_host_;
  std::unique_ptr<Communicator> tp_, pp_, emb_, dp_;
};

}  // namespace dtplan::runtime
