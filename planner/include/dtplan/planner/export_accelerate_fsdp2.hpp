// An FSDP2 layout as an Accelerate config (YAML, `accelerate launch --config_file FILE`):
// fsdp_config with fsdp_version 2 and fsdp_reshard_after_forward (Accelerate's FSDP2 keys,
// docs "FSDP1 vs FSDP2"), and parallelism_config with the data-parallel replicate and shard
// sizes, tensor- and context-parallel sizes (Accelerate's ParallelismConfig, which shards
// FSDP over dp_shard x cp as torchtitan does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/planner/exports.hpp"

namespace dtplan::planner {

// Why Accelerate cannot run the layout, or nullopt: not FSDP2, pipeline parallelism
// (Accelerate has none), Ulysses context parallelism (Accelerate's FSDP2 CP rotates K/V),
// sequence parallelism (Accelerate's TP follows the model's tp_plan, which keeps the norms'
// sequence whole), a shard group context parallelism does not divide.
std::optional<std::string> accelerate_fsdp2_problem(const cost::Layout3D& l);

// Throws dtplan::Error with accelerate_fsdp2_problem's reason. `gpus_per_node` gives the
// machines; `o` the rendezvous address and port for more than one.
std::string accelerate_fsdp2_config(const ModelDesc& m, const cost::Layout3D& l,
                                    std::int64_t gpus_per_node, const LaunchOptions& o);

}  // namespace dtplan::planner
