// What another framework needs to replay a dtplan-run job step by step (dtplan-run --dump DIR,
// read by tools/torch_replay.py): the workload and settings, the weights before the first
// step and after the last, every rank's batches, and the loss of each step.
//
//   DIR/replay.json   {"workload": dense stack, "units": [{name, params}], "strategy",
//                      "runtime_mode" (ddp, dp, zero1, zero2 or zero3), "ranks",
//                      "optimizer", "lr", "betas", "eps", "weight_decay", "max_grad_norm",
//                      "micro_batch", "grad_accum", "steps", "losses": [...], "files": {...},
//                      "memory": {component: bytes} (rank 0 at its peak)}
//   DIR/initial.f32, DIR/final.f32   every parameter, unpadded, in unit order (little-endian
//                      float32; DenseModel documents the order inside a unit)
//   DIR/batches.i32   for each step, micro-step and rank: micro_batch x seq token ids, then
//                      as many targets (little-endian int32)
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/runtime/trainer.hpp"

namespace dtplan::runtime {

struct ReplayRecord {
  cost::DenseStack stack;
  TrainerSettings settings;
  std::int64_t ranks = 1;
  std::int64_t steps = 0;  // every step run, warm-up included
  std::vector<float> initial, final;
  std::vector<double> losses;
  MemoryUse memory;  // rank 0's, by component, at its peak
  // Tensor-parallel ranks and pipeline stages of the run: `stack` is then the whole model the
  // shares and stages make up and `ranks` the data-parallel ones; rank 0's memory is its part's
  // and is not written.
  std::int64_t tp = 1, pp = 1;
};

// Before the run: creates `dir` and checks its files can be written; throws dtplan::Error
// naming --dump and the reason.
void check_replay_dir(const std::filesystem::path& dir);

// Writes the dump's files together (rank 0); throws dtplan::Error naming the file that cannot
// be written.
void write_replay(const std::filesystem::path& dir, const ReplayRecord& r);

}  // namespace dtplan::runtime
