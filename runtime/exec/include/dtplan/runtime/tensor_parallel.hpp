// How a tensor-parallel rank's units (its share of the model, cost::tensor_parallel_share) map
// onto the whole model's units, tensor by tensor, as Megatron-LM splits them:
//
//   column-parallel (QKV, gate, up; their biases)  rank r holds rows [r n/tp, (r+1) n/tp) of
//                                                  the queries, the keys and the values each
//   row-parallel (attention output, down)          columns [r n/tp, (r+1) n/tp)
//   vocab-parallel (embedding, untied head)        vocabulary rows [r V/tp, (r+1) V/tp)
//   replicated (norms, positions, the output and   whole on every rank, with equal gradients
//   down projections' biases)                      (they see the same activations)
//
// The pieces slice the whole model's initial values into a rank's share, reassemble the whole
// model from every rank's share, and tell which elements are replicated: a gradient norm
// counts those once.
#pragma once

#include <cstdint>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"

namespace dtplan::runtime {

// rows x cols elements of a rank's unit at local_at, row i being the whole unit's elements
// [whole_at + i whole_cols + col_at, ... + cols).
struct TensorPiece {
  std::int64_t local_at = 0, whole_at = 0, rows = 1, cols = 0, whole_cols = 0, col_at = 0;
  bool replicated = false;
  std::int64_t elements() const { return rows * cols; }
};

// The pieces of unit `unit` of `share` (a stack with tp >= 1) on tensor-parallel rank `rank`,
// covering the rank's unit exactly once in order.
std::vector<TensorPiece> tensor_pieces(const cost::DenseStack& share, std::int64_t unit,
                                       std::int64_t rank);

// A rank's unit cut from the whole unit; the whole unit written from a rank's unit.
std::vector<float> cut_share(const std::vector<TensorPiece>& pieces, const float* whole);
void place_share(const std::vector<TensorPiece>& pieces, const float* share, float* whole);

}  // namespace dtplan::runtime
