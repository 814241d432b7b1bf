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

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/training_comm.hpp"

namespace dtplan::cost {

// A step's compute and everything else that is not its communication.
struct StepCompute {
  double forward_s = 0;  // one micro-step, after any straggler slowdown
  double backward_s = 0;
  double optimizer_s = 0;
  double host_transfer_s = 0;  // exposed host <-> GPU copies per step under offload
  std::int64_t micro_steps = 1;
  double overlap_compute_slowdown = 0;
};

struct StepInputs : StepCompute {
  std::span<const CommOp> ops;  // each op's time per run (not owned)
  bool no_sync = true;
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

// The ops of one pass in one micro-step: what may overlap the pass (`comm_s`, its largest
// message count) and what the framework serialises with it (`blocking_s`).
struct PassComm {
  double comm_s = 0;
  std::int64_t messages = 0;
  double blocking_s = 0;
  // comm_s over max(messages, 1): the last message, which nothing can hide. Set by the
  // StepComm that sums the ops, so that timing a step divides once per pass, not twice.
  double last_message_s = 0;
  double total_s() const { return comm_s + blocking_s; }
};

// The communication of one micro-step, by phase: exposed whole before forward and after
// backward, alongside each pass.
struct MicroStepComm {
  double before_s = 0;
  PassComm forward;
  PassComm backward;
  double after_s = 0;
};

// A step's ops summed once for each place a micro-step can take -- the only one, the first,
// one between, the last: which ops run in a micro-step depends on its place and no_sync alone,
// never on the compute. Timing a step from it is a few dozen flops, which lets the planner
// time millions of (micro-batch, accumulation, recomputation) choices of one group of ops.
class StepComm {
 public:
  StepComm() = default;
  StepComm(std::span<const CommOp> ops, bool no_sync);
  // The ops of micro-step `index` of `micro_steps`.
  const MicroStepComm& micro_step(std::int64_t index, std::int64_t micro_steps) const;
  double after_step_s() const { return after_step_s_; }
  StepTimes times(const StepCompute& c) const;
  // times(c).step_s to the last bit, without the breakdown: what a search ranks by.
  double step_s(const StepCompute& c) const;

 private:
  enum Place { only, first, between, last };
  std::array<MicroStepComm, 4> places_{};
  double after_step_s_ = 0;  // ops after the optimizer step, exposed whole once per step
};

// StepComm(in.ops, in.no_sync).times(in).
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
// The optimizer step of a data-parallel strategy: the longer of its GPU (or offloaded) time
// and, for an eager FSDP step, the host's dispatch (fsdp_optimizer_host_s).
double optimizer_step_s(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                        const ComputeConstants& k);

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
