// A tensor x context x pipeline x data-parallel layout as Megatron-LM's pretrain_gpt.py
// arguments (megatron/training/arguments.py): the model's shapes, the parallel sizes, the
// pipeline split and interleaving, the batch, recomputation, precision and the distributed
// optimizer, as a bash array a launch script expands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/model_desc.hpp"

namespace dtplan::planner {

// The arguments, flag then value where it takes one. Throws dtplan::Error when Megatron-LM
// cannot express the layout (a zero-bubble or GPipe schedule, a stage split other than
// even, first/last-stage counts or the embedding-and-loss rule) or the model has no layer
// shapes.
std::vector<std::string> megatron_arguments(const ModelDesc& m, const cost::Layout3D& l);
// What of the model Megatron-LM's command line cannot state (so megatron_arguments refuses
// it), or nullopt.
std::optional<std::string> megatron_model_problem(const TransformerSpec& s);

// The file: a comment naming the model and layout, and DTPLAN_MEGATRON_ARGS=( ... ) one flag
// per line, for `torchrun ... pretrain_gpt.py "${DTPLAN_MEGATRON_ARGS[@]}" <data, tokenizer>`.
std::string megatron_args_file(const ModelDesc& m, const cost::Layout3D& l);

}  // namespace dtplan::planner
