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
