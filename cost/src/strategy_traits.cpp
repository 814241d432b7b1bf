// The strategy table and the configuration rules that follow from it.
#include "dtplan/cost/strategy_traits.hpp"

#include <array>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

using GB = GradientBuffer;
using PG = ParamGather;

// strategy, shards: optimizer gradients weights, gather, gradient buffer, fsdp, single process,
// hybrid, offload optimizer / parameters
constexpr std::array<StrategyTraits, 9> kTraits{{
    {Strategy::dp, false, false, false, PG::none, GB::none, false, true, false, false, false},
    {Strategy::ddp, false, false, false, PG::none, GB::ddp_buckets, false, false, false, false,
     false},
    {Strategy::zero1, true, false, false, PG::none, GB::zero_bucket, false, false, false, true,
     false},
    {Strategy::zero2, true, true, false, PG::none, GB::zero_bucket, false, false, false, true,
     false},
    {Strategy::zero3, true, true, true, PG::units, GB::zero_bucket, false, false, false, true,
     true},
    {Strategy::fsdp_full, true, true, true, PG::root_and_units, GB::unit_gradients, true, false,
     false, false, true},
    {Strategy::fsdp_grad_op, true, true, true, PG::whole_model, GB::unit_gradients, true, false,
     false, false, true},
    {Strategy::fsdp_hybrid, true, true, true, PG::root_and_units, GB::unit_gradients, true, false,
     true, false, true},
    {Strategy::fsdp_no_shard, false, false, false, PG::none, GB::unit_gradients, true, false, false,
     false, false},
}};

std::string strategy_label(Strategy s) {
  return "strategy " + std::string(name_of(s));
}

}  // namespace

const StrategyTraits& traits_of(Strategy s) {
  for (const auto& t : kTraits) {
    if (t.strategy == s) return t;
  }
  throw Error("internal: no traits for strategy " + std::string(name_of(s)));
}

std::int64_t shard_degree(const TrainingConfig& c) {
  const auto& t = traits_of(c.strategy);
  if (!t.hybrid) return c.dp_size;
  const std::int64_t group = c.dp_size < c.gpus_per_node ? c.dp_size : c.gpus_per_node;
  if (c.dp_size % group != 0) {
    throw Error(strategy_label(c.strategy) + ": data-parallel size " + std::to_string(c.dp_size) +
                " is not a multiple of the " + std::to_string(group) +
                " GPUs per node that form a shard group (--gpus / --gpus-per-node)");
  }
  return group;
}

bool supports_no_sync(Strategy s) {
  return s != Strategy::dp && s != Strategy::zero2 && s != Strategy::zero3;
}

void check_supported(const TrainingConfig& c) {
  const auto& t = traits_of(c.strategy);
  if (c.dp_size < 1) throw FieldError("gpus", "must be a positive integer");
  if (c.gpus_per_node < 1) throw FieldError("gpus_per_node", "must be a positive integer");
  if (t.single_process && c.dp_size > c.gpus_per_node) {
    throw Error(strategy_label(c.strategy) + ": DataParallel runs in one process on one node; " +
                "--gpus " + std::to_string(c.dp_size) + " exceeds --gpus-per-node " +
                std::to_string(c.gpus_per_node));
  }
  if (c.offload == Offload::optimizer && !t.offload_optimizer_ok) {
    throw Error(strategy_label(c.strategy) + ": --offload optimizer needs zero1, zero2 or zero3 " +
                "(FSDP offloads parameters and optimizer together: optimizer+params)");
  }
  if (c.offload == Offload::optimizer_and_params && !t.offload_params_ok) {
    throw Error(strategy_label(c.strategy) + ": --offload optimizer+params needs zero3 or an " +
                "FSDP sharding strategy");
  }
  const bool autocast = c.precision == Precision::amp_fp16 || c.precision == Precision::amp_bf16;
  if (autocast && c.strategy != Strategy::dp && c.strategy != Strategy::ddp) {
    throw Error(strategy_label(c.strategy) + ": --precision " + std::string(name_of(c.precision)) +
                " (torch.autocast) is modelled for dp and ddp; ZeRO and FSDP keep their own "
                "mixed-precision copies: use fp16 or bf16");
  }
  shard_degree(c);
}

}  // namespace dtplan::cost
