// How a training recipe lays out model states: bytes per parameter of each component, the
// compute type, and what is held unsharded while computing. Private to cost/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::cost {

// Mixed precision comes in three recipes that allocate differently:
//   master_weights  16-bit weights and gradients, fp32 master (DeepSpeed, Megatron, Apex O2)
//   autocast        torch.autocast: fp32 weights and gradients; 16-bit copies of the weights
//                   cached from forward to backward
//   fsdp_mixed      FSDP MixedPrecision: fp32 flat-parameter shards are the optimizer's
//                   parameters; gradients cast back to fp32; 16-bit copies only when gathered
enum class Recipe { fp32, master_weights, autocast, fsdp_mixed };

struct StateLayout {
  Recipe recipe = Recipe::fp32;
  std::int64_t weight_bytes = 4;   // persistent weights, per parameter
  std::int64_t master_bytes = 0;   // fp32 master copy
  std::int64_t grad_bytes = 4;     // persistent gradients
  std::int64_t compute_bytes = 4;  // the copy forward and backward read
  std::string description;
};

StateLayout layout_for(const TrainingConfig& c, const StrategyTraits& t);

Bytes optimizer_bytes(Optimizer o, std::int64_t elements, const OverheadConstants& k);
std::string optimizer_explain(Optimizer o, const OverheadConstants& k);

// Parameter counts of the units a sharded strategy gathers whole, largest first: each
// transformer block; for layer lists each parametrised layer. `root` holds what FSDP's root
// unit keeps (embeddings, final norm, head); ZeRO-3 gathers those modules as units too.
struct GatherUnits {
  std::vector<std::int64_t> blocks;
  std::int64_t root = 0;
  bool known = false;  // false for a bare parameter count
};

GatherUnits gather_units(const ModelDesc& m);

}  // namespace dtplan::cost
