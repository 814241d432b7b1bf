// Communication of one optimizer step of data-parallel training, per strategy: which
// collectives run, on which group, how many bytes, how often, and how long they take on the
// topology. Under gradient accumulation with no_sync (DDP's context manager, FSDP's
// no_sync, DeepSpeed's boundary-only reduction in ZeRO-1) gradients are synchronised once
// per optimizer step instead of once per micro-step; the estimate reports both.
//
// Per step, with a parameters, 16-bit weights/gradients of b bytes, n GPUs:
//   ddp, fsdp-no-shard  all-reduce of the gradients (a*b), in buckets
//   zero1, zero2        reduce-scatter of the gradients + all-gather of the updated weights
//   zero3, fsdp-full    all-gather of the weights in forward and again in backward, and a
//                       reduce-scatter of the gradients: 3 (n-1)/n a*b on the wire against
//                       DDP's 2 (n-1)/n a*b, i.e. 1.5x (the ZeRO paper, Sec. 7)
//   fsdp-grad-op        one all-gather (weights stay gathered through backward) + reduce-scatter
//   fsdp-hybrid         fsdp-full inside a node, plus an all-reduce of each shard across nodes
//   dp                  DataParallel: weights broadcast from GPU 0, gradients reduced to it
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cost {

struct CommOp {
  std::string name;  // "gradient all-reduce (DDP buckets)"
  Collective collective = Collective::all_reduce;
  std::string group;           // "8 GPUs", "8 GPUs of a node", "4 replicas across nodes"
  std::int64_t messages = 0;   // collective calls each time the op runs
  Bytes bytes;                 // message bytes each time (sum over its messages)
  Bytes wire_bytes;            // bytes each GPU sends each time (bytes x bus factor)
  bool gradient_sync = false;  // skipped by no_sync on all but the last micro-step
  std::int64_t runs = 0;       // times per optimizer step
  double time_s = 0;           // each time it runs
  std::string algorithm;       // e.g. "ring/Simple"
  CommWhen when = CommWhen::every_micro_step;
  CommPhase phase = CommPhase::backward;
  bool blocking = false;  // the device is synchronised around it: nothing overlaps it
};

// {"name", "collective", "group", "messages", "bytes", "wire_bytes_per_gpu", "runs_per_step",
// "time_s", "deferred_by_no_sync", "algorithm"}.
nlohmann::json to_json(const CommOp& op);

struct TrainingComm {
  Strategy strategy = Strategy::ddp;
  std::int64_t micro_steps = 1;  // gradient accumulation steps per optimizer step
  bool no_sync = true;           // requested
  bool no_sync_supported = true;
  std::vector<CommOp> ops;
  Bytes bytes_per_step;  // sum of op bytes x runs
  Bytes wire_bytes_per_step;
  double time_per_step_s = 0;  // with no_sync where supported
  double time_synced_every_micro_step_s = 0;
  Bytes wire_bytes_synced_every_micro_step;
  std::vector<std::string> notes;
};

struct CommModels {
  CommModel& all;   // the data-parallel group
  CommModel& node;  // the GPUs of one node (hybrid sharding's shard group)
  // One copy kernel's launch and tail (compute.json kernel_overhead_s): list-form collectives
  // (CollectiveRule::per_rank_copies) pay one per rank of the group per call.
  double copy_kernel_s = 0;
};

// ZeRO's reduce and all-gather buckets hold k.zero_reduce_bucket_elements, the value the
// memory model and the DeepSpeed export use too.
TrainingComm estimate_training_comm(const ModelDesc& m, const TrainingConfig& c,
                                    std::int64_t micro_steps, bool no_sync, CommModels models,
                                    const OverheadConstants& k);

}  // namespace dtplan::cost
