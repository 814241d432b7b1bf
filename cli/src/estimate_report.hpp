// Text and JSON layout of a step-time estimate: memory, compute, communication, the step's
// composition, throughput and the per-stream timeline.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/topology.hpp"

namespace dtplan::cli {

struct EstimateReportContext {
  const ModelDesc& model;
  const TrainingConfig& config;
  const Topology& topology;
  const GpuSpec& gpu;
  const cost::StepOptions& options;
};

// step_time_s, samples_per_s, tokens_per_s, mfu, hfu, global_batch, per_gpu{...},
// compute{...}, step{...}, comm{...}, timeline[...], memory{...}.
nlohmann::json step_estimate_json(const cost::StepEstimate& e);
nlohmann::json timeline_json(const std::vector<cost::TimelineEvent>& events);

void print_step_estimate(std::ostream& out, const EstimateReportContext& ctx,
                         const cost::StepEstimate& e);
// Where a step's time goes: compute, exposed and hidden communication, optimizer, host copies.
void print_step_breakdown(std::ostream& out, const cost::StepEstimate& e,
                          const std::string& indent);
// Two rows of text, compute and communication, `width` characters for the whole step.
void print_gantt(std::ostream& out, const std::vector<cost::TimelineEvent>& events,
                 std::size_t width);

}  // namespace dtplan::cli
