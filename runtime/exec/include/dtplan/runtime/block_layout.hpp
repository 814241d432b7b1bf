// Where each tensor of a block sits inside the block's unit (dense_model.hpp gives the order):
// offsets in floats from the unit's start, for the stack as one rank holds it (its
// tensor-parallel share when DenseStack::tp > 1). A bias the model lacks takes no room (its
// offset equals the next tensor's); without a gate wg and bg are 0.
#pragma once

#include <cstdint>

#include "dtplan/cost/dense_stack.hpp"

namespace dtplan::runtime {

struct BlockOffsets {
  std::int64_t n1 = 0, wqkv = 0, bqkv = 0, wo = 0, bo = 0, n2 = 0, wg = 0, bg = 0, wu = 0, bu = 0,
               wd = 0, bd = 0, end = 0;
};

BlockOffsets block_offsets(const cost::DenseStack& s);

}  // namespace dtplan::runtime
