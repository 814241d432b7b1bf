// The numeric recipe of a training run: the element type of every stored or exchanged tensor
// (parameters, gradients, main weights, optimizer states, activations, the gradients that are
// reduced and the parameters that are gathered). Every byte-per-element figure in the cost
// model comes from here.
//
// Mixed precision comes in four recipes that allocate differently:
//   master_weights  16-bit weights and gradients, fp32 master (DeepSpeed ZeRO, Apex O2);
//                   gradients fp32 with Megatron-style accumulation (main_grad)
//   autocast        torch.autocast: fp32 weights and gradients; 16-bit copies of the weights
//                   cached from forward to backward
//   fsdp_mixed      FSDP MixedPrecision: fp32 flat-parameter shards are the optimizer's
//                   parameters; gradients cast back to fp32; 16-bit copies only when gathered;
//                   parameters gathered and gradients reduced in the 16-bit type
//   megatron        Megatron-LM's distributed optimizer: 16-bit parameters, fp32 main
//                   gradients reduced in fp32 (--accumulate-allreduce-grads-in-fp32, on for
//                   bf16), fp32 main weights in the optimizer, 16-bit parameters all-gathered
//                   (Megatron-LM docs, "Distributed Optimizer": 6 + 12/d bytes per parameter)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dtplan/model/training.hpp"

namespace dtplan::cost {

enum class ElementType { fp32, bf16, fp16, int8 };

std::int64_t bytes_per_element(ElementType t);
std::string_view name_of(ElementType t);

// What an optimizer keeps per parameter: `tensors` tensors of `type` (Adam's two moments, SGD's
// momentum; bitsandbytes' 8-bit Adam adds block scales, optimizer_bytes in memory.cpp).
struct OptimizerState {
  std::int64_t tensors = 0;
  ElementType type = ElementType::fp32;
  std::int64_t bytes_per_param() const { return tensors * bytes_per_element(type); }
};
OptimizerState optimizer_state(Optimizer o);

enum class RecipeKind { fp32, master_weights, autocast, fsdp_mixed, megatron };

struct NumericRecipe {
  RecipeKind kind = RecipeKind::fp32;
  ElementType parameter = ElementType::fp32;       // the persistent weights
  std::optional<ElementType> main_weight;          // a separate master copy the optimizer updates
  ElementType gradient = ElementType::fp32;        // the persistent (accumulated) gradients
  ElementType compute = ElementType::fp32;         // what forward and backward read; activations
  ElementType gradient_comm = ElementType::fp32;   // gradients as they are reduced
  ElementType parameter_comm = ElementType::fp32;  // parameters as they are gathered
  OptimizerState optimizer;
  std::string description;

  std::int64_t parameter_bytes() const { return bytes_per_element(parameter); }
  std::int64_t main_weight_bytes() const {
    return main_weight ? bytes_per_element(*main_weight) : 0;
  }
  std::int64_t gradient_bytes() const { return bytes_per_element(gradient); }
  std::int64_t compute_bytes() const { return bytes_per_element(compute); }
  std::int64_t activation_bytes() const { return compute_bytes(); }
  std::int64_t gradient_comm_bytes() const { return bytes_per_element(gradient_comm); }
  std::int64_t parameter_comm_bytes() const { return bytes_per_element(parameter_comm); }
};

// The 16-bit (or fp32) type forward and backward compute in under a precision.
ElementType compute_element(Precision p);

// The recipe a data-parallel framework runs a precision and optimizer with. `fsdp`: PyTorch FSDP's
// MixedPrecision; `single_process`: torch.nn.DataParallel (autocast only);
// `fp32_grad_accumulation`: 16-bit weights with an fp32 gradient buffer.
NumericRecipe numeric_recipe(Precision p, Optimizer o, bool fsdp, bool single_process,
                             bool fp32_grad_accumulation);
// Megatron-LM's recipe (above) with its optimizer's states; fp32 when `p` is fp32. With
// `grad_reduce_half` (its --grad-reduce-in-bf16) the main gradients are kept and reduced in the
// 16-bit type instead.
NumericRecipe megatron_recipe(Precision p, Optimizer o = Optimizer::adam,
                              bool grad_reduce_half = false);
// FSDP2 as torchtitan runs it (AdamW by default): MixedPrecisionPolicy(param_dtype=bf16,
// reduce_dtype=fp32) -- fp32 sharded parameters and gradients, bf16 gathers, fp32
// reduce-scatters (torchtitan's training.mixed_precision_reduce defaults to float32).
NumericRecipe fsdp2_recipe(Precision p, Optimizer o = Optimizer::adamw);

}  // namespace dtplan::cost
