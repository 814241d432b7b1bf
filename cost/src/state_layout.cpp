// Bytes per parameter by recipe, optimizer state sizes, and the units sharded strategies
// gather.
#include "state_layout.hpp"

#include <algorithm>

namespace dtplan::cost {

StateLayout layout_for(const TrainingConfig& c, const StrategyTraits& t) {
  StateLayout l;
  const std::string type(compute_type(c.precision));
  const bool amp = c.precision == Precision::amp_fp16 || c.precision == Precision::amp_bf16;
  if (!is_mixed(c.precision)) {
    l.description = "fp32";
    return l;
  }
  l.compute_bytes = 2;
  if (amp || t.single_process) {
    l.recipe = Recipe::autocast;
    l.description = "torch.autocast " + type + " (fp32 weights and gradients)";
  } else if (t.fsdp) {
    l.recipe = Recipe::fsdp_mixed;
    l.description = "FSDP MixedPrecision " + type + " (fp32 parameter shards and gradients)";
  } else {
    l.recipe = Recipe::master_weights;
    l.weight_bytes = 2;
    l.master_bytes = 4;
    l.grad_bytes = c.fp32_grad_accumulation ? 4 : 2;
    l.description = type + " weights and gradients with an fp32 master copy";
  }
  return l;
}

Bytes optimizer_bytes(Optimizer o, std::int64_t elements, const OverheadConstants& k) {
  switch (o) {
    case Optimizer::adam:
    case Optimizer::adamw:
      return bytes_of(elements, 8, "optimizer states");
    case Optimizer::sgd:
      return Bytes{0};
    case Optimizer::sgd_momentum:
      return bytes_of(elements, 4, "optimizer states");
    case Optimizer::adam8bit: {
      const auto blocks = ceil_div(elements, k.adam8bit_block_elements);
      return bytes_of(elements, 2, "optimizer states") + bytes_of(blocks, 8, "optimizer states");
    }
  }
  return Bytes{0};
}

std::string optimizer_explain(Optimizer o, const OverheadConstants& k) {
  switch (o) {
    case Optimizer::adam:
    case Optimizer::adamw:
      return "8 B/param (fp32 first and second moments)";
    case Optimizer::sgd:
      return "no state";
    case Optimizer::sgd_momentum:
      return "4 B/param (fp32 momentum)";
    case Optimizer::adam8bit:
      return "2 B/param (int8 moments) + 2 fp32 scales per " +
             std::to_string(k.adam8bit_block_elements) + "-element block";
  }
  return "";
}

GatherUnits gather_units(const ModelDesc& m) {
  GatherUnits u;
  if (m.transformer) {
    const auto p = count_parameters(*m.transformer);
    u.blocks.assign(static_cast<std::size_t>(m.transformer->num_layers), p.per_layer);
    // Everything outside the blocks: embeddings, their norm, the final norm, the head.
    u.root = p.total() - p.per_layer * m.transformer->num_layers;
    u.known = true;
  } else if (m.layers) {
    for (const auto& l : m.layers->layers) {
      if (l.params > 0) u.blocks.push_back(l.params);
    }
    u.known = true;
  }
  std::sort(u.blocks.rbegin(), u.blocks.rend());
  return u;
}

}  // namespace dtplan::cost
