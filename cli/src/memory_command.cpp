// `dtplan memory`: per-GPU memory of one strategy, all strategies side by side, or a tensor x
// context x pipeline x data layout's heaviest stage.
#include <memory>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/cost/layout_text.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/planner/layout_json.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "layout_options.hpp"
#include "layout_report.hpp"
#include "memory_report.hpp"

namespace dtplan::cli {

namespace {

struct MemoryOptions {
  ModelOptions model;
  TrainingOptions training;
  std::string strategy = "all";
  LayoutOptions layout;  // given: a tensor x context x pipeline layout's memory
  std::int64_t grad_accum = 1;
  bool sync_every_micro_step = false;
  bool json = false;
};

cost::MemoryEstimate estimate_one(const ModelDesc& m, TrainingConfig c, Strategy s,
                                  const cost::OverheadConstants& k,
                                  const std::optional<GpuSpec>& gpu, Bytes host_memory) {
  c.strategy = s;
  auto e = with_flags(cost::estimate_memory(m, c, k));
  if (gpu) e.fit = cost::check_fit(e, *gpu, host_memory);
  return e;
}

// --tp/--pp/--cp/... or --strategy megatron|fsdp2: the heaviest stage's memory of a layout
// (dp = --gpus / (tp x cp x pp); --grad-accum micro-batches per pipeline per step).
int run_memory_layout(const MemoryOptions& o, const RunContext& ctx) {
  const auto data = data_dir_of(o.model);
  const ModelDesc model = resolve_model(o.model);
  TrainingConfig config = training_config(o.training);
  check_deepspeed_version(o.training,
                          o.strategy == "all" || o.strategy.empty() ? "megatron" : o.strategy);
  require_positive(o.grad_accum, "--grad-accum", 1'000'000);
  sequence_length(model, config.seq_len);
  // No topology here: host memory per node is --host-memory, else the documented default.
  const Bytes host_capacity = host_memory_of(o.training.host_memory).value_or(kDefaultHostMemory);
  const auto l =
      layout_of(o.layout, o.strategy == "all" ? "" : o.strategy, model, config, o.grad_accum);
  const auto gpu = gpu_of(o.training, data);
  if (gpu && l.fp8 != Fp8Recipe::none && !(gpu->peak_flops.fp8 > 0)) {
    throw Error("--fp8-recipe " + std::string(name_of(l.fp8)) + ": " + gpu->name +
                " has no FP8 tensor cores");
  }
  const auto mem = cost::memory_3d(model, l, overheads_of(o.training, data));
  const auto host = layout_host(mem, std::min(config.dp_size, config.gpus_per_node), host_capacity);
  if (o.json) {
    auto j = report_preamble("memory", ctx.args);
    j["model"] = model_json(model);
    planner::Candidate3D c{l, mem, {}, 0};
    auto layout = planner::to_json(c);
    for (const auto* timing : {"step_time_s", "samples_per_s", "tokens_per_s", "mfu", "time"})
      layout.erase(timing);  // memory only: nothing was timed
    layout["params_per_gpu"] = mem.params_per_gpu;
    layout["details"] = planner::memory_details_json(mem);
    add_explanations(layout, mem);
    layout["global_batch"] = l.global_batch();
    layout["seq_len"] = l.seq_len;
    if (gpu) {
      layout["fits"] = mem.total().value <= gpu->memory.value;
      layout["within_plan_headroom"] = within_plan_headroom(mem.total(), gpu->memory);
    }
    add_host_json(layout, host);
    j["parallel3d"] = layout;
    ctx.out << report_text(j);
    return 0;
  }
  ctx.out << "dtplan memory: " << model.name << " on " << config.dp_size << " GPUs"
          << (gpu ? " x " + gpu->name : std::string()) << ", " << cost::describe(l) << " (sequence "
          << l.seq_len << ")\n\n";
  print_layout_memory(ctx.out, l, mem, gpu, "  ");
  print_layout_host(ctx.out, host, "  ");
  return 0;
}

int run_memory(const MemoryOptions& o, const RunContext& ctx) {
  if (wants_layout(o.layout, o.strategy)) return run_memory_layout(o, ctx);
  const auto data = data_dir_of(o.model);
  const ModelDesc model = resolve_model(o.model);
  TrainingConfig config = training_config(o.training);
  check_deepspeed_version(o.training, o.strategy);
  require_positive(o.grad_accum, "--grad-accum", 1'000'000);
  config.grad_accum = o.grad_accum;
  sequence_length(model, config.seq_len);
  config.no_sync = !o.sync_every_micro_step;
  const auto overheads = overheads_of(o.training, data);
  const auto gpu = gpu_of(o.training, data);
  // No topology here: host memory per node is --host-memory, else the documented default.
  const auto given_host = host_memory_of(o.training.host_memory);
  const Bytes host = given_host.value_or(kDefaultHostMemory);
  const MemoryReportContext report{model, config, gpu, host, !given_host};

  nlohmann::json j = report_preamble("memory", ctx.args);
  j["model"] = model_json(model);
  j["training"] = training_json(config);
  j["overheads"] = overheads_json(overheads);

  if (o.strategy != "all") {
    const auto e = estimate_one(model, config, parse_strategy(o.strategy), overheads, gpu, host);
    if (!o.json) {
      print_memory_detail(ctx.out, report, e);
      return 0;
    }
    j.update(cost::to_json(e));
    ctx.out << report_text(j);
    return 0;
  }

  std::vector<cost::MemoryEstimate> estimates;
  std::vector<SkippedStrategy> skipped;
  for (const auto& row : kStrategies) {
    try {
      estimates.push_back(estimate_one(model, config, row.value, overheads, gpu, host));
    } catch (const Error& e) {
      skipped.push_back({row.value, rendered(e, flag_of)});
    }
  }
  if (estimates.empty()) throw Error("no strategy applies: " + skipped.front().reason);
  if (!o.json) {
    print_memory_comparison(ctx.out, report, estimates, skipped);
    return 0;
  }
  j["params"] = model.params;
  j["estimates"] = nlohmann::json::array();
  for (const auto& e : estimates)
    j["estimates"].push_back(cost::to_json(e));
  j["skipped"] = nlohmann::json::array();
  for (const auto& s : skipped) {
    j["skipped"].push_back({{"strategy", name_of(s.strategy)}, {"reason", s.reason}});
  }
  ctx.out << report_text(j);
  return 0;
}

}  // namespace

Command register_memory_command(CLI::App& app) {
  auto options = std::make_shared<MemoryOptions>();
  auto* cmd = app.add_subcommand("memory",
                                 "Per-GPU peak memory of training a model under DDP, ZeRO or FSDP");
  add_model_options(*cmd, options->model);
  add_training_options(*cmd, options->training);
  cmd->add_option("--strategy", options->strategy,
                  "one of " + join(strategy_names(), "|") +
                      ", or all to compare them, or a layout framework: megatron|fsdp2")
      ->capture_default_str();
  add_layout_options(*cmd, options->layout);
  cmd->add_option("--grad-accum", options->grad_accum,
                  "micro-steps per optimizer step (FSDP's no_sync then holds full gradients)")
      ->capture_default_str();
  cmd->add_flag("--sync-every-micro-step", options->sync_every_micro_step,
                "synchronise gradients every micro-step (no no_sync)");
  cmd->add_flag("--json", options->json, "machine-readable output");
  return {"memory", [options](const RunContext& ctx) { return run_memory(*options, ctx); }};
}

}  // namespace dtplan::cli
