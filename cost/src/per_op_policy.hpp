// torchtitan's per-op selective checkpointing (SelectivePolicy::per_op, training.hpp): the
// matrix multiplies of one block in the order its forward calls them, and which of them the
// policy recomputes.
#pragma once

#include <cstdint>
#include <vector>

#include "dtplan/model/transformer.hpp"

namespace dtplan::cost {

// One aten.mm of a block's forward: rows x in times in x out, widths of a tensor-parallel rank.
struct BlockMm {
  std::int64_t in = 0;
  std::int64_t out = 0;
  bool recomputed = false;  // every second one in call order (the 2nd, 4th, ...)
};

// The aten.mm calls of one block of `t` on a rank of `tp` tensor-parallel ranks, as torchtitan's
// models call them: the query, key and value projections one by one (latent attention: the
// query down and up projections or the one query projection, the key/value down and up
// projections), the output projection, then the dense MLP's w1, w3 (gated) and w2, or a
// mixture's shared expert's. The router's GEMM (always recomputed: torchtitan forces it) and
// the routed experts' grouped GEMMs (not aten.mm) are not among them. Column-parallel
// projections split their output width t ways, row-parallel ones their input width; latent
// attention's down projections run whole on every rank.
std::vector<BlockMm> per_op_block_mms(const TransformerSpec& t, std::int64_t tp);

}  // namespace dtplan::cost
