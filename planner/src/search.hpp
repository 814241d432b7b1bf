// The planner's search, internal to planner/. Two phases: prepare() builds every cache
// (communication per strategy, precision, GPU count and offload; memory per that and
// checkpointing, as a line in the micro-batch; compute per precision, checkpointing and
// micro-batch); the search then visits each configuration with lookups and arithmetic only.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dp_rejections.hpp"
#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/cost/training_comm.hpp"
#include "dtplan/planner/planner.hpp"

namespace dtplan::planner::detail {

// Communication, optimizer and host time of one (strategy, precision, GPUs, offload).
struct Group {
  std::vector<cost::CommOp> ops;
  // With full recomputation, where it adds collectives (ZeRO-3 gathers the recomputed
  // submodules again): the ops then. Empty when they are `ops`.
  std::vector<cost::CommOp> ops_full_recompute;
  // The two lists summed per micro-step place, what the search times steps from.
  cost::StepComm comm;
  cost::StepComm comm_full_recompute;
  double optimizer_s = 0;
  double host_s = 0;
  bool ok = false;
};

// Peak memory per GPU: in backward linear in the micro-batch (activations and the buffers that
// scale with them are; the rest is fixed), at_one + slope x (micro_batch - 1); never below the
// optimizer step's peak.
struct MemoryLine {
  Bytes at_one;  // the backward's peak at micro-batch 1
  Bytes slope;
  bool ok = false;
  Bytes host;   // host RAM per node, which does not grow with the micro-batch
  Bytes floor;  // the optimizer step's peak (PyTorch's strategies), which does not either
  Bytes at(std::int64_t mb) const {
    return std::max(Bytes{at_one.value + slope.value * (mb - 1)}, floor);
  }
};

// A data-parallel size and micro-batch; the accumulation follows from the global batch.
struct Shape {
  std::size_t dp_index = 0;
  std::size_t mb_index = 0;  // into Search::micro_batches_
  std::int64_t grad_accum = 1;
  std::int64_t global_batch = 0;
};

// A feasible configuration as the search met it: what it ranks by, and its place on the
// search's axes, from which Search prices its candidate again when a report needs it. Copying
// each candidate (96 bytes) into the list was a third of the search loop's time, most of it the
// first touch of the list's pages.
struct Priced {
  double objective = 0;
  std::int64_t memory = 0;  // bytes per GPU
  std::uint32_t shape = 0;  // into Search::shapes_
  std::uint8_t strategy = 0;
  std::uint8_t precision = 0;
  std::uint8_t offload = 0;
  std::uint8_t place = 0;  // checkpointing index x 2 + 1 when synchronising every micro-step
};

class Search {
 public:
  struct Inputs {
    const ModelDesc& model;
    const Topology& topology;
    const InterconnectTable& table;
    const GpuSpec& gpu;
    const PlanRequest& request;
    const cost::ComputeConstants& compute;
    const cost::OverheadConstants& overheads;
    std::shared_ptr<cost::CommContext> comm;  // routes and rings shared over group sizes
  };
  explicit Search(const Inputs& in);
  PlanResult run();

 private:
  TrainingConfig config(std::size_t s, std::size_t p, std::size_t d, std::size_t c, std::size_t o,
                        std::int64_t mb, std::int64_t accum = 1) const;
  MemoryLine memory_line(std::size_t s, std::size_t p, std::size_t d, std::size_t c, std::size_t o,
                         std::int64_t accum, bool no_sync) const;
  void set_axes();
  void prepare_groups();
  void prepare_memory();
  std::vector<std::int64_t> per_gpu_batches(std::int64_t dp) const;
  std::vector<Shape> shapes();
  void prepare_compute();
  void search();
  void evaluate(std::size_t shape, std::size_t s, std::size_t p, std::size_t o);
  void evaluate(std::size_t shape, std::size_t s, std::size_t p, std::size_t o, std::size_t y);
  Candidate candidate(const Shape& shape, std::size_t s, std::size_t p, std::size_t o,
                      std::size_t y) const;
  Candidate candidate(const Priced& f) const;
  cost::StepCompute step_compute(const Group& g, const Candidate& c) const;
  // The step time and objective of `c` (what the loop ranks by), then its rates (samples/s,
  // tokens/s, MFU: what a report shows); price does both.
  void time_step(Candidate& c, const Group& g, const Shape& shape, std::size_t p, std::size_t ci,
                 cost::StepCompute& step) const;
  void fill_rates(Candidate& c, const Shape& shape, std::size_t p, std::size_t ci) const;
  void price(Candidate& c, const Group& g, const Shape& shape, std::size_t p, std::size_t ci,
             cost::StepCompute& step) const;
  Group group(std::size_t s, std::size_t p, std::size_t d, std::size_t o, std::size_t y) const;
  void tell_progress(std::size_t done, const std::string& what) const;
  void finish();
  void rank();
  void pareto();
  void exact_memory(Candidate& c) const;
  std::int64_t seq_len() const;
  double objective(const Candidate& c) const;
  double run_seconds(const Candidate& c) const;
  void reject(const Candidate& c, Reason why, double amount, std::string detail = {});
  void reject_evaluated(const Candidate& c, Reason why, double amount);
  void reject_family(std::size_t s, std::size_t p, std::size_t d, std::size_t o,
                     std::optional<std::size_t> c, const std::string& why);
  Candidate candidate(const Shape& shape) const;
  // y: 0 with no_sync, 1 synchronising every micro-step.
  std::size_t group_index(std::size_t s, std::size_t p, std::size_t d, std::size_t o,
                          std::size_t y) const;
  std::size_t memory_index(std::size_t g, std::size_t c, bool accumulating) const;

  Inputs in_;
  RunGoal goal_;
  cost::MemoryFigures figures_;  // the memory lines' estimates
  std::vector<Strategy> strategies_;
  std::vector<Precision> precisions_;
  std::vector<Checkpointing> checkpointings_;
  std::vector<Offload> offloads_;
  std::vector<std::int64_t> dps_;
  std::vector<std::int64_t> micro_batches_;  // every micro-batch any shape uses, in order seen
  std::map<std::int64_t, std::size_t> mb_index_;
  std::vector<std::unique_ptr<cost::CommModel>> all_models_;
  std::vector<std::unique_ptr<cost::CommModel>> node_models_;
  std::vector<Group> groups_;
  std::vector<MemoryLine> memory_;          // [group][checkpointing][accumulating]
  std::vector<cost::ComputeTime> compute_;  // [mb][p][c]
  std::size_t compute_rows_ = 0;            // micro-batches with compute filled
  std::vector<Shape> shapes_;               // what search() visits
  std::vector<double> peak_flops_;          // per precision
  std::vector<char> defers_sync_;           // per strategy: whether it can skip synchronising
  double seq_tokens_ = 1;                   // tokens per sample (1 without a sequence)
  std::vector<Priced> feasible_;
  DataParallelRejections rejected_;
  PlanResult result_;
};

// When nothing fits: what the leanest configuration needs and what would make room.
std::vector<std::string> suggestions(const Search::Inputs& in, const PlanResult& result);

}  // namespace dtplan::planner::detail
