// A ranked plan turned into its exports, launch lines, notes and estimates (plan_outputs.hpp).
#include "dtplan/planner/plan_outputs.hpp"

#include <cstdio>
#include <filesystem>

#include "dtplan/cost/layout_text.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/export_accelerate_fsdp2.hpp"
#include "dtplan/planner/export_megatron.hpp"
#include "dtplan/planner/export_torchtitan.hpp"
#include "dtplan/planner/layout_plan.hpp"
#include "dtplan/planner/plan_decisions.hpp"

namespace dtplan::planner {

namespace {

// The line that tells the training script the shape it must use (launchers cannot).
std::string shape_comment(const Plan& p) {
  std::string text = "# the script must use micro-batch " + std::to_string(p.training.micro_batch) +
                     " per GPU and accumulate " + std::to_string(p.grad_accum) +
                     " micro-steps (global batch " + std::to_string(p.global_batch) + ")";
  if (p.grad_accum > 1) {
    text += p.no_sync ? ", synchronising gradients in the last micro-step only (no_sync)"
                      : ", synchronising gradients every micro-step";
  }
  return text;
}

// "run/accelerate.yaml" -> "run/accelerate.deepspeed.json".
std::string deepspeed_path_beside(const std::string& accelerate_file) {
  std::filesystem::path p(accelerate_file);
  p.replace_extension(".deepspeed.json");
  return p.string();
}

// The best FSDP2 layout, when it is the plan's best and Accelerate runs it.
const Candidate3D* accelerate_layout(const UnifiedPlan& plan, const ExportRequest& e) {
  if (e.export_accelerate.empty() || !plan.best() || !plan.best()->layout) return nullptr;
  if (accelerate_fsdp2_problem(plan.best()->layout->layout)) return nullptr;
  return &*plan.best()->layout;
}

// The Plan file of the best plan when that is a layout: the layout itself, if dtplan-run
// executes it, else why not (the file then holds the best data-parallel plan, if any).
struct SavedLayout {
  std::optional<Plan> plan;
  std::string problem;
};

SavedLayout saved_layout(const UnifiedPlan& plan, const PlanInputs& in, const ExportRequest& e) {
  SavedLayout s;
  if (e.save_plan.empty() || !plan.best() || !plan.best()->layout) return s;
  auto file = layout_plan_file(*plan.best()->layout, in.request, in.model, e.target);
  if (auto* p = std::get_if<Plan>(&file)) {
    s.plan = std::move(*p);
  } else {
    s.problem = std::get<std::string>(file);
  }
  return s;
}

// The DeepSpeed/Accelerate exports and launch lines (and the Plan file, unless it holds the
// layout) describe data-parallel plans: with none in the plan, the first asked for is refused.
[[noreturn]] void refuse_data_parallel_exports(const UnifiedPlan& plan, const ExportRequest& e,
                                               bool accelerate, const std::string& problem) {
  const char* field = !e.save_plan.empty()          ? "save_plan"
                      : !e.export_deepspeed.empty() ? "export_deepspeed"
                      : accelerate                  ? "export_accelerate"
                                                    : "export_launch";
  const std::string why =
      std::string(field) == "save_plan"
          ? "the best layout (" + cost::describe(plan.best()->layout->layout) +
                ") cannot be saved as a plan: " + problem +
                (plan.data_parallel_searched
                     ? "; and no data-parallel plan fits"
                     : "; and the data-parallel strategies were not searched ({strategy} or "
                       "{tp} left them out)")
          : "describes a data-parallel plan, and only tensor x context x pipeline layouts fit";
  throw FieldError(field, why +
                              " ({export_megatron} or {export_torchtitan} writes the best); "
                              "nothing was written");
}

// The Plan file holding the best layout, or the note saying why it holds the best
// data-parallel plan instead.
void layout_plan_output(const UnifiedPlan& plan, const SavedLayout& layout, const std::string& path,
                        PlanOutputs& out) {
  if (layout.plan) {
    out.files.push_back({path, to_json(*layout.plan).dump(2) + "\n", "{save_plan}"});
    out.written.emplace_back(
        "plan (the best layout, " + cost::describe(plan.best()->layout->layout) + ")", path);
  } else if (!layout.problem.empty()) {
    out.notes.push_back("{save_plan}: the best layout cannot be saved as a plan: " +
                        layout.problem);
  }
}

// The data-parallel plan and the configuration DeepSpeed runs.
struct DataParallelPlans {
  Plan best;
  Plan deepspeed;
  std::string deepspeed_note;
};

// The data-parallel exports: DeepSpeed and Accelerate configs, the Plan file, launch lines.
// `accelerate` false: the Accelerate config describes a layout instead.
void export_data_parallel(const ExportRequest& e, bool accelerate, const DataParallelPlans& p,
                          std::int64_t zero_bucket_elements, PlanOutputs& out) {
  auto launch = e.launch;
  if (!launch.lr && out.schedule) launch.lr = out.schedule->scaled_lr;
  launch.zero_reduce_bucket_elements = zero_bucket_elements;
  if (!e.export_deepspeed.empty()) launch.ds_config = e.export_deepspeed;
  // Accelerate reads a DeepSpeed plan's config from a file: without export_deepspeed it is
  // written beside the Accelerate config, so the Accelerate file is complete on its own.
  std::string deepspeed_file = e.export_deepspeed;
  if (deepspeed_file.empty() && accelerate && uses_deepspeed(p.best)) {
    deepspeed_file = deepspeed_path_beside(e.export_accelerate);
    launch.ds_config = deepspeed_file;
  }
  if (!deepspeed_file.empty()) {
    const auto ds = deepspeed_config(p.deepspeed, launch);
    out.files.push_back({deepspeed_file, ds.config.dump(2) + "\n",
                         e.export_deepspeed.empty() ? "DeepSpeed config for {export_accelerate}"
                                                    : "{export_deepspeed}"});
    out.written.emplace_back("DeepSpeed config", deepspeed_file);
    if (!p.deepspeed_note.empty()) out.notes.push_back(p.deepspeed_note);
    out.notes.insert(out.notes.end(), ds.notes.begin(), ds.notes.end());
  }
  if (accelerate) {
    out.files.push_back(
        {e.export_accelerate, accelerate_config(p.best, launch), "{export_accelerate}"});
    out.written.emplace_back("Accelerate config", e.export_accelerate);
    const auto notes = accelerate_notes(p.best);
    out.notes.insert(out.notes.end(), notes.begin(), notes.end());
  }
  if (!e.save_plan.empty()) {
    out.files.push_back({e.save_plan, to_json(p.best).dump(2) + "\n", "{save_plan}"});
    out.written.emplace_back("plan", e.save_plan);
  }
  if (!e.export_launch) return;
  out.launch = {shape_comment(p.best)};
  const auto torchrun = torchrun_lines(p.best, launch);
  out.launch.insert(out.launch.end(), torchrun.begin(), torchrun.end());
  if (deepspeed_file.empty()) {
    out.launch.emplace_back(
        "# deepspeed: add --export-deepspeed FILE for the config its line needs");
    return;
  }
  const auto ds = deepspeed_lines(p.deepspeed, launch);
  out.launch.insert(out.launch.end(), ds.begin(), ds.end());
}

// The estimates and exports of the best data-parallel configuration, if there is one.
void data_parallel_outputs(const UnifiedPlan& plan, const PlanInputs& in, const ExportRequest& e,
                           bool accelerate, bool layout_saved, PlanOutputs& out) {
  const auto& result = plan.data_parallel;
  if (!result.best) return;
  const auto& best = *result.best;
  const CandidateEstimator estimator(in.model, in.topology, in.table, in.gpu, in.compute,
                                     in.overheads, in.request, in.comm);
  if (plan.best()->data_parallel) out.estimate = estimator(best);
  for (const auto& outcome : by_strategy(result)) {
    if (outcome.best) out.strategy_times[outcome.strategy] = estimator(*outcome.best).times;
  }
  const auto ds = deepspeed_choice(result, in.request.objective);
  const DataParallelPlans plans{plan_file(best, in.request, in.model, e.target),
                                plan_file(ds.candidate, in.request, in.model, e.target), ds.note};
  export_data_parallel(e, accelerate, plans, in.overheads.zero_reduce_bucket_elements, out);
  const bool data_parallel_exports =
      !e.save_plan.empty() || !e.export_deepspeed.empty() || accelerate || e.export_launch;
  if (data_parallel_exports) {
    if (const auto note = layout_beats_exports_note(plan, in.request.objective, !layout_saved))
      out.notes.push_back(*note);
  }
}

// The Megatron-LM and torchtitan exports: the best layout each framework runs.
void layout_outputs(const UnifiedPlan& plan, const PlanInputs& in, const ExportRequest& e,
                    PlanOutputs& out) {
  if (!e.export_megatron.empty()) {
    const auto* megatron = best_layout_of(plan, cost::Framework::megatron);
    if (!megatron) {
      throw FieldError("export_megatron",
                       "no Megatron-LM layout fits ({strategy} or {framework} may leave them "
                       "out); nothing was written");
    }
    out.files.push_back(
        {e.export_megatron, megatron_args_file(in.model, megatron->layout), "{export_megatron}"});
    out.megatron = megatron->layout;
  }
  if (!e.export_torchtitan.empty()) {
    const auto* torchtitan = best_layout_of(plan, cost::Framework::fsdp2);
    if (!torchtitan) {
      throw FieldError("export_torchtitan", "no FSDP2 layout fits; nothing was written");
    }
    out.files.push_back({e.export_torchtitan, torchtitan_config(in.model, torchtitan->layout),
                         "{export_torchtitan}"});
    out.torchtitan = torchtitan->layout;
  }
}

std::string signed_pct(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", fraction * 100.0);
  return text;
}

std::string gib_text(double bytes) {
  return one_decimal(bytes / double(1LL << 30));
}

}  // namespace

std::optional<std::string> fp8_gain_note(const UnifiedPlan& plan, const PlanInputs& in) {
  const auto* best = plan.best();
  if (best == nullptr || !best->layout || best->layout->layout.fp8 == Fp8Recipe::none) {
    return std::nullopt;
  }
  const auto& chosen = *best->layout;
  auto bf16 = chosen.layout;
  bf16.fp8 = Fp8Recipe::none;
  bf16.fp8_param_gather = false;  // no FP8 weights to keep
  cost::Model3D model(in.model, in.topology, in.table, in.gpu, in.compute, in.comm);
  const auto time = model.time(bf16);
  const auto mem = cost::memory_3d(in.model, bf16, in.overheads, false);
  const double gain = chosen.time.samples_per_s / time.samples_per_s - 1.0;
  std::string text = "FP8 (" + std::string(name_of(chosen.layout.fp8)) +
                     ") against the same layout in bf16: " + signed_pct(gain) + " samples/s";
  if (gain < 0) text += " (its casts cost more than its GEMMs save here)";
  const double usable = static_cast<double>(in.gpu.memory.value) * (1 - in.request.headroom);
  if (static_cast<double>(mem.total().value) > usable) {
    text += "; in bf16 that layout needs " + gib_text(static_cast<double>(mem.total().value)) +
            " GiB per GPU, over the " + gib_text(usable) + " usable";
  }
  return text + "; other bf16 layouts: plan without {fp8_recipe}";
}

std::optional<std::string> resolve_precisions(const GpuSpec& gpu, PlanRequest& r) {
  std::optional<std::string> note;
  if (r.precisions.empty()) {
    r.precisions = default_precisions(gpu);
    if (!(gpu.peak_flops.bf16 > 0)) {
      note = gpu.name + " has no bf16 tensor cores: searched fp16 and fp32";
    }
  }
  try {
    check_precisions(gpu, r.precisions);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    throw FieldError("precision", e.what());
  }
  return note;
}

PlanOutputs plan_outputs(const UnifiedPlan& plan, const PlanInputs& in, const ExportRequest& e) {
  PlanOutputs out;
  const auto* fsdp2_accelerate = accelerate_layout(plan, e);
  const bool accelerate = !e.export_accelerate.empty() && !fsdp2_accelerate;
  const auto layout = saved_layout(plan, in, e);
  auto dp_exports = e;  // what the data-parallel plan is written out as
  if (layout.plan) dp_exports.save_plan.clear();
  const bool data_parallel_exports =
      !dp_exports.save_plan.empty() || !e.export_deepspeed.empty() || accelerate || e.export_launch;
  if (!plan.data_parallel.best && plan.best() && data_parallel_exports) {
    refuse_data_parallel_exports(plan, dp_exports, accelerate, layout.problem);
  }
  if (plan.best() && (e.schedule.given() || e.schedule.base_lr)) {
    const auto& chosen = *plan.best();
    out.schedule = make_schedule(e.schedule, chosen.global_batch(),
                                 chosen.data_parallel ? chosen.data_parallel->grad_accum
                                                      : chosen.layout->layout.micro_batches,
                                 chosen.step_s());
  }
  data_parallel_outputs(plan, in, dp_exports, accelerate, layout.plan.has_value(), out);
  layout_plan_output(plan, layout, e.save_plan, out);
  if (const auto note = expert_layout_note(plan, in.request.objective)) out.notes.push_back(*note);
  if (plan.layouts && plan.layouts->exchange_unpriced > 0) {
    out.notes.push_back(std::to_string(plan.layouts->exchange_unpriced) +
                        " expert layouts were left out unpriced, the first because " +
                        plan.layouts->exchange_unpriced_why);
  }
  if (const auto note = recompute_note(plan, in.request.objective)) out.notes.push_back(*note);
  if (const auto note = idle_gpus_note(plan.data_parallel, in.request.global_batch);
      note && plan.best() && plan.best()->data_parallel) {
    out.notes.push_back(*note);
  }
  if (fsdp2_accelerate) {
    out.files.push_back(
        {e.export_accelerate,
         accelerate_fsdp2_config(in.model, fsdp2_accelerate->layout,
                                 in.topology.node().launch_gpus_per_host(), e.launch),
         "{export_accelerate}"});
    out.written.emplace_back("Accelerate config (FSDP2)", e.export_accelerate);
  }
  if (const auto note = fp8_gain_note(plan, in)) out.notes.push_back(*note);
  if (const auto* best = plan.best(); best && best->layout && in.model.transformer &&
                                      best->layout->layout.framework == cost::Framework::megatron) {
    if (const auto why = megatron_model_problem(*in.model.transformer)) {
      out.notes.push_back(*why +
                          ": the chosen Megatron-LM layout is priced as Megatron-Core runs "
                          "such a model (through a model provider, as Megatron Bridge "
                          "does), and {export_megatron} refuses it");
    }
  }
  layout_outputs(plan, in, e, out);
  return out;
}

}  // namespace dtplan::planner
