// Layouts and plan entries as JSON: one "layout" object with the same keys for every entry of
// a plan (a data-parallel strategy is the layout tp = pp = cp = 1 with its sharding and
// framework), beside its memory and time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "dtplan/planner/search3d.hpp"
#include "dtplan/planner/unified_plan.hpp"

namespace dtplan::planner {

// A tensor x context x pipeline layout: its shape, memory by component and step by part.
nlohmann::json to_json(const Candidate3D& c);

// A layout's memory term by term, as the data-parallel estimate's "details":
// {"activations": [{"name", "bytes"}, ...], "buffers": [...], "overhead": [...]}.
nlohmann::json memory_details_json(const cost::Memory3D& m);

// How each component of a layout's memory is derived, {"weights": "...", ...}, and its notes,
// as the data-parallel estimate's "explain" and "notes" ({field} markers left for the front
// end).
nlohmann::json memory_explain_json(const cost::Memory3D& m);

// The layout of an entry: family, framework, sharding and the ranks it spans, dp, tp, pp, cp
// (and its exchange), interleave, schedule, stage layers, sequence parallel, micro-batch,
// accumulation, recompute, offload, precision. `gpus_per_node` sizes hybrid shard groups.
nlohmann::json layout_json(const LayoutChoice& c, std::int64_t gpus_per_node);

// The framework that runs a data-parallel strategy ("torch-ddp", "deepspeed", "fsdp1", ...)
// and what it shards ("none", "optimizer", "gradients", "parameters").
std::string framework_of(Strategy s);
std::string sharding_of(Strategy s);

}  // namespace dtplan::planner
