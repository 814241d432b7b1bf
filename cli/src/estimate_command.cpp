// `dtplan estimate`: the full prediction for one configuration: memory, compute,
// communication, the step's composition and timeline, throughput, MFU and HFU.
#include <memory>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/cost/layout_text.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/cost/trace.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/model/gpu_topology.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/planner/export_accelerate_fsdp2.hpp"
#include "dtplan/planner/export_megatron.hpp"
#include "dtplan/planner/export_torchtitan.hpp"
#include "dtplan/planner/layout_json.hpp"
#include "dtplan/planner/published_accuracy.hpp"
#include "error_band_report.hpp"
#include "estimate_report.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "layout_options.hpp"
#include "layout_report.hpp"
#include "memory_report.hpp"

namespace dtplan::cli {

namespace {

struct EstimateOptions {
  ModelOptions model;
  TrainingOptions training;
  TopologyOptions topology;
  ComputeOptions compute;
  std::string strategy;  // empty: ddp, or megatron when layout flags are given
  std::optional<std::int64_t> grad_accum;
  std::optional<std::int64_t> global_batch;
  double straggler = 1.0;
  std::string slowest_gpu;
  bool sync_every_micro_step = false;
  bool json = false;
  LayoutOptions layout;         // given: a tensor x context x pipeline layout
  std::string megatron_file;    // --export-megatron
  std::string trace_file;       // --trace
  std::string torchtitan_file;  // --export-torchtitan
  std::string accelerate_file;  // --export-accelerate (an FSDP2 layout)
  std::string master_addr;      // for its multi-node rendezvous
  const CLI::Option* gpus_option = nullptr;
  const CLI::Option* gpus_per_node_option = nullptr;
};

// Accumulation from --grad-accum or --global-batch (which must be reachable exactly).
std::int64_t micro_steps_of(const EstimateOptions& o, const TrainingConfig& c) {
  if (o.grad_accum && o.global_batch) {
    throw Error("--grad-accum and --global-batch: give one of them");
  }
  if (o.grad_accum) {
    require_positive(*o.grad_accum, "--grad-accum", 1'000'000);
    return *o.grad_accum;
  }
  if (!o.global_batch) return 1;
  const auto per_step = c.micro_batch * c.dp_size;
  if (*o.global_batch < 1) {
    throw Error("--global-batch " + std::to_string(*o.global_batch) +
                ": must be a positive number of samples");
  }
  if (*o.global_batch % per_step != 0) {
    throw Error("--global-batch " + std::to_string(*o.global_batch) +
                ": not a multiple of micro-batch " + std::to_string(c.micro_batch) + " x " +
                std::to_string(c.dp_size) + " data-parallel replicas = " +
                std::to_string(per_step) + " (dtplan plan finds a shape that reaches it)");
  }
  return *o.global_batch / per_step;
}

// The straggler: a fixed slowdown, or a slower GPU model in the set (whichever is slower).
double straggler_of(const EstimateOptions& o, const ModelDesc& m, const TrainingConfig& c,
                    const GpuSpec& gpu, const cost::ComputeConstants& k,
                    const std::filesystem::path& data) {
  double slowdown = o.straggler;
  if (!(slowdown >= 1.0) || slowdown > 100.0) {
    throw Error(
        "--straggler: a slowdown factor from 1 to 100 (1.3: the slowest rank is 30% "
        "slower)");
  }
  if (o.slowest_gpu.empty()) return slowdown;
  const auto slow = find_gpu(o.slowest_gpu, data, "--slowest-gpu");
  const double ratio = cost::compute_slowdown(m, c, gpu, slow, k);
  if (ratio < 1.0) {
    throw Error("--slowest-gpu " + slow.name + ": it computes faster than " + gpu.name +
                ", so it would not hold the others back");
  }
  return std::max(slowdown, ratio);
}

TrainingConfig config_of(const EstimateOptions& o, const Topology& t) {
  auto training = o.training;
  if (o.gpus_option->count() == 0) training.gpus = t.gpu_count();
  if (o.gpus_per_node_option->count() > 0 && *training.gpus_per_node != t.gpus_per_node()) {
    throw Error("--gpus-per-node " + std::to_string(*training.gpus_per_node) + ": topology '" +
                t.node().name + "' has " + std::to_string(t.gpus_per_node()) + " per node");
  }
  training.gpus_per_node = t.gpus_per_node();
  if (training.gpus > t.gpu_count()) {
    throw Error("--gpus " + std::to_string(training.gpus) + ": the topology has " +
                std::to_string(t.gpu_count()) + " GPUs (add --nodes)");
  }
  auto c = training_config(training);
  c.gpus_per_host = t.node().gpus_per_host;
  if (!is_layout_framework(o.strategy)) {
    try {
      c.strategy = parse_strategy(o.strategy.empty() ? "ddp" : o.strategy);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + "; or a layout framework: megatron, fsdp2");
    }
  }
  return c;
}

// --trace: the predicted timeline as a Chrome trace (Perfetto, chrome://tracing).
void write_trace(const EstimateOptions& o, const std::string& trace) {
  if (!o.trace_file.empty()) write_file_atomically(o.trace_file, trace, "--trace");
}

// The topology, used in part when --gpus-per-node names fewer GPUs than its nodes have.
TopologyOptions topology_options(const EstimateOptions& o) {
  auto t = o.topology;
  if (o.gpus_per_node_option->count() > 0) t.gpus_per_node = o.training.gpus_per_node;
  return t;
}

bool is_3d(const EstimateOptions& o) {
  return wants_layout(o.layout, o.strategy) || !o.megatron_file.empty() ||
         !o.torchtitan_file.empty() || !o.accelerate_file.empty();
}

// layout_dp, saying where the GPU count came from when --gpus was not given: every GPU of
// the topology (--nodes x its GPUs per node).
std::int64_t layout_dp_of(const EstimateOptions& o, std::int64_t gpus) {
  try {
    return layout_dp(o.layout, gpus);
  } catch (const FieldError& e) {
    if (e.field() != "gpus" || o.gpus_option->count() > 0) throw;
    throw FieldError("gpus", "not given, so every GPU of the topology: " + e.problem() +
                                 "; give {gpus} or other sizes");
  }
}

// --tp/--pp: a Megatron-style layout over --gpus (dp = GPUs / (tp x pp)).
int run_estimate_3d(const EstimateOptions& o, const RunContext& ctx) {
  const auto data = data_dir_of(o.model);
  const auto model = resolve_model(o.model);
  const auto loaded = load_topology(topology_options(o), data);
  const auto& t = loaded.topology;
  const auto c = config_of(o, t);
  check_deepspeed_version(o.training, o.strategy.empty() ? "megatron" : o.strategy);
  auto seq = c;
  sequence_length(model, seq.seq_len);
  const auto host_capacity =
      host_memory_of(o.training.host_memory).value_or(t.node().host_memory_or_default());
  auto per_dp = c;
  per_dp.dp_size = layout_dp_of(o, c.dp_size);
  const auto l = layout_of(o.layout, o.strategy, model, seq, micro_steps_of(o, per_dp));
  const auto gpu = find_gpu(o.training.gpu, data, "--gpu");
  check_gpu_on_topology(gpu, t);
  const auto k = compute_constants_of(o.compute, data);
  if (!o.megatron_file.empty()) check_output_path(o.megatron_file, "--export-megatron");
  if (!o.torchtitan_file.empty()) check_output_path(o.torchtitan_file, "--export-torchtitan");
  const auto megatron =
      o.megatron_file.empty() ? std::string() : planner::megatron_args_file(model, l);
  const auto torchtitan =
      o.torchtitan_file.empty() ? std::string() : planner::torchtitan_config(model, l);
  if (!o.accelerate_file.empty()) check_output_path(o.accelerate_file, "--export-accelerate");
  planner::LaunchOptions launch;
  launch.master_addr = o.master_addr;
  const auto accelerate =
      o.accelerate_file.empty()
          ? std::string()
          : planner::accelerate_fsdp2_config(model, l, t.node().launch_gpus_per_host(), launch);
  const auto mem = cost::memory_3d(model, l, overheads_of(o.training, data));
  const auto tm = cost::time_3d(model, l, t, loaded.table, gpu, k);
  const auto host =
      layout_host(mem, std::min<std::int64_t>(l.gpus(), t.gpus_per_node()), host_capacity);
  if (!megatron.empty()) write_file_atomically(o.megatron_file, megatron, "--export-megatron");
  if (!torchtitan.empty())
    write_file_atomically(o.torchtitan_file, torchtitan, "--export-torchtitan");
  if (!accelerate.empty())
    write_file_atomically(o.accelerate_file, accelerate, "--export-accelerate");
  write_trace(o, cost::chrome_trace(cost::timeline_3d(l, tm),
                                    "dtplan estimate: " + model.name + ", " + cost::describe(l)));
  if (o.json) {
    auto j = report_preamble("estimate", ctx.args);
    j["model"] = model_json(model);
    j["gpu"] = gpu.name;
    j["parallel3d"] = planner::to_json(planner::Candidate3D{l, mem, tm, 0});
    j["parallel3d"]["global_batch"] = l.global_batch();
    j["parallel3d"]["seq_len"] = l.seq_len;
    j["parallel3d"]["params_per_gpu"] = mem.params_per_gpu;
    j["parallel3d"]["details"] = planner::memory_details_json(mem);
    add_explanations(j["parallel3d"], mem);
    j["parallel3d"]["fits"] = mem.total().value <= gpu.memory.value;
    j["parallel3d"]["within_plan_headroom"] = within_plan_headroom(mem.total(), gpu.memory);
    add_host_json(j["parallel3d"], host);
    j["error_band"] = band_json(band_of(data, cost::name_of(l.framework), gpu));
    ctx.out << report_text(j);
    return 0;
  }
  ctx.out << "dtplan estimate: " << model.name << " on " << c.dp_size << " x " << gpu.name << ", "
          << cost::describe(l) << " (global batch " << l.global_batch() << ", sequence "
          << l.seq_len << ")\n\n";
  print_layout_figures(ctx.out, {l, mem, tm, 0}, gpu, "  ", &host);
  print_band(ctx.out, band_of(data, cost::name_of(l.framework), gpu));
  return 0;
}

int run_estimate(const EstimateOptions& o, const RunContext& ctx) {
  if (!o.trace_file.empty()) check_output_path(o.trace_file, "--trace");
  if (is_3d(o)) return run_estimate_3d(o, ctx);
  const auto data = data_dir_of(o.model);
  const auto model = resolve_model(o.model);
  const auto loaded = load_topology(topology_options(o), data);
  const auto& t = loaded.topology;
  auto c = config_of(o, t);
  check_deepspeed_version(o.training, name_of(c.strategy));
  sequence_length(model, c.seq_len);
  const auto gpu = find_gpu(o.training.gpu, data, "--gpu");
  check_gpu_on_topology(gpu, t);
  const auto k = compute_constants_of(o.compute, data);
  const auto overheads = overheads_of(o.training, data);
  cost::StepOptions options;
  options.micro_steps = micro_steps_of(o, c);
  options.no_sync = !o.sync_every_micro_step;
  options.straggler_slowdown = straggler_of(o, model, c, gpu, k, data);
  c.grad_accum = options.micro_steps;
  c.no_sync = options.no_sync;
  const auto context = std::make_shared<cost::CommContext>(t);
  cost::CommModel all(t, loaded.table, c.dp_size, context);
  cost::CommModel node(t, loaded.table, std::min(c.dp_size, t.gpus_per_node()), context);
  auto e = cost::estimate_step(model, c, options, gpu, k, overheads, {all, node});
  e.memory = with_flags(std::move(e.memory));
  const auto host = host_memory_of(o.training.host_memory);
  e.memory.fit = cost::check_fit(e.memory, gpu, host.value_or(t.node().host_memory_or_default()));
  write_trace(o, cost::chrome_trace(e.timeline, "dtplan estimate: " + model.name + ", " +
                                                    std::string(name_of(c.strategy)) + " on " +
                                                    std::to_string(c.dp_size) + " GPUs"));
  if (!o.json) {
    print_step_estimate(ctx.out, {model, c, t, gpu, options}, e);
    print_band(ctx.out, band_of(data, name_of(c.strategy), gpu));
    return 0;
  }
  nlohmann::json j = report_preamble("estimate", ctx.args);
  j["model"] = model_json(model);
  j["training"] = training_json(c);
  j["grad_accum"] = options.micro_steps;
  j["no_sync"] = options.no_sync;
  j["straggler_slowdown"] = options.straggler_slowdown;
  j["gpu"] = gpu.name;
  j["topology"] = {{"name", t.node().name}, {"nodes", t.nodes()}, {"gpus", c.dp_size}};
  j["compute_constants"] = cost::to_json(k);
  j.update(step_estimate_json(e));
  j["error_band"] = band_json(band_of(data, name_of(c.strategy), gpu));
  ctx.out << report_text(j);
  return 0;
}

}  // namespace

Command register_estimate_command(CLI::App& app) {
  auto o = std::make_shared<EstimateOptions>();
  auto* cmd = app.add_subcommand(
      "estimate", "Step time, throughput, MFU, memory and timeline of one configuration");
  add_model_options(*cmd, o->model);
  add_topology_options(*cmd, o->topology, true, false);
  add_training_options(*cmd, o->training);
  add_compute_options(*cmd, o->compute);
  o->gpus_option = cmd->get_option("--gpus");
  o->gpus_per_node_option = cmd->get_option("--gpus-per-node");
  cmd->get_option("--gpus-per-node")
      ->description(
          "GPUs used in each node (default: all of the topology's); fewer takes the node's "
          "first hosts, e.g. 64 of an NVL72 rack's 72 GPUs (16 of its 18 trays)");
  cmd->get_option("--gpus")
      ->description("data-parallel GPUs (default: all of the topology)")
      ->default_str("all");
  cmd->get_option("--gpu")->required();
  cmd->add_option("--strategy", o->strategy,
                  join(strategy_names(), "|") +
                      ", or a layout framework: megatron|fsdp2 (default: ddp; megatron with "
                      "--tp/--pp/--cp/...)")
      ->default_str("ddp");
  cmd->add_option("--grad-accum", o->grad_accum, "micro-steps per optimizer step (default 1)");
  cmd->add_option("--global-batch", o->global_batch,
                  "samples per optimizer step; sets the accumulation");
  cmd->add_option("--straggler", o->straggler,
                  "the slowest rank's compute slowdown, e.g. 1.3 for a GPU shared with "
                  "another job")
      ->capture_default_str()
      ->check(number_check({1.0, 100.0, false}));
  cmd->add_option("--slowest-gpu", o->slowest_gpu,
                  "a slower GPU model in the set (its compute sets the pace)");
  cmd->add_flag("--sync-every-micro-step", o->sync_every_micro_step,
                "synchronise gradients every micro-step (no no_sync)");
  add_layout_options(*cmd, o->layout);
  cmd->add_option("--export-torchtitan", o->torchtitan_file,
                  "write an FSDP2 layout as a torchtitan job config (TOML) to FILE");
  cmd->add_option("--export-accelerate", o->accelerate_file,
                  "write an FSDP2 layout (pp 1) as an Accelerate config (YAML) to FILE");
  cmd->add_option("--master-addr", o->master_addr,
                  "node 0's address in a multi-node --export-accelerate config");
  cmd->add_option("--export-megatron", o->megatron_file,
                  "write the layout as Megatron-LM arguments (a bash array) to FILE");
  cmd->add_option("--trace", o->trace_file,
                  "write the predicted step timeline as a Chrome trace (open in Perfetto)");
  cmd->add_flag("--json", o->json, "machine-readable output");
  return {"estimate", [o](const RunContext& ctx) { return run_estimate(*o, ctx); }};
}

}  // namespace dtplan::cli
