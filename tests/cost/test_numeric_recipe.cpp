// Numeric recipes: the element type of every stored and exchanged tensor, from one place.
#include <catch2/catch.hpp>

#include "dtplan/cost/numeric_recipe.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {

// Bytes of model state per parameter, unsharded: weights + main weights + gradients + states.
std::int64_t state_bytes(const NumericRecipe& r) {
  return r.parameter_bytes() + r.main_weight_bytes() + r.gradient_bytes() +
         r.optimizer.bytes_per_param();
}

}  // namespace

TEST_CASE("element types have their IEEE and integer widths") {
  CHECK(bytes_per_element(ElementType::fp32) == 4);
  CHECK(bytes_per_element(ElementType::bf16) == 2);
  CHECK(bytes_per_element(ElementType::fp16) == 2);
  CHECK(bytes_per_element(ElementType::int8) == 1);
  CHECK(compute_element(Precision::amp_bf16) == ElementType::bf16);
  CHECK(compute_element(Precision::fp16) == ElementType::fp16);
  CHECK(compute_element(Precision::fp32) == ElementType::fp32);
}

TEST_CASE("mixed precision with Adam keeps 16 bytes per parameter (ZeRO paper, section 3.1)") {
  // Rajbhandari et al. 2020: fp16 parameters and gradients (2 + 2) and the optimizer's fp32
  // parameters, momentum and variance (4 + 4 + 4): 16 bytes per parameter, K = 12.
  const auto r = numeric_recipe(Precision::fp16, Optimizer::adam, false, false, false);
  CHECK(r.kind == RecipeKind::master_weights);
  CHECK(state_bytes(r) == 16);
  CHECK(r.main_weight_bytes() + r.optimizer.bytes_per_param() == 12);
  CHECK(r.gradient_comm_bytes() == 2);
  CHECK(r.parameter_comm_bytes() == 2);
  CHECK(r.activation_bytes() == 2);
  // Megatron-style fp32 gradient accumulation: 2 more bytes, reduced in fp32.
  const auto acc = numeric_recipe(Precision::bf16, Optimizer::adam, false, false, true);
  CHECK(state_bytes(acc) == 18);
  CHECK(acc.gradient_comm_bytes() == 4);
}

TEST_CASE("fp32 Adam keeps 16 bytes and no master copy, SGD 8") {
  const auto adam = numeric_recipe(Precision::fp32, Optimizer::adamw, false, false, false);
  CHECK(adam.kind == RecipeKind::fp32);
  CHECK_FALSE(adam.main_weight);
  CHECK(state_bytes(adam) == 4 + 4 + 8);
  CHECK(adam.activation_bytes() == 4);
  const auto sgd = numeric_recipe(Precision::fp32, Optimizer::sgd, false, false, false);
  CHECK(state_bytes(sgd) == 8);
  const auto momentum =
      numeric_recipe(Precision::fp32, Optimizer::sgd_momentum, false, false, false);
  CHECK(state_bytes(momentum) == 12);
}

TEST_CASE("8-bit Adam keeps two int8 moments per parameter (bitsandbytes)") {
  const auto r = numeric_recipe(Precision::bf16, Optimizer::adam8bit, false, false, false);
  CHECK(r.optimizer.tensors == 2);
  CHECK(r.optimizer.type == ElementType::int8);
  CHECK(r.optimizer.bytes_per_param() == 2);
}

TEST_CASE("FSDP MixedPrecision: fp32 shards, 16-bit gathers and reductions") {
  // torch.distributed.fsdp.MixedPrecision(param_dtype=bf16): the flat parameter stays fp32 (the
  // optimizer's), gathered in bf16; reduce_dtype defaults to param_dtype.
  const auto r = numeric_recipe(Precision::bf16, Optimizer::adamw, true, false, false);
  CHECK(r.kind == RecipeKind::fsdp_mixed);
  CHECK(state_bytes(r) == 4 + 4 + 8);
  CHECK(r.parameter_comm == ElementType::bf16);
  CHECK(r.gradient_comm == ElementType::bf16);
}

TEST_CASE("autocast keeps fp32 weights and gradients, DataParallel replicates them in fp32") {
  const auto r = numeric_recipe(Precision::amp_fp16, Optimizer::adamw, false, false, false);
  CHECK(r.kind == RecipeKind::autocast);
  CHECK(state_bytes(r) == 16);
  CHECK(r.compute == ElementType::fp16);
  CHECK(r.parameter_comm == ElementType::fp32);
  CHECK(r.gradient_comm == ElementType::fp32);
}

TEST_CASE("Megatron-LM's distributed optimizer: 18 bytes per parameter, 6 + 12/d sharded") {
  // Megatron-LM docs, "Distributed Optimizer" table: bf16 parameters (2), fp32 main gradients
  // (4), fp32 main parameters and Adam moments (12, divided by d with the optimizer sharded).
  const auto r = megatron_recipe(Precision::bf16);
  CHECK(r.kind == RecipeKind::megatron);
  CHECK(state_bytes(r) == 18);
  CHECK(r.parameter_bytes() + r.gradient_bytes() == 6);
  CHECK(r.main_weight_bytes() + r.optimizer.bytes_per_param() == 12);
  CHECK(r.gradient_comm_bytes() == 4);
  CHECK(r.parameter_comm_bytes() == 2);
  CHECK(state_bytes(megatron_recipe(Precision::fp32)) == 16);
}
