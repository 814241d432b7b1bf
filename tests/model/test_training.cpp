// Tests for model/src/training.cpp: enumeration names.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/training.hpp"

using namespace dtplan;

TEST_CASE("every strategy name round-trips") {
  for (const auto& row : kStrategies)
    CHECK(parse_strategy(row.name) == row.value);
  CHECK(strategy_names().size() == 9);
  CHECK(parse_strategy("FSDP-Full") == Strategy::fsdp_full);
}

TEST_CASE("precisions, optimizers, offloads, checkpointing, attention parse") {
  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK(is_mixed(Precision::fp16));
  CHECK_FALSE(is_mixed(Precision::fp32));
  CHECK(parse_optimizer("sgd-momentum") == Optimizer::sgd_momentum);
  CHECK(parse_offload("optimizer+params") == Offload::optimizer_and_params);
  CHECK(parse_checkpointing("selective") == Checkpointing::selective);
  CHECK(parse_attention("flash") == Attention::flash);
  CHECK(name_of(Strategy::fsdp_grad_op) == "fsdp-grad-op");
}

TEST_CASE("a named fused attention kernel needs fused attention") {
  CHECK(parse_attention_kernel("flash-attn-triton") == AttentionKernel::flash_attn_triton);
  CHECK(name_of(AttentionKernel::flash_attn_1) == "flash-attn-1");
  CHECK_NOTHROW(check_attention_kernel(Attention::flash, AttentionKernel::cudnn));
  CHECK_NOTHROW(check_attention_kernel(Attention::eager, AttentionKernel::framework));
  CHECK_THROWS_WITH(check_attention_kernel(Attention::hf_eager, AttentionKernel::flash_attn_2),
                    Catch::Contains("{attention-kernel} flash-attn-2") &&
                        Catch::Contains("{attention} hf-eager runs none"));
}

TEST_CASE("unknown names suggest close ones") {
  try {
    parse_strategy("zero4");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("unknown strategy 'zero4'") &&
                             Catch::Contains("did you mean: zero1"));
  }
  CHECK_THROWS_AS(parse_precision("fp8"), Error);
}

TEST_CASE("a DeepSpeed release picks how its ZeRO-3 gathers") {
  // deepspeed/runtime/zero: stage3 first ships in v0.3.12; _all_gather_base in v0.5.5;
  // coalesced, non-blocking fetches from v0.6.0.
  CHECK(zero3_gathers_of_deepspeed("0.3.12") == Zero3Gathers::per_parameter_list);
  CHECK(zero3_gathers_of_deepspeed("0.3.16") == Zero3Gathers::per_parameter_list);
  CHECK(zero3_gathers_of_deepspeed("0.5") == Zero3Gathers::per_parameter_list);
  CHECK(zero3_gathers_of_deepspeed("0.5.4") == Zero3Gathers::per_parameter_list);
  CHECK(zero3_gathers_of_deepspeed("0.5.5") == Zero3Gathers::per_parameter_flat);
  CHECK(zero3_gathers_of_deepspeed("0.5.10") == Zero3Gathers::per_parameter_flat);
  CHECK(zero3_gathers_of_deepspeed("0.6.0") == Zero3Gathers::coalesced);
  CHECK(zero3_gathers_of_deepspeed("0.14.4") == Zero3Gathers::coalesced);
  CHECK(zero3_gathers_of_deepspeed("1.0") == Zero3Gathers::coalesced);
  CHECK_THROWS_WITH(zero3_gathers_of_deepspeed("0.3.11"),
                    Catch::Contains("0.3.11 has no ZeRO-3 (it arrived in v0.3.12)"));
  for (const char* bad : {"", "x", "0", "0.", ".5", "0.6-rc1", "v0.6.0", "0.6.0.1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(zero3_gathers_of_deepspeed(bad),
                      Catch::Contains("is not a DeepSpeed release number"));
  }
}

TEST_CASE("each way of gathering names the DeepSpeed releases that gather so") {
  CHECK(releases_of(Zero3Gathers::per_parameter_list) == "v0.3.12 to v0.5.4");
  CHECK(releases_of(Zero3Gathers::per_parameter_flat) == "v0.5.5 to v0.5.10");
  CHECK(releases_of(Zero3Gathers::coalesced) == "v0.6.0 and later");
}
