// One optimizer step: gradient-accumulation micro-steps of forward and backward, the
// communication that their compute does not hide, the optimizer step, host transfers under
// offload; throughput, MFU and HFU; and a per-stream timeline (the data behind a Gantt chart).
//
// Overlap: an op of U messages (buckets, units) that runs alongside compute C hides behind it
// except for what it cannot start before compute produces it: the comm stream finishes
//     max(C + T/U, C/U + T)   after the phase starts,
// so the exposed time is max(T/U, T - C (U-1)/U): DDP's last bucket, or ZeRO-3's first
// all-gather, is always exposed. Ops before forward, after backward and after the optimizer
// step (DataParallel's broadcast and reduce, ZeRO-1/2's all-gather of updated weights) are
// exposed whole. With no_sync, gradient synchronisation runs in the last micro-step only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/training_comm.hpp"

namespace dtplan::cost {

struct StepInputs {
  double forward_s = 0;  // one micro-step, after any straggler slowdown
  double backward_s = 0;
  std::span<const CommOp> ops;  // each op's time per run (not owned)
  double optimizer_s = 0;
  double host_transfer_s = 0;  // exposed host <-> GPU copies per step under offload
  std::int64_t micro_steps = 1;
  bool no_sync = true;
  double overlap_compute_slowdown = 0;
};

struct StepTimes {
  double step_s = 0;
  double compute_s = 0;          // forward + backward over all micro-steps
  double forward_compute_s = 0;  // of which forward
  double exposed_comm_s = 0;     // communication the compute did not hide
  // exposed_comm_s in parts: what the ops alongside forward and alongside backward left
  // exposed, and the ops before forward, after backward and after the optimizer step.
  double exposed_forward_s = 0, exposed_backward_s = 0, exposed_outside_s = 0;
  double hidden_comm_s = 0;  // communication that overlapped compute
  double optimizer_s = 0;
  double host_transfer_s = 0;
};

// The overlap rule above, for every model that overlaps communication with compute (the
// data-parallel step, FSDP2's block gathers in a layout): of `comm_s` seconds in `messages`
// messages alongside `compute_s`, max(T/U, T - C (U-1)/U) stays exposed.
double exposed_comm_s(double comm_s, std::int64_t messages, double compute_s);

// Arithmetic only, no allocation: the planner calls it per candidate.
StepTimes step_times(const StepInputs& in);

struct TimelineEvent {
  std::string stream;  // "compute" or "communication"
  std::string name;
  double start_s = 0;
  double end_s = 0;
};

std::vector<TimelineEvent> step_timeline(const StepInputs& in);

struct StepOptions {
  std::int64_t micro_steps = 1;  // gradient accumulation
  bool no_sync = true;
  double straggler_slowdown = 1.0;  // the slowest rank's compute, relative (>= 1)
};

struct StepEstimate {
  std::int64_t global_batch = 0;
  std::int64_t seq_len = 0;  // 0 for layer lists
  StepTimes times;
  ComputeTime compute;  // one micro-step, before the straggler slowdown
  TrainingComm comm;
  MemoryEstimate memory;
  std::vector<TimelineEvent> timeline;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double hfu = 0;
};

// Parameters each rank's optimizer steps over: a shard when the strategy shards it.
std::int64_t optimizer_elements(const ModelDesc& m, const TrainingConfig& c);

// Host <-> GPU copies under offload, for a strategy or a layout: returns the exposed seconds
// per step (the `updated` parameters the optimizer stepped coming back once, `element_bytes`
// each, over a `link_Bps` host link); with parameter offload every all-gather in `ops` first
// fetches the `shard` local parameters from the host, which is added to that op's time.
double host_transfers_s(Offload o, std::int64_t updated, std::int64_t shard, double element_bytes,
                        double link_Bps, std::vector<CommOp>& ops);

// host_transfers_s for a data-parallel strategy.
double offload_transfers(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                         const ComputeConstants& k, std::vector<CommOp>& ops);

StepEstimate estimate_step(const ModelDesc& m, const TrainingConfig& c, const StepOptions& o,
                           const GpuSpec& gpu, const ComputeConstants& k,
                           const OverheadConstants& overheads, CommModels models);

}  // namespace dtplan::cost
