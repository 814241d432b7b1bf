// Process groups of a tp x dp x pp job (parallel_groups.hpp).
#include "dtplan/runtime/parallel_groups.hpp"

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {

ParallelGroups::ParallelGroups(const MpiGroup& world, int tp, int pp, bool tied,
                               const CommFactory& make_dp) {
  if (tp < 1 || pp < 1 || world.size() % (tp * pp) != 0) {
    throw Error(std::to_string(tp) + " tensor-parallel x " + std::to_string(pp) +
                " pipeline ranks do not divide the " + std::to_string(world.size()) +
                " ranks started");
  }
  const int r = world.rank(), replica = tp * (world.size() / (tp * pp));  // ranks of a stage
  const int tp_rank = r % tp, dp_rank = (r / tp) % (replica / tp);
  stage_ = r / replica;
  // Every split is collective over the world, so every rank makes each one.
  tp_host_ = world.split(r / tp);
  dp_host_ = world.split(stage_ * tp + tp_rank);
  pp_host_ = world.split(r % replica);
  mp_host_ = world.split(dp_rank);
  const bool ends = stage_ == 0 || stage_ == pp - 1;
  emb_host_ = world.split(tied && pp > 1 && ends ? r % replica : -1);
  dp_ = make_dp(*dp_host_);
  if (tp > 1) tp_ = tp_host_->make_communicator();
  if (pp > 1) pp_ = pp_host_->make_communicator();
  if (emb_host_) emb_ = emb_host_->make_communicator();
}

ModelParallel ParallelGroups::model_parallel() const {
  ModelParallel mp;
  mp.tp = tp_.get();
  mp.pp = pp_.get();
  mp.embedding = emb_.get();
  mp.host = &*mp_host_;
  return mp;
}

}  // namespace dtplan::runtime
