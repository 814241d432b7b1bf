// The pieces of a Megatron-style layout that its memory (memory3d.cpp) and its time
// (parallel3d.cpp) both read. Private to cost/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/transformer.hpp"

namespace dtplan::cost {

// The model's layer shapes; throws when it has none.
const TransformerSpec& spec_of(const ModelDesc& m);

// One block's parameters: matrices (split by t), the routed experts' matrices (split over ep
// x etp) and norms (replicated).
struct BlockParams {
  std::int64_t matrices = 0, experts = 0, replicated = 0;
  std::int64_t expert_biases = 0;  // each routed expert's output bias: with it, whole over etp
  // Of `matrices`, what is not a Linear weight: the split input biases and the attention sinks.
  std::int64_t matrix_extras = 0;
  // On one GPU of layout `l`.
  std::int64_t on_gpu(const Layout3D& l) const {
    return matrices / l.tp + experts_on_gpu(l) + replicated;
  }
  std::int64_t experts_on_gpu(const Layout3D& l) const {
    return experts / (l.ep * l.expert_tp()) + expert_biases / l.ep;
  }
};
BlockParams block_params(const TransformerSpec& s);

// The stage holding the final norm, the LM head and the loss.
std::int64_t head_stage(const Layout3D& l);

// What a stage holds besides the micro-batches it keeps in flight: its blocks, the dense ones
// among them, and whether it holds the embedding or the head. Stages of one kind hold alike.
struct StageKind {
  std::int64_t layers = 0, dense = 0;
  bool embedding = false, head = false;
  bool operator==(const StageKind&) const = default;
};
// Stage i's kind, `layers` its blocks.
StageKind stage_kind(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                     std::int64_t layers);

// The word embedding and what goes with it on the first stage's GPUs.
std::int64_t embedding_params(const TransformerSpec& s, const Layout3D& l);
// The final norm and the LM head on the head stage's GPUs (none for a head tied to the
// embedding the stage holds); the prediction modules apart.
std::int64_t head_params(const TransformerSpec& s, const Layout3D& l);

// The blocks of a stage holding `dense` of the dense first blocks among its `layers`.
BlockRuns stage_runs(const TransformerSpec& s, std::int64_t dense, std::int64_t layers);

// A stage's blocks on one GPU: their parameters and, of them, the routed experts'; and the
// runs of alike blocks, each block's parameters on the GPU (FSDP2's units).
struct StageBlocks {
  std::int64_t params = 0, experts = 0;
  std::array<std::pair<std::int64_t, std::int64_t>, 2> runs{};  // (blocks, parameters of one)
  std::size_t run_count = 0;
};
StageBlocks stage_blocks(const TransformerSpec& s, const Layout3D& l, std::int64_t dense,
                         std::int64_t layers);

// What stage `i` of `layers` blocks holds on one GPU (`blocks` its blocks, when known).
StageHolding stage_share(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                         std::int64_t layers, const StageBlocks& blocks);
StageHolding stage_share(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                         std::int64_t layers);
// The stage with the most parameters on one GPU (the last on ties: it carries the head).
StageHolding heaviest_params_stage(const TransformerSpec& s, const Layout3D& l);

// The blocks' Linear weights on one GPU of stage `i` (`layers` blocks, `dense` of them a
// mixture's dense first blocks), with the prediction modules' on the head stage: what
// Transformer Engine runs in FP8 under an FP8 recipe.
std::int64_t fp8_linear_weights(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                                std::int64_t layers, std::int64_t dense);

// Tokens of a sequence one context-parallel rank holds (the sequence divides by 2 cp).
std::int64_t tokens_per_rank(const Layout3D& l);
// The numeric recipe of a layout's framework.
NumericRecipe recipe_of(const Layout3D& l);

// Whether the experts' states shard over other ranks than the rest's (their own data-parallel
// ranks under expert parallelism).
bool experts_sharded_apart(const TransformerSpec& s, const Layout3D& l);
// The elements of a GPU's sharded states on a stage holding `params`, `experts` of them the
// routed experts'.
std::int64_t sharded_elements(const TransformerSpec& s, const Layout3D& l, std::int64_t params,
                              std::int64_t experts);
// Whether the layout's gradient sync waits for the last micro-batch of a step (FSDP2 under
// pipeline parallelism).
bool deferred_sync(const Layout3D& l);
LayoutSharding layout_sharding(const Layout3D& l);

}  // namespace dtplan::cost
