// A layout in words, as reports and file headers show it.
#pragma once

#include <string>

#include "dtplan/cost/parallel3d.hpp"

namespace dtplan::cost {

// "tp 8 x pp 4 x dp 4, interleave 2, schedule interleaved, sequence parallel, micro-batch 1 x
// 64, recompute selective"; FSDP2 layouts name their shard group and mode, context
// parallelism its exchange, uneven stages their layer counts ("7, 8 x 14, 7").
std::string describe(const Layout3D& l);

// Who holds the model states, in one word: "dist-opt" (Megatron's distributed optimizer),
// "replicated", "fsdp2" (sharded, blocks gathered per pass), "fsdp2-keep" (gathered from
// forward to backward).
std::string states_name(const Layout3D& l);

}  // namespace dtplan::cost
