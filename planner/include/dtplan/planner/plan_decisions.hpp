// What a plan decides beyond its ranking: which configuration each export holds when the
// best is not one that tool runs, what to say about GPUs a batch leaves idle, and the full
// step estimate of a ranked configuration (the search keeps only its totals).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dtplan/cost/step_time.hpp"
#include "dtplan/planner/unified_plan.hpp"

namespace dtplan::planner {

// A number with one decimal, as the plan notes print them ("12.3").
std::string one_decimal(double v);

// The configuration DeepSpeed runs: the best ZeRO configuration (the best data-parallel plan
// itself when it is one), with a note saying how far behind the best it is; else the best
// data-parallel plan itself. `best` must hold a best configuration.
struct ExportChoice {
  Candidate candidate;
  std::string note;  // empty when the export holds the best plan itself
};
ExportChoice deepspeed_choice(const PlanResult& best, Objective objective);

// When the plan's best is a tensor x context x pipeline layout but data-parallel exports were
// asked for (DeepSpeed, Accelerate, the Plan file, launch lines): what they hold instead.
// `plan_file` false: the Plan file holds the layout itself (dtplan-run executes it).
std::optional<std::string> layout_beats_exports_note(const UnifiedPlan& p, Objective objective,
                                                     bool plan_file = true);

// When the best is a mixture of experts' layout: why its expert layout (ep x etp) won, each
// other expert layout the search priced at its best (slower by how much, or over memory).
std::optional<std::string> expert_layout_note(const UnifiedPlan& p, Objective objective);

// When the search tried Megatron-LM's recompute modules (or chose some): why its recomputation
// won, each other mode or module set at its best (slower by how much, or over memory).
std::optional<std::string> recompute_note(const UnifiedPlan& p, Objective objective);

// When the batch kept GPUs idle: the batches that would use the most GPUs searched.
// Both notes mark fields as {name} (render_fields).
std::optional<std::string> idle_gpus_note(const PlanResult& r, std::int64_t global_batch);

// The full step estimate of a data-parallel candidate under the request's fixed choices.
class CandidateEstimator {
 public:
  CandidateEstimator(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                     const GpuSpec& gpu, const cost::ComputeConstants& k,
                     const cost::OverheadConstants& overheads, const PlanRequest& r,
                     std::shared_ptr<cost::CommContext> comm);
  cost::StepEstimate operator()(const Candidate& c) const;

 private:
  const ModelDesc& model_;
  const Topology& topology_;
  const InterconnectTable& table_;
  const GpuSpec& gpu_;
  const cost::ComputeConstants& compute_;
  const cost::OverheadConstants& overheads_;
  const PlanRequest& request_;
  std::shared_ptr<cost::CommContext> comm_;
};

}  // namespace dtplan::planner
