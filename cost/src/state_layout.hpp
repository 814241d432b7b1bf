// Model states by recipe: optimizer state sizes, and the units sharded strategies gather.
// Private to cost/.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dtplan/cost/activations.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::cost {

// The recipe of configuration `c` under strategy `t` (numeric_recipe.hpp).
NumericRecipe layout_for(const TrainingConfig& c, const StrategyTraits& t);

Bytes optimizer_bytes(Optimizer o, std::int64_t elements, const OverheadConstants& k);
std::string optimizer_explain(Optimizer o, const OverheadConstants& k);

// Parameter counts of the units a sharded strategy gathers whole, largest first: each
// transformer block; for layer lists each parametrised layer. `root` holds what FSDP's root
// unit keeps (embeddings, final norm, head); ZeRO-3 gathers those modules as units too.
struct GatherUnits {
  std::vector<std::int64_t> blocks;
  std::int64_t root = 0;
  // A layout's FSDP2 units at the two ends of the pass, each with the block next to it:
  // torchtitan wraps the embedding, and the final norm with the head, as units of their own
  // (parallelize.py apply_fsdp since PR #1094, 2025-07-28), so the unit in use and the one
  // prefetched are there the embedding and the first block, the head and the last block.
  // Zero where the stage holds neither.
  struct End {
    std::int64_t unit = 0;
    std::int64_t neighbour = 0;  // the block gathered with it
  };
  std::array<End, 2> ends{};
  bool known = false;  // false for a bare parameter count
  // The two largest blocks together: the block in use and the prefetched one.
  std::int64_t two_largest_blocks() const;
  // The largest unit: its unsharded gradients wait for their reduce-scatter.
  std::int64_t largest() const;
  // The most parameters gathered at once by units gathered one at a time with the next one
  // prefetched: the two largest blocks, the root alone, or an end unit with its neighbour.
  std::int64_t in_use_and_prefetched() const;
};

GatherUnits gather_units(const ModelDesc& m);

// What one GPU holds, whoever lays the model out: the parameters on it before data-parallel
// sharding (the whole model, or a pipeline stage's tensor-parallel share), how the strategy or
// framework shards and gathers them (its registry row, or a layout's equivalent), the units
// it gathers, its activations and the communicators it uses. memory.cpp prices it.
struct StateView {
  StrategyTraits traits;
  NumericRecipe recipe;
  std::int64_t params = 0;
  std::int64_t shard_degree = 1;  // ranks a sharded state is split over
  // Parts sharded over different ranks (expert parallelism: the experts over their own data-
  // parallel ranks): the elements of this GPU's shard, and how to say it ("1/4 of the dense
  // part, 1/2 of the experts"); 0 and empty: params / shard_degree.
  std::int64_t shard_elements = 0;
  std::string shard_text;
  GatherUnits units;
  ActivationEstimate activations;
  std::int64_t communicators = 0;  // NCCL communicators, each with its buffers
  std::int64_t ranks_per_node = 1;
  bool whole_model = true;  // the model's own attention-score note applies
  bool explain = true;      // false: the figures alone (a search), no explanations or notes
};

// Memory of the GPU `v` describes; `c` gives the optimizer, micro-steps, no_sync, offload,
// bucket and attention settings and the data-parallel size.
MemoryEstimate estimate_view_memory(const ModelDesc& m, const TrainingConfig& c, const StateView& v,
                                    const OverheadConstants& k);

// NCCL's buffers of `communicators` communicators, each nccl_bytes_per_communicator(), as the
// buffer term every estimate lists ("NCCL buffers (2 communicators)").
NamedBytes nccl_buffers(std::int64_t communicators, const OverheadConstants& k);
Bytes nccl_bytes(std::int64_t communicators, const OverheadConstants& k);

// What every GPU pays beyond its tensors: the CUDA context and library workspaces, and the
// caching allocator's slack, allocator_slack_fraction of the `allocated` bytes.
std::vector<NamedBytes> overhead_terms(Bytes allocated, const OverheadConstants& k);
Bytes overhead_bytes(Bytes allocated, const OverheadConstants& k);  // their sum

}  // namespace dtplan::cost
