// The strategy table and the configuration rules that follow from it.
#include "dtplan/cost/strategy_traits.hpp"

#include <array>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

using GB = GradientBuffer;
using PG = ParamGather;

// The registry (strategy_traits.hpp). Sources: DeepSpeed's ZeRO stages (Rajbhandari et al.
// 2020; DeepSpeed docs, "ZeRO"), PyTorch FSDP's ShardingStrategy (FULL_SHARD ~ ZeRO-3,
// SHARD_GRAD_OP ~ ZeRO-2, NO_SHARD ~ DDP, HYBRID_SHARD: FULL_SHARD inside a node), DDP's
// no_sync, DeepSpeed's offload_optimizer / offload_param and FSDP's CPUOffload.
constexpr std::array<StrategyTraits, 9> kTraits{{
    {.strategy = Strategy::dp,
     .shards_optimizer = false,
     .shards_gradients = false,
     .shards_weights = false,
     .gather = PG::none,
     .gradient_buffer = GB::none,
     .fsdp = false,
     .single_process = true,
     .hybrid = false,
     .offload_optimizer_ok = false,
     .offload_params_ok = false,
     .no_sync = false,
     .framework = "torch-dataparallel",
     .zero_stage = 0,
     .fsdp_sharding = "",
     .runtime = RuntimeMode::dp},
    {.strategy = Strategy::ddp,
     .shards_optimizer = false,
     .shards_gradients = false,
     .shards_weights = false,
     .gather = PG::none,
     .gradient_buffer = GB::ddp_buckets,
     .fsdp = false,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = false,
     .offload_params_ok = false,
     .no_sync = true,
     .framework = "torch-ddp",
     .zero_stage = 0,
     .fsdp_sharding = "",
     .runtime = RuntimeMode::ddp},
    {.strategy = Strategy::zero1,
     .shards_optimizer = true,
     .shards_gradients = false,
     .shards_weights = false,
     .gather = PG::none,
     .gradient_buffer = GB::zero_bucket,
     .fsdp = false,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = true,
     .offload_params_ok = false,
     .no_sync = true,
     .framework = "deepspeed",
     .zero_stage = 1,
     .fsdp_sharding = "",
     .runtime = RuntimeMode::zero1},
    {.strategy = Strategy::zero2,
     .shards_optimizer = true,
     .shards_gradients = true,
     .shards_weights = false,
     .gather = PG::none,
     .gradient_buffer = GB::zero_bucket,
     .fsdp = false,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = true,
     .offload_params_ok = false,
     .no_sync = false,
     .framework = "deepspeed",
     .zero_stage = 2,
     .fsdp_sharding = "",
     .runtime = RuntimeMode::zero2},
    {.strategy = Strategy::zero3,
     .shards_optimizer = true,
     .shards_gradients = true,
     .shards_weights = true,
     .gather = PG::units,
     .gradient_buffer = GB::zero_bucket,
     .fsdp = false,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = true,
     .offload_params_ok = true,
     .no_sync = false,
     .framework = "deepspeed",
     .zero_stage = 3,
     .fsdp_sharding = "",
     .runtime = RuntimeMode::zero3},
    {.strategy = Strategy::fsdp_full,
     .shards_optimizer = true,
     .shards_gradients = true,
     .shards_weights = true,
     .gather = PG::root_and_units,
     .gradient_buffer = GB::unit_gradients,
     .fsdp = true,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = false,
     .offload_params_ok = true,
     .no_sync = true,
     .framework = "fsdp1",
     .zero_stage = 3,
     .fsdp_sharding = "FULL_SHARD",
     .runtime = RuntimeMode::zero3},
    {.strategy = Strategy::fsdp_grad_op,
     .shards_optimizer = true,
     .shards_gradients = true,
     .shards_weights = true,
     .gather = PG::whole_model,
     .gradient_buffer = GB::unit_gradients,
     .fsdp = true,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = false,
     .offload_params_ok = true,
     .no_sync = true,
     .framework = "fsdp1",
     .zero_stage = 2,
     .fsdp_sharding = "SHARD_GRAD_OP",
     .runtime = RuntimeMode::zero2},
    {.strategy = Strategy::fsdp_hybrid,
     .shards_optimizer = true,
     .shards_gradients = true,
     .shards_weights = true,
     .gather = PG::root_and_units,
     .gradient_buffer = GB::unit_gradients,
     .fsdp = true,
     .single_process = false,
     .hybrid = true,
     .offload_optimizer_ok = false,
     .offload_params_ok = true,
     .no_sync = true,
     .framework = "fsdp1",
     .zero_stage = 3,
     .fsdp_sharding = "HYBRID_SHARD",
     .runtime = std::nullopt},
    {.strategy = Strategy::fsdp_no_shard,
     .shards_optimizer = false,
     .shards_gradients = false,
     .shards_weights = false,
     .gather = PG::none,
     .gradient_buffer = GB::unit_gradients,
     .fsdp = true,
     .single_process = false,
     .hybrid = false,
     .offload_optimizer_ok = false,
     .offload_params_ok = false,
     .no_sync = true,
     .framework = "fsdp1",
     .zero_stage = 0,
     .fsdp_sharding = "NO_SHARD",
     .runtime = RuntimeMode::ddp},
}};

// The table lists every strategy of kStrategies, in its order.
constexpr bool registry_complete() {
  if (kTraits.size() != kStrategies.size()) return false;
  for (std::size_t i = 0; i < kTraits.size(); ++i) {
    if (kTraits[i].strategy != kStrategies[i].value) return false;
  }
  return true;
}
static_assert(registry_complete(), "strategy registry out of step with kStrategies");

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
                " GPUs per node that form a shard group ({gpus} / {gpus_per_node})");
  }
  return group;
}

bool supports_no_sync(Strategy s) {
  return traits_of(s).no_sync;
}

std::span<const StrategyTraits> all_strategy_traits() {
  return kTraits;
}

void check_supported(const TrainingConfig& c) {
  const auto& t = traits_of(c.strategy);
  if (c.dp_size < 1) throw FieldError("gpus", "must be a positive integer");
  if (c.gpus_per_node < 1) throw FieldError("gpus_per_node", "must be a positive integer");
  if (t.single_process && c.dp_size > c.gpus_per_node) {
    throw Error(strategy_label(c.strategy) + ": DataParallel runs in one process on one node; " +
                "{gpus} " + std::to_string(c.dp_size) + " exceeds {gpus_per_node} " +
                std::to_string(c.gpus_per_node));
  }
  if (c.offload == Offload::optimizer && !t.offload_optimizer_ok) {
    throw Error(strategy_label(c.strategy) + ": {offload} optimizer needs zero1, zero2 or zero3 " +
                "(FSDP offloads parameters and optimizer together: optimizer+params)");
  }
  if (c.offload == Offload::optimizer_and_params && !t.offload_params_ok) {
    throw Error(strategy_label(c.strategy) + ": {offload} optimizer+params needs zero3 or an " +
                "FSDP sharding strategy");
  }
  const bool autocast = c.precision == Precision::amp_fp16 || c.precision == Precision::amp_bf16;
  if (autocast && c.strategy != Strategy::dp && c.strategy != Strategy::ddp) {
    throw Error(strategy_label(c.strategy) + ": {precision} " + std::string(name_of(c.precision)) +
                " (torch.autocast) is modelled for dp and ddp; ZeRO and FSDP keep their own "
                "mixed-precision copies: use fp16 or bf16");
  }
  shard_degree(c);
}

}  // namespace dtplan::cost
