// The layout flags `dtplan estimate` and `dtplan memory` share: --tp --pp --cp --cp-comm
// --interleave --sp --schedule --pp-layers --framework --sharding --dp-shard, and the
// layout frameworks as --strategy names (megatron, fsdp2). Given any of them, the command
// describes a tensor x context x pipeline x data layout instead of a data-parallel strategy.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cli {

struct LayoutOptions {
  std::int64_t tp = 1, pp = 1, cp = 1, interleave = 1;
  std::string cp_comm = "p2p";
  std::string framework;      // empty: megatron, or the --strategy name when it is a framework
  std::string sharding;       // empty: the framework's own (optimizer; FSDP2 parameters)
  std::int64_t dp_shard = 0;  // ranks a state is sharded over; 0: all dp x cp
  std::string schedule;       // empty: Megatron's own
  std::vector<std::int64_t> pp_layers;  // layers of each stage; empty: the rule
  bool sequence_parallel = false;
};

void add_layout_options(CLI::App& cmd, LayoutOptions& o);

// Whether a --strategy name is a layout framework (megatron, fsdp2) rather than a
// data-parallel strategy.
bool is_layout_framework(const std::string& strategy);

// Whether the flags (or a framework named as the strategy) ask for a layout.
bool wants_layout(const LayoutOptions& o, const std::string& strategy);

// The data-parallel size the flags leave of `gpus`: gpus / (tp x cp x pp); throws naming the
// flags when a size is not positive or does not divide.
std::int64_t layout_dp(const LayoutOptions& o, std::int64_t gpus);

// The layout of `c` (its GPUs, micro-batch, sequence, checkpointing and precision) under the
// flags, with `micro_batches` per pipeline per step; throws naming the flag that breaks a
// rule (sizes, GPUs not divisible by tp x cp x pp, the model's shapes, the schedule's rules).
cost::Layout3D layout_of(const LayoutOptions& o, const std::string& strategy, const ModelDesc& m,
                         const TrainingConfig& c, std::int64_t micro_batches);

}  // namespace dtplan::cli
