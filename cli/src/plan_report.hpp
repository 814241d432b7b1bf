// Text and JSON layout of a plan: the best configuration or layout with its step breakdown,
// the runners-up of both families in one ranking, why each other strategy or framework lost,
// the Pareto front, the rejected configurations, the training schedule and what was exported.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "dtplan/cost/step_time.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/schedule.hpp"
#include "dtplan/planner/unified_plan.hpp"
#include "error_band_report.hpp"

namespace dtplan::cli {

struct PlanReportContext {
  const ModelDesc& model;
  const Topology& topology;
  const GpuSpec& gpu;
  const planner::PlanRequest& request;
  const planner::UnifiedPlan& plan;
  std::int64_t rejected_shown = 5;  // per reason, the nearest misses (text and JSON)
  bool all_rejected = false;        // JSON: list every rejected entry, not a summary
  const planner::PlanResult& result() const { return plan.data_parallel; }
};

// What the command produced besides the search: the best plan's full estimate, its schedule,
// the files written and the launch lines.
struct PlanExtras {
  std::optional<cost::StepEstimate> estimate;
  std::optional<planner::Schedule> schedule;
  std::vector<std::pair<std::string, std::string>> written;  // what, path
  std::vector<std::string> launch;
  std::vector<std::string> notes;
  // Each strategy's best configuration, estimated in full: where its step time goes.
  std::map<Strategy, cost::StepTimes> strategy_times;
  // How far published runs of the best plan's kind were from dtplan's predictions.
  std::optional<BandReport> band;
  // The plan's command line: each ranked entry's `dtplan estimate` is built from it
  // (reproduce.hpp).
  std::vector<std::string> plan_args;
};

nlohmann::json candidate_json(const planner::Candidate& c);
nlohmann::json plan_json(const PlanReportContext& ctx, const PlanExtras& extras);
void print_plan(std::ostream& out, const PlanReportContext& ctx, const PlanExtras& extras);
// When nothing fits: the rejected summary (to out) and the suggestions.
void print_no_plan(std::ostream& out, const PlanReportContext& ctx);

}  // namespace dtplan::cli
