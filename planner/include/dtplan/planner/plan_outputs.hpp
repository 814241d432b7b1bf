// What a plan is written out as, once the search has ranked it: the files each export asked
// for (DeepSpeed, Accelerate, the Plan file, Megatron-LM arguments, a torchtitan job config),
// the launch lines, the notes they bring, the training schedule, and the full step estimate of
// the best data-parallel configuration and of each strategy's best. Every decision of which
// configuration an export describes lives here, so the CLI and the GUI only show and write.
// Files are staged, not written: a front end writes them together once nothing failed.
// Errors are FieldErrors naming the export's field (export_megatron, save_plan, ...); notes
// mark fields as {name} (render_fields).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/planner/exports.hpp"
#include "dtplan/planner/schedule.hpp"
#include "dtplan/planner/unified_plan.hpp"

namespace dtplan::planner {

// The exports asked for; an empty path asks for none.
struct ExportRequest {
  std::string save_plan;          // the Plan file of the best data-parallel configuration
  std::string export_deepspeed;   // its DeepSpeed config (or the best ZeRO one)
  std::string export_accelerate;  // an Accelerate config: the best FSDP2 layout when it
                                  // is the plan's best and Accelerate runs it, else the best
                                  // data-parallel configuration
  std::string export_megatron;    // the best Megatron-LM layout's arguments
  std::string export_torchtitan;  // the best FSDP2 layout's torchtitan config
  bool export_launch = false;     // torchrun and deepspeed lines
  LaunchOptions launch;           // script, master address and port, learning rate
  ScheduleRequest schedule;       // the training schedule, if given
  PlanTarget target;              // what the Plan file records as its inputs
};

// The inputs the plan was computed on (not owned).
struct PlanInputs {
  const ModelDesc& model;
  const Topology& topology;
  const InterconnectTable& table;
  const GpuSpec& gpu;
  const cost::ComputeConstants& compute;
  const cost::OverheadConstants& overheads;
  const PlanRequest& request;
  std::shared_ptr<cost::CommContext> comm;  // the routing the search used
};

struct PlanOutputs {
  std::vector<OutputFile> files;  // `what` names the field, as {export_deepspeed}
  std::vector<std::pair<std::string, std::string>> written;  // what, path
  std::vector<std::string> notes;
  std::vector<std::string> launch;
  std::optional<Schedule> schedule;
  // The best plan's full estimate, when it is a data-parallel configuration.
  std::optional<cost::StepEstimate> estimate;
  // Each strategy's best configuration, estimated in full: where its step time goes.
  std::map<Strategy, cost::StepTimes> strategy_times;
  // The layouts the Megatron-LM and torchtitan exports describe, when asked for.
  std::optional<cost::Layout3D> megatron, torchtitan;
};

// The precisions a plan searches when the request names none (planner.hpp's
// default_precisions), checked against the GPU; returns a note when the GPU changed the
// default. Throws a FieldError naming `precision`.
std::optional<std::string> resolve_precisions(const GpuSpec& gpu, PlanRequest& r);

PlanOutputs plan_outputs(const UnifiedPlan& plan, const PlanInputs& in, const ExportRequest& e);

// When the best plan is a layout under an FP8 recipe: how its speed compares with the same
// layout in bf16 (FP8 can lose where casts outweigh small GEMMs), and whether that fits.
std::optional<std::string> fp8_gain_note(const UnifiedPlan& plan, const PlanInputs& in);

}  // namespace dtplan::planner
