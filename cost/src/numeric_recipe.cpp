// Element types and the recipes built from them (see numeric_recipe.hpp).
#include "dtplan/cost/numeric_recipe.hpp"

namespace dtplan::cost {

std::int64_t bytes_per_element(ElementType t) {
  switch (t) {
    case ElementType::fp32:
      return 4;
    case ElementType::bf16:
    case ElementType::fp16:
      return 2;
    case ElementType::int8:
      return 1;
  }
  return 4;
}

std::string_view name_of(ElementType t) {
  switch (t) {
    case ElementType::fp32:
      return "fp32";
    case ElementType::bf16:
      return "bf16";
    case ElementType::fp16:
      return "fp16";
    case ElementType::int8:
      return "int8";
  }
  return "fp32";
}

ElementType compute_element(Precision p) {
  const auto type = compute_type(p);
  if (type == "bf16") return ElementType::bf16;
  if (type == "fp16") return ElementType::fp16;
  return ElementType::fp32;
}

OptimizerState optimizer_state(Optimizer o) {
  switch (o) {
    case Optimizer::adam:
    case Optimizer::adamw:
      return {2, ElementType::fp32};
    case Optimizer::sgd:
      return {0, ElementType::fp32};
    case Optimizer::sgd_momentum:
      return {1, ElementType::fp32};
    case Optimizer::adam8bit:
      return {2, ElementType::int8};
  }
  return {};
}

NumericRecipe numeric_recipe(Precision p, Optimizer o, bool fsdp, bool single_process,
                             bool fp32_grad_accumulation) {
  NumericRecipe r;
  r.optimizer = optimizer_state(o);
  if (!is_mixed(p)) {
    r.description = "fp32";
    return r;
  }
  const auto half = compute_element(p);
  const std::string type(name_of(half));
  const bool amp = p == Precision::amp_fp16 || p == Precision::amp_bf16;
  r.compute = half;
  r.parameter_comm = half;
  if (amp || single_process) {
    r.kind = RecipeKind::autocast;
    r.parameter_comm = ElementType::fp32;  // DataParallel replicates the fp32 module
    r.description = "torch.autocast " + type + " (fp32 weights and gradients)";
  } else if (fsdp) {
    r.kind = RecipeKind::fsdp_mixed;
    r.gradient_comm = half;  // MixedPrecision's reduce_dtype defaults to param_dtype
    r.description = "FSDP MixedPrecision " + type + " (fp32 parameter shards and gradients)";
  } else {
    r.kind = RecipeKind::master_weights;
    r.parameter = half;
    r.main_weight = ElementType::fp32;
    r.gradient = fp32_grad_accumulation ? ElementType::fp32 : half;
    r.gradient_comm = r.gradient;
    r.description = type + " weights and gradients with an fp32 master copy";
  }
  return r;
}

NumericRecipe megatron_recipe(Precision p, Optimizer o, bool grad_reduce_half) {
  NumericRecipe r;
  r.optimizer = optimizer_state(o);
  if (!is_mixed(p)) {
    r.description = "fp32";
    return r;
  }
  const auto half = compute_element(p);
  r.kind = RecipeKind::megatron;
  r.parameter = half;
  r.compute = half;
  r.parameter_comm = half;
  r.main_weight = ElementType::fp32;
  if (grad_reduce_half) {
    r.gradient = half;
    r.gradient_comm = half;
  }
  r.description = std::string(name_of(half)) + " parameters, " + std::string(name_of(r.gradient)) +
                  " main gradients and fp32 main weights (Megatron-LM)";
  return r;
}

NumericRecipe fsdp2_recipe(Precision p, Optimizer o) {
  auto r = numeric_recipe(p, o, true, false, false);
  if (!is_mixed(p)) return r;
  r.gradient_comm = ElementType::fp32;
  r.description = "FSDP2 MixedPrecisionPolicy: " + std::string(name_of(r.compute)) +
                  " gathers, fp32 parameter shards, gradients reduced in fp32";
  return r;
}

}  // namespace dtplan::cost
