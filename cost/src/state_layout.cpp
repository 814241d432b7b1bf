// The recipe of a configuration, optimizer state sizes, and the units sharded strategies
// gather.
#include "state_layout.hpp"

#include <algorithm>

namespace dtplan::cost {

NumericRecipe layout_for(const TrainingConfig& c, const StrategyTraits& t) {
  return numeric_recipe(c.precision, c.optimizer, t.fsdp, t.single_process,
                        c.fp32_grad_accumulation);
}

Bytes optimizer_bytes(Optimizer o, std::int64_t elements, const OverheadConstants& k) {
  const auto state = optimizer_state(o);
  const Bytes moments = bytes_of(elements, state.bytes_per_param(), "optimizer states");
  if (o != Optimizer::adam8bit) return moments;
  // bitsandbytes keeps an fp32 absmax per block for each moment.
  const auto blocks = ceil_div(elements, k.adam8bit_block_elements);
  return moments +
         bytes_of(blocks, state.tensors * bytes_per_element(ElementType::fp32), "optimizer states");
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
    for (const auto& run : block_runs(*m.transformer)) {  // a mixture's dense blocks apart
      u.blocks.insert(u.blocks.end(), static_cast<std::size_t>(run.layers),
                      count_parameters(run.block).per_layer);
    }
    // Everything outside the blocks: embeddings, their norm, the final norm, the head, any
    // multi-token prediction modules.
    u.root = p.total() - blocks_params(*m.transformer);
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

std::int64_t GatherUnits::largest() const {
  std::int64_t most = std::max(root, blocks.empty() ? 0 : blocks[0]);
  for (const auto& end : ends)
    most = std::max(most, end.unit);
  return most;
}

std::int64_t GatherUnits::two_largest_blocks() const {
  return blocks.empty() ? 0 : blocks[0] + (blocks.size() > 1 ? blocks[1] : 0);
}

std::int64_t GatherUnits::in_use_and_prefetched() const {
  std::int64_t most = std::max(two_largest_blocks(), root);
  for (const auto& end : ends)
    most = std::max(most, end.unit + end.neighbour);
  return most;
}

Bytes nccl_bytes(std::int64_t communicators, const OverheadConstants& k) {
  return Bytes{checked_mul(communicators, k.nccl_bytes_per_communicator(), "NCCL buffers")};
}

NamedBytes nccl_buffers(std::int64_t communicators, const OverheadConstants& k) {
  return {"NCCL buffers (" + std::to_string(communicators) + " communicator" +
              (communicators > 1 ? "s" : "") + ")",
          nccl_bytes(communicators, k)};
}

std::vector<NamedBytes> overhead_terms(Bytes allocated, const OverheadConstants& k) {
  return {{"CUDA context and library workspaces", Bytes{k.cuda_context_bytes}},
          {"allocator slack", fraction_of(allocated, k.allocator_slack_fraction)}};
}

Bytes overhead_bytes(Bytes allocated, const OverheadConstants& k) {
  return Bytes{k.cuda_context_bytes} + fraction_of(allocated, k.allocator_slack_fraction);
}

}  // namespace dtplan::cost
