// The layout flags `dtplan estimate` and `dtplan memory` share: --tp --pp --cp --ep --etp
// --cp-comm --interleave --sp --schedule --pp-layers --framework --sharding --dp-shard, and the
// layout frameworks as --strategy names (megatron, fsdp2). Given any of them, the command
// describes a tensor x context x pipeline x data layout instead of a data-parallel strategy.
#pragma once

#include <CLI/CLI.hpp>

#include "dtplan/planner/layout_spec.hpp"

namespace dtplan::cli {

// The flags fill the library's LayoutSpec (planner/layout_spec.hpp), which turns them into a
// layout and names its fields in errors; the CLI renders those as these flags.
using LayoutOptions = planner::LayoutSpec;
using planner::is_layout_framework;
using planner::layout_dp;
using planner::layout_of;
using planner::wants_layout;

void add_layout_options(CLI::App& cmd, LayoutOptions& o);

// --ddp-bucket-size's check: a whole number of parameters from 1 to 2^50.
CLI::Validator bucket_size_check();

}  // namespace dtplan::cli
