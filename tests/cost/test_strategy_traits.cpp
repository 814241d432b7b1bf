// Tests for cost/src/strategy_traits.cpp: what each strategy shards, and the configurations
// real implementations refuse.
#include <catch2/catch.hpp>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Contains;

TEST_CASE("ZeRO stages shard progressively more") {
  CHECK_FALSE(traits_of(Strategy::ddp).shards_optimizer);
  CHECK(traits_of(Strategy::zero1).shards_optimizer);
  CHECK_FALSE(traits_of(Strategy::zero1).shards_gradients);
  CHECK(traits_of(Strategy::zero2).shards_gradients);
  CHECK_FALSE(traits_of(Strategy::zero2).shards_weights);
  CHECK(traits_of(Strategy::zero3).shards_weights);
  CHECK(traits_of(Strategy::fsdp_full).shards_weights);
  CHECK(traits_of(Strategy::fsdp_full).gather == ParamGather::root_and_units);
  // SHARD_GRAD_OP shards the stored fp32 parameters but keeps them gathered through backward.
  CHECK(traits_of(Strategy::fsdp_grad_op).shards_weights);
  CHECK(traits_of(Strategy::fsdp_grad_op).gather == ParamGather::whole_model);
  CHECK_FALSE(traits_of(Strategy::fsdp_no_shard).shards_optimizer);
}

TEST_CASE("hybrid sharding shards inside a node") {
  TrainingConfig c;
  c.strategy = Strategy::fsdp_hybrid;
  c.dp_size = 32;
  c.gpus_per_node = 8;
  CHECK(shard_degree(c) == 8);
  c.dp_size = 4;  // fewer GPUs than a node: one group of 4
  CHECK(shard_degree(c) == 4);
  c.dp_size = 12;
  CHECK_THROWS_WITH(shard_degree(c), Contains("data-parallel size 12 is not a multiple of the 8"));
  c.strategy = Strategy::zero3;
  CHECK(shard_degree(c) == 12);
}

TEST_CASE("unsupported configurations are refused with the reason") {
  TrainingConfig c;
  c.strategy = Strategy::dp;
  c.dp_size = 16;
  c.gpus_per_node = 8;
  CHECK_THROWS_WITH(check_supported(c), Contains("one process on one node"));
  c.strategy = Strategy::ddp;
  c.offload = Offload::optimizer;
  CHECK_THROWS_WITH(check_supported(c),
                    Contains("{offload} optimizer needs zero1, zero2 or zero3"));
  c.strategy = Strategy::zero2;
  c.offload = Offload::optimizer_and_params;
  CHECK_THROWS_WITH(check_supported(c), Contains("needs zero3 or an FSDP"));
  c.strategy = Strategy::fsdp_full;
  c.offload = Offload::optimizer;
  CHECK_THROWS_AS(check_supported(c), Error);
  c.offload = Offload::optimizer_and_params;
  CHECK_NOTHROW(check_supported(c));
  c.offload = Offload::none;
  c.precision = Precision::amp_bf16;
  CHECK_THROWS_WITH(check_supported(c), Contains("modelled for dp and ddp"));
  c.strategy = Strategy::ddp;
  CHECK_NOTHROW(check_supported(c));
}

TEST_CASE("the registry: who runs each strategy, its ZeRO equivalent and how dtplan-run runs it") {
  // PyTorch's FSDP docs (ShardingStrategy): FULL_SHARD as ZeRO-3, SHARD_GRAD_OP as ZeRO-2,
  // NO_SHARD as DDP, HYBRID_SHARD full sharding inside a node; DeepSpeed's stages 1-3.
  const auto rows = all_strategy_traits();
  REQUIRE(rows.size() == kStrategies.size());
  CHECK(traits_of(Strategy::zero2).framework == "deepspeed");
  CHECK(traits_of(Strategy::zero2).zero_stage == 2);
  CHECK(traits_of(Strategy::fsdp_grad_op).framework == "fsdp1");
  CHECK(traits_of(Strategy::fsdp_grad_op).fsdp_sharding == "SHARD_GRAD_OP");
  CHECK(traits_of(Strategy::fsdp_grad_op).zero_stage == 2);
  CHECK(traits_of(Strategy::fsdp_full).zero_stage == 3);
  CHECK(traits_of(Strategy::fsdp_no_shard).zero_stage == 0);
  CHECK(traits_of(Strategy::ddp).fsdp_sharding.empty());
  // dtplan-run runs FSDP modes as the ZeRO stage they match, hybrid not at all (yet).
  CHECK(traits_of(Strategy::fsdp_grad_op).runtime == RuntimeMode::zero2);
  CHECK(traits_of(Strategy::fsdp_no_shard).runtime == RuntimeMode::ddp);
  CHECK_FALSE(traits_of(Strategy::fsdp_hybrid).runtime.has_value());
  // no_sync: DDP's and FSDP's context manager, ZeRO-1's boundary reduction; not DataParallel,
  // nor ZeRO-2/3, which partition gradients as backward produces them.
  for (const auto& t : rows) {
    INFO(name_of(t.strategy));
    const bool expected = t.strategy != Strategy::dp && t.strategy != Strategy::zero2 &&
                          t.strategy != Strategy::zero3;
    CHECK(t.no_sync == expected);
    CHECK(supports_no_sync(t.strategy) == expected);
    // FSDP's rows and only they name a ShardingStrategy; DeepSpeed's name a stage >= 1.
    CHECK(t.fsdp == !t.fsdp_sharding.empty());
    if (t.framework == "deepspeed") CHECK(t.zero_stage >= 1);
  }
}
