// What dtplan-run should measure for a run, predicted from a hardware profile: per-phase time,
// each collective of the step (kind, phase, bytes, count), and per-rank memory by component.
// Model states come from the memory model (estimate_memory, fp32); activations and buffers from
// the dense stack's shapes; times from the profile's fitted constants. The collective schedule
// is the one the runtime's strategies follow (runtime/include/dtplan/runtime/trainer.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/cost/hardware_profile.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cost {

// How dtplan-run executes a strategy (the registry's runtime column): FSDP modes run as the
// ZeRO stage (or DDP) they match. Throws for fsdp-hybrid, which needs a 2-D process grid.
RuntimeMode runtime_mode(Strategy s);
// Whether dtplan-run skips gradient synchronisation before the last micro-step: DDP-like
// strategies when the plan asks for no_sync, and ZeRO-1 always (it reduces at the
// accumulation boundary, as DeepSpeed's stage 1 does).
bool runtime_no_sync(Strategy s, bool requested);

struct RuntimeRun {
  DenseStack stack;
  Strategy strategy = Strategy::ddp;
  Optimizer optimizer = Optimizer::adamw;
  std::int64_t ranks = 1;  // data-parallel; the job has ranks x stack.tp processes
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  bool no_sync = true;  // as the runtime executes it
  std::int64_t bucket_cap_bytes = 0;
  std::vector<std::string> not_executed;  // what the model has that the run leaves out
};

struct PredictedCollective {
  std::string kind;
  std::string phase;
  std::int64_t bytes = 0;
  std::int64_t count_per_step = 0;
  double time_s = 0;  // one operation
};

// The step's parts before the profile's step correction (what calibration fits it on).
struct StepParts {
  double compute_s = 0;                // forward + backward compute, all micro-steps
  double collectives_s = 0;            // collectives inside forward and backward
  double optimizer_s = 0;              // optimizer compute
  double optimizer_collectives_s = 0;  // gradient sync and optimizer-phase collectives
};

struct RuntimePrediction {
  double forward_s = 0, backward_s = 0, comm_wait_s = 0, optimizer_s = 0, step_s = 0;
  StepParts parts;
  std::vector<PredictedCollective> collectives;
  std::map<std::string, std::int64_t> memory;  // rank 0 at its peak, by component
  std::int64_t peak_bytes = 0;
};

RuntimePrediction predict_runtime_step(const RuntimeRun& run, const HardwareProfile& profile);

// Unit sizes padded to a multiple of `ranks` (every rank owns an equal slice of each unit).
std::vector<std::int64_t> padded_units(const DenseStack& s, std::int64_t ranks);
// DDP buckets' element counts, filled in backward order until each reaches cap_bytes.
std::vector<std::int64_t> bucket_elements(const DenseStack& s, std::int64_t ranks,
                                          std::int64_t cap_bytes);

}  // namespace dtplan::cost
