// The strategy table and the configuration rules that follow from it.
#include "dtplan/cost/strategy_traits.hpp"

#include <array>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

using GB = GradientBuffer;
using PG = ParamGather;
using C = Collective;
using A = Algorithm;
using M = MessageSplit;
using P = Payload;
using W = CommWhen;
using Ph = CommPhase;

// The collectives of each strategy per step. DataParallel replicates the module from GPU 0
// before every forward and reduces the gradients to it (torch.nn.DataParallel); DDP
// all-reduces bucketed gradients during backward (DistributedDataParallel's Reducer); ZeRO-1/2
// reduce-scatter DeepSpeed's reduce buckets and all-gather the updated weights after the step
// (ZeRO-1 only at the accumulation boundary); ZeRO-3 and FSDP gather each unit's parameters in
// forward and again in backward and reduce-scatter its gradients (SHARD_GRAD_OP keeps them
// gathered until backward ends; HYBRID_SHARD does all that inside a node and all-reduces the
// gradient shards across nodes); NO_SHARD all-reduces each unit's gradients.
constexpr std::array<CollectiveRule, 2> kDataParallelOps{{
    {.name = "weights broadcast from GPU 0 (replicate)",
     .collective = C::broadcast,
     .algorithm = A::ps,
     .messages = M::whole_model,
     .payload = P::weights,
     .when = W::every_micro_step,
     .phase = Ph::before_forward},
    {.name = "gradients reduced to GPU 0",
     .collective = C::reduce,
     .algorithm = A::ps,
     .messages = M::whole_model,
     .payload = P::gradients,
     .when = W::every_micro_step,
     .phase = Ph::after_backward},
}};
constexpr std::array<CollectiveRule, 1> kDdpOps{{
    {.name = "gradient all-reduce (DDP buckets)",
     .collective = C::all_reduce,
     .algorithm = A::automatic,
     .messages = M::ddp_buckets,
     .payload = P::gradients,
     .when = W::deferrable,
     .phase = Ph::backward},
}};
constexpr CollectiveRule zero_reduce_scatter(CommWhen when) {
  return {.name = "gradient reduce-scatter (reduce buckets)",
          .collective = C::reduce_scatter,
          .algorithm = A::automatic,
          .messages = M::zero_buckets,
          .payload = P::gradients,
          .when = when,
          .phase = Ph::backward};
}
constexpr CollectiveRule kZeroWeightsGather{.name = "updated weights all-gather",
                                            .collective = C::all_gather,
                                            .algorithm = A::automatic,
                                            .messages = M::zero_buckets,
                                            .payload = P::weights,
                                            .when = W::once_per_step,
                                            .phase = Ph::after_step};
constexpr std::array<CollectiveRule, 2> kZero1Ops{
    {zero_reduce_scatter(W::deferrable), kZeroWeightsGather}};
constexpr std::array<CollectiveRule, 2> kZero2Ops{
    {zero_reduce_scatter(W::every_micro_step), kZeroWeightsGather}};
constexpr CollectiveRule gather(CommPhase phase, CommGroup group = CommGroup::data_parallel,
                                bool deferred_by_no_sync = false) {
  return {.name = phase == Ph::forward ? "weights all-gather in forward"
                                       : "weights all-gather in backward",
          .collective = C::all_gather,
          .algorithm = A::automatic,
          .messages = M::units,
          .payload = P::weights,
          .when = W::every_micro_step,
          .phase = phase,
          .group = group,
          .deferred_by_no_sync = deferred_by_no_sync};
}
constexpr CollectiveRule unit_reduce_scatter(CommWhen when,
                                             CommGroup group = CommGroup::data_parallel) {
  return {.name = "gradient reduce-scatter",
          .collective = C::reduce_scatter,
          .algorithm = A::automatic,
          .messages = M::units,
          .payload = P::gradients,
          .when = when,
          .phase = Ph::backward,
          .group = group};
}
constexpr std::array<CollectiveRule, 3> kZero3Ops{
    {gather(Ph::forward), gather(Ph::backward), unit_reduce_scatter(W::every_micro_step)}};
// DeepSpeed ZeRO-3 before v0.6 (model/training.hpp Zero3Gathers): every parameter tensor
// gathered on its own after a device synchronisation, reduce-scattered on its own.
constexpr CollectiveRule legacy_zero3(CollectiveRule r, bool list_form) {
  r.messages = M::parameter_tensors;
  r.blocking = true;
  r.per_rank_copies = list_form;
  return r;
}
constexpr std::array<CollectiveRule, 3> kZero3ListOps{
    {legacy_zero3(gather(Ph::forward), true), legacy_zero3(gather(Ph::backward), true),
     legacy_zero3(unit_reduce_scatter(W::every_micro_step), true)}};
constexpr std::array<CollectiveRule, 3> kZero3FlatOps{
    {legacy_zero3(gather(Ph::forward), false), legacy_zero3(gather(Ph::backward), false),
     legacy_zero3(unit_reduce_scatter(W::every_micro_step), true)}};
constexpr std::array<CollectiveRule, 3> kFsdpFullOps{
    {gather(Ph::forward), gather(Ph::backward), unit_reduce_scatter(W::deferrable)}};
constexpr std::array<CollectiveRule, 2> kFsdpGradOpOps{
    {gather(Ph::forward, CommGroup::data_parallel, true), unit_reduce_scatter(W::deferrable)}};
constexpr std::array<CollectiveRule, 4> kFsdpHybridOps{{
    gather(Ph::forward, CommGroup::shard_group),
    gather(Ph::backward, CommGroup::shard_group),
    unit_reduce_scatter(W::deferrable, CommGroup::shard_group),
    {.name = "gradient shard all-reduce across nodes",
     .collective = C::all_reduce,
     .algorithm = A::ring,
     .messages = M::unit_shards,
     .payload = P::gradients,
     .when = W::deferrable,
     .phase = Ph::backward,
     .group = CommGroup::replicas},
}};
constexpr std::array<CollectiveRule, 1> kFsdpNoShardOps{{
    {.name = "gradient all-reduce (per FSDP unit)",
     .collective = C::all_reduce,
     .algorithm = A::automatic,
     .messages = M::units,
     .payload = P::gradients,
     .when = W::deferrable,
     .phase = Ph::backward},
}};

// The collectives of the layout frameworks (parallel3d.hpp). Megatron-LM reduces the fp32
// main gradients of a stage once per step, after the last micro-batch's backward, as one
// message (without --overlap-grad-reduce its buckets are one per dtype, so nothing overlaps):
// an all-reduce, or with the distributed optimizer a reduce-scatter and, after the step, an
// all-gather of the updated bf16 parameters (Megatron-LM docs, "Distributed Optimizer").
// FSDP2 (torchtitan: fully_shard per block and on the root) gathers each unit in forward,
// again in backward unless reshard_after_forward=False, and reduce-scatters its gradients in
// every micro-batch's backward; under hybrid sharding the gradient shards are all-reduced
// across the replica groups once per step. Under pipeline parallelism the reductions and the
// kept gathers are deferrable: torch.distributed.pipelining's stage turns gradient sync and
// resharding after backward off for all but the last backward of a step
// (stage.py, backward_maybe_with_nosync), so a stage accumulates unsharded fp32 gradients and
// reduce-scatters them once, and blocks kept from forward to backward are gathered once.
// One message of the stage's parameters, once per step; with --overlap-grad-reduce the
// gradient buffer's buckets, reduced alongside the last micro-batch's backward as it fills
// them (no_sync for the others), and with --overlap-param-gather the updated weights'
// buckets gathered alongside the next step's first forward (each bucket before the first
// module that uses it).
constexpr CollectiveRule megatron_rule(std::string_view name, Collective collective,
                                       Payload payload, CommPhase phase,
                                       MessageSplit messages = M::whole_model) {
  return {.name = name,
          .collective = collective,
          .algorithm = A::automatic,
          .messages = messages,
          .payload = payload,
          .when = W::once_per_step,
          .phase = phase};
}
constexpr std::array<CollectiveRule, 1> kMegatronOps{{megatron_rule(
    "gradient all-reduce (fp32 main gradients)", C::all_reduce, P::gradients, Ph::after_backward)}};
constexpr std::array<CollectiveRule, 2> kMegatronDistOptOps{
    {megatron_rule("gradient reduce-scatter (distributed optimizer)", C::reduce_scatter,
                   P::gradients, Ph::after_backward),
     megatron_rule("updated weights all-gather (distributed optimizer)", C::all_gather, P::weights,
                   Ph::after_step)}};
constexpr std::array<CollectiveRule, 1> kMegatronOverlapOps{
    {megatron_rule("gradient all-reduce (fp32 main gradients, buckets overlapped)", C::all_reduce,
                   P::gradients, Ph::backward, M::megatron_buckets)}};
constexpr std::array<CollectiveRule, 2> kMegatronDistOptOverlapOps{
    {megatron_rule("gradient reduce-scatter (distributed optimizer, buckets overlapped)",
                   C::reduce_scatter, P::gradients, Ph::backward, M::megatron_buckets),
     megatron_rule("updated weights all-gather (distributed optimizer)", C::all_gather, P::weights,
                   Ph::after_step)}};
constexpr std::array<CollectiveRule, 2> kMegatronDistOptOverlapBothOps{
    {megatron_rule("gradient reduce-scatter (distributed optimizer, buckets overlapped)",
                   C::reduce_scatter, P::gradients, Ph::backward, M::megatron_buckets),
     megatron_rule("updated weights all-gather (distributed optimizer, in the next forward)",
                   C::all_gather, P::weights, Ph::forward, M::megatron_buckets)}};
constexpr CollectiveRule kShardAllReduce{.name = "gradient shard all-reduce across replicas",
                                         .collective = C::all_reduce,
                                         .algorithm = A::automatic,
                                         .messages = M::unit_shards,
                                         .payload = P::gradients,
                                         .when = W::once_per_step,
                                         .phase = Ph::after_backward,
                                         .group = CommGroup::replicas};
constexpr std::array<CollectiveRule, 3> kFsdp2Ops{
    {gather(Ph::forward), gather(Ph::backward), unit_reduce_scatter(W::deferrable)}};
constexpr std::array<CollectiveRule, 2> kFsdp2KeepOps{
    {gather(Ph::forward, CommGroup::data_parallel, true), unit_reduce_scatter(W::deferrable)}};
constexpr std::array<CollectiveRule, 4> kFsdp2HybridOps{
    {gather(Ph::forward, CommGroup::shard_group), gather(Ph::backward, CommGroup::shard_group),
     unit_reduce_scatter(W::deferrable, CommGroup::shard_group), kShardAllReduce}};
constexpr std::array<CollectiveRule, 3> kFsdp2HybridKeepOps{
    {gather(Ph::forward, CommGroup::shard_group, true),
     unit_reduce_scatter(W::deferrable, CommGroup::shard_group), kShardAllReduce}};

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
     .runtime = RuntimeMode::dp,
     .collectives = kDataParallelOps,
     .no_sync_refusal = "DataParallel has no no_sync"},
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
     .runtime = RuntimeMode::ddp,
     .collectives = kDdpOps,
     .no_sync_refusal = ""},
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
     .runtime = RuntimeMode::zero1,
     .collectives = kZero1Ops,
     .no_sync_refusal = ""},
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
     .runtime = RuntimeMode::zero2,
     .collectives = kZero2Ops,
     .no_sync_refusal = "ZeRO-2 partitions gradients"},
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
     .runtime = RuntimeMode::zero3,
     .collectives = kZero3Ops,
     .no_sync_refusal = "ZeRO-3 partitions gradients"},
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
     .runtime = RuntimeMode::zero3,
     .collectives = kFsdpFullOps,
     .no_sync_refusal = ""},
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
     .runtime = RuntimeMode::zero2,
     .collectives = kFsdpGradOpOps,
     .no_sync_refusal = ""},
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
     .runtime = std::nullopt,
     .collectives = kFsdpHybridOps,
     .no_sync_refusal = ""},
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
     .runtime = RuntimeMode::ddp,
     .collectives = kFsdpNoShardOps,
     .no_sync_refusal = ""},
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

// A strategy that cannot defer gradient synchronisation says why, and only such a one.
constexpr bool refusals_consistent() {
  for (const auto& t : kTraits) {
    if (t.no_sync == !t.no_sync_refusal.empty() || t.collectives.empty()) return false;
  }
  return true;
}
static_assert(refusals_consistent(), "no_sync and no_sync_refusal disagree, or no collectives");

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
  if (c.checkpoint_every < 1) throw FieldError("checkpoint_every", "must be a positive integer");
  if (c.checkpoint_every > 1 && c.checkpointing != Checkpointing::full) {
    throw Error("{checkpoint_every} " + std::to_string(c.checkpoint_every) +
                " needs {checkpointing} full: it wraps every Nth block whole");
  }
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
  if (c.fp8 != Fp8Recipe::none) {
    throw Error(strategy_label(c.strategy) + ": FP8 GEMMs ({precision} fp8 or {fp8_recipe}; " +
                std::string(name_of(c.fp8)) +
                " scaling here) are modelled for the layouts that run FP8 (Transformer Engine "
                "under megatron, torchao's float8 under fsdp2), not for the data-parallel "
                "strategies: give {strategy} megatron or fsdp2");
  }
  const bool autocast = c.precision == Precision::amp_fp16 || c.precision == Precision::amp_bf16;
  if (autocast && c.strategy != Strategy::dp && c.strategy != Strategy::ddp) {
    throw Error(strategy_label(c.strategy) + ": {precision} " + std::string(name_of(c.precision)) +
                " (torch.autocast) is modelled for dp and ddp; ZeRO and FSDP keep their own "
                "mixed-precision copies: use fp16 or bf16");
  }
  shard_degree(c);
}

std::span<const CollectiveRule> strategy_collectives(const TrainingConfig& c) {
  if (c.strategy != Strategy::zero3) return traits_of(c.strategy).collectives;
  switch (c.zero3_gathers) {
    case Zero3Gathers::coalesced:
      break;
    case Zero3Gathers::per_parameter_list:
      return kZero3ListOps;
    case Zero3Gathers::per_parameter_flat:
      return kZero3FlatOps;
  }
  return traits_of(c.strategy).collectives;
}

std::optional<CollectiveRule> recompute_regather(const TrainingConfig& c) {
  if (c.strategy != Strategy::zero3 || c.checkpointing != Checkpointing::full) return std::nullopt;
  auto r = gather(Ph::backward);
  if (c.zero3_gathers != Zero3Gathers::coalesced) {
    r = legacy_zero3(r, c.zero3_gathers == Zero3Gathers::per_parameter_list);
  }
  r.name = "weights re-gathered after recomputation";
  r.messages = M::recompute_regathers;
  return r;
}

std::span<const CollectiveRule> layout_collectives(const LayoutSharding& l) {
  if (!l.fsdp2) {
    if (!l.shards_optimizer) {
      if (l.overlap_grad_reduce) return kMegatronOverlapOps;
      return kMegatronOps;
    }
    if (!l.overlap_grad_reduce) return kMegatronDistOptOps;
    return l.overlap_param_gather ? kMegatronDistOptOverlapBothOps : kMegatronDistOptOverlapOps;
  }
  if (l.hybrid) {
    if (l.gathers_in_backward) return kFsdp2HybridOps;
    return kFsdp2HybridKeepOps;
  }
  if (l.gathers_in_backward) return kFsdp2Ops;
  return kFsdp2KeepOps;
}

}  // namespace dtplan::cost
