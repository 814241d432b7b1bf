// `dtplan plan`: search for the configuration that best reaches a global batch on a cluster;
// report it, the runners-up and why the rest lost; write DeepSpeed, Accelerate and Plan files
// and print launch lines.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/cost/layout_text.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/model/gpu_topology.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/planner/exports.hpp"
#include "dtplan/planner/plan_outputs.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/schedule.hpp"
#include "dtplan/planner/search3d.hpp"
#include "dtplan/planner/unified_plan.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "layout_options.hpp"
#include "plan_report.hpp"
#include "progress.hpp"

namespace dtplan::cli {

namespace {

struct PlanOptions {
  ModelOptions model;
  TopologyOptions topology;
  ComputeOptions compute;
  std::string gpu;
  std::optional<std::int64_t> max_gpus;
  std::int64_t global_batch = 0;
  std::optional<std::int64_t> seq_len;
  std::vector<std::string> strategies, precisions, checkpointings, offloads;
  std::vector<std::int64_t> micro_batches;
  std::vector<std::int64_t> tps, pps, cps, interleaves;  // the tensor x pipeline search
  std::vector<std::int64_t> eps, etps;                   // a mixture of experts
  std::string fp8_recipe = "none";                       // FP8 Linear GEMMs (layouts)
  std::vector<std::string> cp_comms;
  std::vector<std::string> frameworks;  // megatron, fsdp2
  std::vector<std::string> schedules;
  std::vector<std::string> sequence_parallel;    // on, off
  std::vector<std::string> recompute_modules;    // selective's module sets, one per flag
  bool overlap_ep_comm = false, deepep = false;  // where the layouts run them
  bool overlap_grad_reduce = false, overlap_param_gather = false;  // Megatron-LM layouts
  std::int64_t ddp_bucket_size = 0;                                // with the overlap; 0: its own
  bool grad_reduce_in_bf16 = false;                                // Megatron-LM layouts in bf16
  bool fp8_param_gather = false;                                   // Megatron-LM layouts in FP8
  bool tp_comm_overlap = false;  // Megatron-LM layouts with sequence parallelism
  std::string optimizer = "adamw";
  std::string optimizer_impl = "framework";
  std::string layer_kernels = "framework";
  std::string zero_grad = "set-to-none";
  std::string attention = "flash";
  std::string attention_kernel = "framework";
  std::string deepspeed_version;  // empty: a current release
  std::string objective = "throughput";
  double headroom = 0.10;
  std::string host_memory;  // per node; empty: the topology's
  double price = 0;
  double max_hours = 0;
  std::int64_t top = 5;
  std::int64_t rejected_shown = 5;
  std::int64_t threads = 0;
  bool all_rejected = false;
  std::string sync = "both";
  planner::ScheduleRequest schedule;
  std::optional<double> base_lr;
  std::optional<std::int64_t> steps;
  std::string deepspeed_file, accelerate_file, plan_file;
  std::string megatron_file;    // the best Megatron-LM layout
  std::string torchtitan_file;  // the best FSDP2 layout
  bool launch = false;
  bool exact_batch = false;
  planner::LaunchOptions launch_options;
  std::optional<double> lr;
  std::vector<std::string> overhead_overrides;
  bool json = false;
};

template <class E>
std::vector<E> parse_all(std::string_view flag, const std::vector<std::string>& names,
                         E (*parse)(std::string_view)) {
  std::vector<E> out;
  for (const auto& n : names) {
    const auto v = parse_flag(flag, n, parse);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

planner::Sync parse_sync(const std::string& text) {
  if (text == "both") return planner::Sync::both;
  if (text == "no-sync") return planner::Sync::no_sync;
  if (text == "every-micro-step") return planner::Sync::every_micro_step;
  throw Error(unknown_name_message("--sync mode", text, {"both", "no-sync", "every-micro-step"}));
}

planner::PlanRequest request_of(const PlanOptions& o) {
  planner::PlanRequest r;
  require_positive(o.global_batch, "--global-batch");
  r.global_batch = o.global_batch;
  if (o.seq_len) require_positive(*o.seq_len, "--seq-len");
  r.seq_len = o.seq_len.value_or(0);
  if (o.max_gpus) require_positive(*o.max_gpus, "--gpus", 1'000'000);
  r.max_gpus = o.max_gpus.value_or(0);
  // fp8 is bf16 with FP8 GEMMs (layout_request sets the recipe).
  auto precisions = o.precisions;
  std::replace(precisions.begin(), precisions.end(), std::string("fp8"), std::string("bf16"));
  try {
    r.precisions = parse_all("--precision", precisions, parse_precision);
  } catch (const Error& e) {  // plan also takes fp8
    throw Error(std::string(e.what()) + "; and for the layouts fp8 (bf16 with FP8 GEMMs)");
  }
  r.checkpointing = parse_all("--checkpointing", o.checkpointings, parse_checkpointing);
  r.offloads = parse_all("--offload", o.offloads, parse_offload);
  for (const auto mb : o.micro_batches) {
    if (mb < 1) throw Error("--micro-batch " + std::to_string(mb) + ": must be positive");
    // global batch = micro-batch x accumulation x data-parallel GPUs, each at least 1.
    if (mb > o.global_batch) {
      throw Error("--micro-batch " + std::to_string(mb) + " exceeds --global-batch " +
                  std::to_string(o.global_batch) +
                  ": the global batch is micro-batch x accumulation x GPUs");
    }
  }
  r.micro_batches = o.micro_batches;
  r.optimizer = parse_flag("--optimizer", o.optimizer, parse_optimizer);
  r.optimizer_impl = parse_flag("--optimizer-impl", o.optimizer_impl, parse_optimizer_impl);
  r.layer_kernels = parse_flag("--layer-kernels", o.layer_kernels, parse_layer_kernels);
  r.zero_grad = parse_flag("--zero-grad", o.zero_grad, parse_zero_grad);
  r.attention = parse_flag("--attention", o.attention, parse_attention);
  r.attention_kernel = attention_kernel_of(o.attention_kernel, r.attention);
  if (!o.deepspeed_version.empty()) {
    r.zero3_gathers =
        parse_flag("--deepspeed-version", o.deepspeed_version, zero3_gathers_of_deepspeed);
  }
  r.objective = parse_flag("--objective", o.objective, planner::parse_objective);
  r.headroom = o.headroom;
  r.host_memory = host_memory_of(o.host_memory);
  r.price_per_gpu_hour = o.price;
  if (o.rejected_shown < 0) throw Error("--show-rejected: must be 0 or more");
  if (o.threads < 0) throw Error("--threads: must be 0 (the host's hardware threads) or more");
  if (o.steps && *o.steps < 1) throw Error("--steps: must be a positive integer");
  if (o.top < 1 || o.top > 1000) throw Error("--top: a positive integer up to 1000");
  r.top_k = o.top;
  r.sync = parse_sync(o.sync);
  r.exact_batch = o.exact_batch;
  r.steps = o.steps.value_or(0);
  r.samples = static_cast<double>(o.schedule.dataset_size) * o.schedule.epochs;
  r.max_run_s = o.max_hours * 3600.0;
  return r;
}

planner::LayoutRequest layout_request(const PlanOptions& o, planner::PlanRequest r) {
  planner::LayoutRequest x;
  const std::array<std::pair<const char*, const std::vector<std::int64_t>*>, 6> sizes{
      {{"--tp", &o.tps},
       {"--pp", &o.pps},
       {"--cp", &o.cps},
       {"--interleave", &o.interleaves},
       {"--ep", &o.eps},
       {"--etp", &o.etps}}};
  for (const auto& [flag, list] : sizes) {
    for (auto v : *list) {
      if (v < 1) throw Error(std::string(flag) + " " + std::to_string(v) + ": sizes are positive");
    }
  }
  r.strategies.clear();
  auto add_framework = [&x](cost::Framework f) {
    if (std::find(x.frameworks.begin(), x.frameworks.end(), f) == x.frameworks.end())
      x.frameworks.push_back(f);
  };
  for (const auto& name : o.strategies) {
    if (name == "megatron" || name == "fsdp2") {
      add_framework(cost::parse_framework(name));
      continue;
    }
    Strategy s = Strategy::ddp;
    try {
      s = parse_strategy(name);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + "; or a layout framework: megatron, fsdp2");
    }
    if (std::find(r.strategies.begin(), r.strategies.end(), s) == r.strategies.end())
      r.strategies.push_back(s);
  }
  x.strategies_named = !o.strategies.empty();
  for (const auto& name : o.frameworks)
    add_framework(cost::parse_framework(name));
  if (!x.strategies_named && !o.frameworks.empty()) x.strategies_named = true;
  // The report lists each reason's --show-rejected nearest; --all-rejected, every one.
  r.rejected_kept = o.all_rejected ? -1 : o.rejected_shown;
  r.threads = o.threads;
  x.plan = std::move(r);
  x.tps = o.tps;
  x.pps = o.pps;
  x.cps = o.cps;
  x.interleaves = o.interleaves;
  x.eps = o.eps;
  x.etps = o.etps;
  x.fp8 = parse_flag("--fp8-recipe", o.fp8_recipe, parse_fp8_recipe);
  const bool fp8 = std::find(o.precisions.begin(), o.precisions.end(), "fp8") != o.precisions.end();
  if (fp8 && x.fp8 == Fp8Recipe::none) x.fp8 = Fp8Recipe::delayed;  // Transformer Engine's default
  for (const auto& name : o.cp_comms)
    x.cp_comms.push_back(cost::parse_cp_comm(name));
  for (const auto& name : o.schedules)
    x.schedules.push_back(cost::parse_schedule(name));
  for (const auto& v : o.sequence_parallel) {
    if (v != "on" && v != "off") throw Error("--sp " + v + ": expected on, off or on,off");
    x.sequence_parallel.push_back(v == "on");
  }
  const auto& modes = x.plan.checkpointing;
  if (!o.recompute_modules.empty() && !modes.empty() &&
      std::find(modes.begin(), modes.end(), Checkpointing::selective) == modes.end())
    throw Error("--recompute-modules needs selective among --checkpointing");
  x.overlap_ep_comm = o.overlap_ep_comm;
  x.deepep = o.deepep;
  x.overlap_grad_reduce = o.overlap_grad_reduce || o.overlap_param_gather;
  x.overlap_param_gather = o.overlap_param_gather;
  x.ddp_bucket_size = o.ddp_bucket_size;
  x.grad_reduce_in_bf16 = o.grad_reduce_in_bf16;
  x.fp8_param_gather = o.fp8_param_gather;
  x.tp_comm_overlap = o.tp_comm_overlap;
  planner::check_framework_flags(x);  // before the search's set-up, as plan_layouts does
  for (const auto& set : o.recompute_modules)
    x.recompute_modules.push_back(parse_flag("--recompute-modules", set, parse_recompute_modules));
  return x;
}

// FP8 is modelled for the layouts only, so an FP8 search has no data-parallel plan for the
// exports that describe one: refused before the search, not after it.
void check_fp8_exports(const PlanOptions& o) {
  const bool fp8 = o.fp8_recipe != "none" ||
                   std::find(o.precisions.begin(), o.precisions.end(), "fp8") != o.precisions.end();
  if (!fp8) return;
  const char* flag = !o.plan_file.empty()        ? "--save-plan"
                     : !o.deepspeed_file.empty() ? "--export-deepspeed"
                     : o.launch                  ? "--export-launch"
                                                 : nullptr;
  if (flag == nullptr) return;
  if (flag == std::string("--save-plan")) {
    throw Error(
        "--save-plan: dtplan-run has no FP8 GEMMs, and FP8 is planned for layouts only, so an "
        "FP8 search has no plan dtplan run executes; --export-megatron or --export-torchtitan "
        "writes the best layout");
  }
  throw Error(std::string(flag) +
              ": FP8 is planned for Megatron-LM and torchtitan layouts only, and " + flag +
              " describes a data-parallel plan; --export-megatron or --export-torchtitan "
              "writes the best layout");
}

// The exports asked for, as the library names them.
planner::ExportRequest export_request(const PlanOptions& o, const Topology& t, const GpuSpec& gpu) {
  planner::ExportRequest e;
  e.save_plan = o.plan_file;
  e.export_deepspeed = o.deepspeed_file;
  e.export_accelerate = o.accelerate_file;
  e.export_megatron = o.megatron_file;
  e.export_torchtitan = o.torchtitan_file;
  e.export_launch = o.launch;
  e.launch = o.launch_options;
  e.launch.lr = o.lr;
  e.launch.gpus_per_host = t.node().gpus_per_host;
  e.schedule = o.schedule;
  e.schedule.steps = o.steps.value_or(0);
  e.schedule.base_lr = o.base_lr;
  e.target = {o.model.model, o.topology.topology, t.nodes(), t.gpus_per_node(), gpu.name};
  return e;
}

PlanExtras extras_of(planner::PlanOutputs&& out, std::vector<std::string> notes) {
  PlanExtras x;
  x.estimate = std::move(out.estimate);
  x.schedule = out.schedule;
  x.written = std::move(out.written);
  x.launch = std::move(out.launch);
  x.notes = std::move(notes);
  for (const auto& n : out.notes)
    x.notes.push_back(with_flags(n));
  x.strategy_times = std::move(out.strategy_times);
  return x;
}

int run_plan(const PlanOptions& o, const RunContext& ctx) {
  if (o.all_rejected && !o.json) {
    throw Error(
        "--all-rejected lists every rejected configuration in the --json report: add "
        "--json, or use --show-rejected N for more of them in the text");
  }
  const auto data = data_dir_of(o.model);
  const auto model = resolve_model(o.model);
  const auto loaded = load_topology(o.topology, data);
  const auto& t = loaded.topology;
  const auto gpu = find_gpu(o.gpu, data, "--gpu");
  check_gpu_on_topology(gpu, t);
  const auto k = compute_constants_of(o.compute, data);
  auto overheads = cost::load_overheads(data / "overheads.json");
  for (const auto& a : o.overhead_overrides)
    cost::apply_override(overheads, a);
  auto request = request_of(o);
  std::vector<std::string> notes;
  if (const auto note = planner::resolve_precisions(gpu, request)) notes.push_back(*note);
  if (request.max_gpus > t.gpu_count()) {
    notes.push_back("--gpus " + std::to_string(request.max_gpus) + " is more than the " +
                    std::to_string(t.gpu_count()) +
                    " GPUs of the cluster (--topology, --nodes): the search goes up to " +
                    std::to_string(t.gpu_count()));
  }
  const auto exports = export_request(o, t, gpu);
  planner::check_schedule_request(exports.schedule);
  if (o.launch_options.master_port < 1 || o.launch_options.master_port > 65535) {
    throw Error("--master-port: a TCP port from 1 to 65535");
  }
  check_fp8_exports(o);
  // A search that runs over a second (tens of thousands of GPUs) shows a bar on a terminal.
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  const auto search_start = std::chrono::steady_clock::now();
  if (ProgressBar::stderr_is_terminal()) {
    request.progress = [&](std::int64_t done, std::int64_t total, const std::string& what) {
      const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - search_start;
      if (spent.count() < 1.0 || done == 0) return;
      const double left = spent.count() / double(done) * double(total - done);
      bar.update(double(done), double(total), what, left);
    };
  }

  const auto comm = std::make_shared<cost::CommContext>(t);  // one routing for every estimate
  const auto layout_req = layout_request(o, request);
  request.strategies = layout_req.plan.strategies;
  const auto plan =
      planner::plan_layouts(model, t, loaded.table, gpu, layout_req, k, overheads, comm);
  bar.finish();
  request.progress = nullptr;
  auto outputs = planner::plan_outputs(
      plan, {model, t, loaded.table, gpu, k, overheads, request, comm}, exports);
  auto files = std::move(outputs.files);
  for (auto& f : files)
    f.what = with_flags(f.what);
  const auto megatron = outputs.megatron;
  const auto torchtitan = outputs.torchtitan;
  auto extras = extras_of(std::move(outputs), std::move(notes));
  if (plan.best()) extras.band = band_of(data, plan.best()->family(), gpu);
  extras.plan_args = ctx.args;
  const PlanReportContext report{model, t, gpu, request, plan, o.rejected_shown, o.all_rejected};
  // The report is complete before any file is written, and printed only after they are.
  std::ostringstream text;
  if (o.json) {
    nlohmann::json j = report_preamble("plan", ctx.args);
    j["model"] = model_json(model);
    j["topology"] = {{"name", t.node().name},
                     {"nodes", t.nodes()},
                     {"gpus", t.gpu_count()},
                     {"gpus_per_node", t.gpus_per_node()}};
    j["gpu"] = gpu.name;
    j["compute_constants"] = cost::to_json(k);
    j.update(plan_json(report, extras));
    text << report_text(j);
  } else {
    plan.best() ? print_plan(text, report, extras) : print_no_plan(text, report);
    if (megatron) {
      text << "wrote Megatron-LM arguments: " << o.megatron_file << " ("
           << cost::describe(*megatron) << ")\n";
    }
    if (torchtitan) {
      text << "wrote torchtitan job config: " << o.torchtitan_file << " ("
           << cost::describe(*torchtitan) << ")\n";
    }
  }
  write_files_together(files);
  ctx.out << text.str();
  if (!plan.best() && planner::counts_of(plan).evaluated == 0) {
    ctx.err << "dtplan: error: the request leaves nothing to search; see why above\n";
    return 1;
  }
  if (!plan.best()) {
    ctx.err << "dtplan: error: no configuration fits " << gpu.name << " with "
            << static_cast<int>(100.0 * request.headroom) << "% headroom"
            << (request.max_run_s > 0 ? " and --max-hours" : "") << "; see the suggestions\n";
    return 1;
  }
  return 0;
}

void add_search_options(CLI::App& cmd, PlanOptions& o) {
  cmd.add_option("--gpu", o.gpu, "GPU model, e.g. A100-80GB, H100-SXM")->required();
  cmd.add_option("--gpus", o.max_gpus, "use at most this many GPUs (default: all)");
  cmd.add_option("--global-batch", o.global_batch, "samples per optimizer step")->required();
  cmd.add_flag("--exact-batch", o.exact_batch,
               "only the global batch itself (default: GPU counts it does not divide compete at "
               "the nearest batches they reach)");
  cmd.add_option("--seq-len", o.seq_len, "tokens per sample (default: the model's maximum)");
  cmd.add_option("--strategy", o.strategies,
                 "search only these: " + join(strategy_names(), ",") +
                     " (data parallel), megatron,fsdp2 (tensor x context x pipeline layouts)")
      ->delimiter(',');
  cmd.add_option("--precision", o.precisions, "search only these precisions (default bf16,fp32)")
      ->delimiter(',');
  cmd.add_option("--checkpointing", o.checkpointings, "search only these: none,selective,full")
      ->delimiter(',');
  cmd.add_flag("--overlap-ep-comm", o.overlap_ep_comm,
               "Megatron-LM layouts with expert parallelism: hide the experts' all-to-alls behind "
               "the adjacent micro-batch's compute where Megatron-LM can (interleaving under a "
               "pipeline, no full recomputation)");
  cmd.add_flag("--deepep", o.deepep,
               "Megatron-LM layouts with expert parallelism over whole experts: dispatch with "
               "DeepEP (across nodes once per node holding a token's experts)");
  cmd.add_flag("--overlap-grad-reduce", o.overlap_grad_reduce,
               "Megatron-LM layouts: reduce the gradients bucket by bucket alongside the last "
               "micro-batch's backward (Megatron-LM's --overlap-grad-reduce)");
  cmd.add_flag(
      "--overlap-param-gather", o.overlap_param_gather,
      "Megatron-LM layouts with the distributed optimizer: gather the updated weights "
      "alongside the next forward (--overlap-param-gather; implies --overlap-grad-reduce)");
  cmd.add_option("--ddp-bucket-size", o.ddp_bucket_size,
                 "Megatron-LM layouts with --overlap-grad-reduce: parameters per gradient bucket "
                 "(Megatron-LM's --ddp-bucket-size; default: max(40M, 1M x dp x cp))")
      ->check(bucket_size_check());
  cmd.add_flag("--grad-reduce-in-bf16", o.grad_reduce_in_bf16,
               "Megatron-LM layouts in bf16: keep and reduce the main gradients in bf16 "
               "(Megatron-LM's --grad-reduce-in-bf16)");
  cmd.add_flag("--fp8-param-gather", o.fp8_param_gather,
               "Megatron-LM layouts with an FP8 recipe and the distributed optimizer: keep and "
               "gather the Linear weights in FP8 (Megatron-LM's --fp8-param-gather)");
  cmd.add_flag("--tp-comm-overlap", o.tp_comm_overlap,
               "Megatron-LM layouts with sequence parallelism: overlap each Linear's "
               "tensor-parallel collective with its GEMM (Megatron-LM's --tp-comm-overlap)");
  cmd.add_option("--recompute-modules", o.recompute_modules,
                 "Megatron-LM layouts under selective checkpointing: the module sets to try, "
                 "each comma-separated (repeat the flag for more), e.g. core_attn or "
                 "layernorm,moe_act (default: core_attn, and for latent attention or experts "
                 "the modules whose tensors are discarded and rebuilt cheaply)");
  cmd.add_option("--offload", o.offloads, "search only these: none,optimizer,optimizer+params")
      ->delimiter(',');
  cmd.add_option("--micro-batch", o.micro_batches, "search only these micro-batches")
      ->delimiter(',');
  cmd.add_option("--tp", o.tps,
                 "tensor-parallel sizes (default: all valid; without 1 no data-parallel strategy)")
      ->delimiter(',');
  cmd.add_option("--pp", o.pps, "pipeline-parallel sizes (default: all valid)")->delimiter(',');
  cmd.add_option("--cp", o.cps,
                 "context-parallel sizes (default: powers of two leaving each rank at least 4096 "
                 "tokens)")
      ->delimiter(',');
  cmd.add_option("--cp-comm", o.cp_comms,
                 "context-parallel exchanges: p2p,all_gather,a2a (default: p2p)")
      ->delimiter(',');
  cmd.add_option("--ep", o.eps,
                 "expert-parallel sizes, a mixture of experts (default: every divisor of the "
                 "experts that folds into tp x cp x dp)")
      ->delimiter(',');
  cmd.add_option("--fp8-recipe", o.fp8_recipe,
                 "FP8 Linear GEMMs on top of bf16, layouts only (megatron: delayed, tensorwise, "
                 "blockwise, mxfp8; fsdp2: tensorwise, rowwise); default none")
      ->capture_default_str();
  cmd.add_option("--etp", o.etps, "expert tensor-parallel sizes (default: tp, and 1 when tp > 1)")
      ->delimiter(',');
  cmd.add_option("--framework", o.frameworks,
                 "who runs the tensor x context x pipeline layouts: megatron,fsdp2 (default: both)")
      ->delimiter(',');
  cmd.add_option("--interleave", o.interleaves, "model chunks per GPU (interleaved pipelines)")
      ->delimiter(',');
  cmd.add_option("--sp", o.sequence_parallel,
                 "sequence parallelism with tp > 1: on,off (default: both)")
      ->delimiter(',');
  cmd.add_option("--schedule", o.schedules,
                 "pipeline schedules: 1f1b,interleaved,gpipe,zb-h1,zb-h2,zbv "
                 "(default: 1f1b, interleaved when --interleave > 1)")
      ->delimiter(',');
  cmd.add_option("--optimizer", o.optimizer, "adam|adamw|sgd|sgd-momentum|adam8bit")
      ->capture_default_str();
  cmd.add_option("--optimizer-impl", o.optimizer_impl,
                 "the optimizer step's kernels: framework|fused|foreach|for-loop")
      ->capture_default_str();
  cmd.add_option("--layer-kernels", o.layer_kernels,
                 "framework|fused|eager: how the candidates' norms, activations and casts run "
                 "(framework: eager under amp-*, fused otherwise); eager prices the "
                 "data-parallel candidates op by op and leaves the layouts (fused) out")
      ->capture_default_str();
  cmd.add_option("--zero-grad", o.zero_grad,
                 "set-to-none|zeros: whether PyTorch's training loop frees the gradients after "
                 "each step (dp, ddp, FSDP, FSDP2 layouts; set-to-none is PyTorch 2's default)")
      ->capture_default_str();
  cmd.add_option("--attention", o.attention, "flash|eager|hf-eager")->capture_default_str();
  cmd.add_option(
         "--attention-kernel", o.attention_kernel,
         "fused attention kernel: framework|flash-attn-1|flash-attn-2|cudnn|flash-attn-triton")
      ->capture_default_str();
  cmd.add_option("--deepspeed-version", o.deepspeed_version,
                 "DeepSpeed release ZeRO-3 runs on, e.g. 0.4.0: before 0.6.0 it gathers each "
                 "parameter on its own and blocks compute (default: a current release)");
  cmd.add_option("--objective", o.objective, "throughput|time|cost")->capture_default_str();
  cmd.add_option("--headroom", o.headroom, "fraction of GPU memory kept free")
      ->capture_default_str()
      ->check(number_check({0.0, 0.99, false}));
  cmd.add_option("--host-memory", o.host_memory,
                 "host RAM per node for offloaded states, e.g. 512GiB (default: the topology's)");
  cmd.add_option("--price-per-gpu-hour", o.price, "for --objective cost")
      ->check(number_check(NumberRange::positive(1e6)));
  cmd.add_option("--max-hours", o.max_hours,
                 "a deadline: reject configurations whose run takes longer (needs --steps or "
                 "--dataset-size)")
      ->check(number_check(NumberRange::positive(kMaxSeconds / 3600.0)));
  cmd.add_option("--sync", o.sync,
                 "gradient synchronisation under accumulation: both (search no_sync and every "
                 "micro-step), no-sync, every-micro-step")
      ->capture_default_str();
  cmd.add_option("--overhead", o.overhead_overrides, "override an overhead constant, KEY=VALUE");
}

void add_output_options(CLI::App& cmd, PlanOptions& o) {
  cmd.add_option("--top", o.top, "runners-up to list")->capture_default_str();
  cmd.add_option("--show-rejected", o.rejected_shown,
                 "rejected configurations shown per reason, the nearest misses first")
      ->capture_default_str();
  cmd.add_option("--threads", o.threads,
                 "threads pricing the layouts' memory (0: the host's hardware threads, at most "
                 "8); the plan is the same on any number")
      ->capture_default_str();
  cmd.add_flag("--all-rejected", o.all_rejected,
               "--json: list every rejected configuration (default: counts per reason and the "
               "--show-rejected nearest misses of each)");
  cmd.add_option("--dataset-size", o.schedule.dataset_size, "samples in the dataset");
  cmd.add_option("--epochs", o.schedule.epochs, "passes over the dataset");
  cmd.add_option("--steps", o.steps, "optimizer steps (instead of a dataset)");
  cmd.add_option("--warmup-ratio", o.schedule.warmup_ratio, "LR warm-up, fraction of the steps")
      ->capture_default_str()
      ->check(number_check(NumberRange::non_negative(1.0)));
  cmd.add_option("--base-lr", o.base_lr, "a learning rate tuned at --base-global-batch")
      ->check(number_check(kLearningRate));
  cmd.add_option("--base-global-batch", o.schedule.base_global_batch, "the batch of --base-lr");
  cmd.add_option("--lr", o.lr, "learning rate written to the DeepSpeed config")
      ->check(number_check(kLearningRate));
  cmd.add_option("--export-deepspeed", o.deepspeed_file,
                 "write a DeepSpeed config (ds_config.json)");
  cmd.add_option("--export-accelerate", o.accelerate_file,
                 "write an Accelerate config (YAML): the best plan's, with FSDP2 when it is an "
                 "FSDP2 layout Accelerate runs, else the best data-parallel plan's");
  cmd.add_option("--save-plan", o.plan_file, "write the plan (JSON) for dtplan run");
  cmd.add_option("--export-torchtitan", o.torchtitan_file,
                 "write the best FSDP2 layout as a torchtitan job config");
  cmd.add_option("--export-megatron", o.megatron_file,
                 "write the best Megatron-LM layout as Megatron-LM arguments");
  cmd.add_flag("--export-launch", o.launch, "print torchrun and deepspeed command lines");
  cmd.add_option("--script", o.launch_options.script, "training script in the launch lines")
      ->capture_default_str();
  cmd.add_option("--script-args", o.launch_options.script_args, "its arguments");
  cmd.add_option("--master-addr", o.launch_options.master_addr, "node 0's address");
  cmd.add_option("--master-port", o.launch_options.master_port, "rendezvous port")
      ->capture_default_str();
  cmd.add_flag("--json", o.json, "machine-readable output");
}

}  // namespace

Command register_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand(
      "plan", "Best strategy, micro-batch and accumulation for a global batch on a cluster");
  add_model_options(*cmd, o->model);
  add_topology_options(*cmd, o->topology, true);
  add_compute_options(*cmd, o->compute);
  add_search_options(*cmd, *o);
  add_output_options(*cmd, *o);
  return {"plan", [o](const RunContext& ctx) { return run_plan(*o, ctx); }};
}

}  // namespace dtplan::cli
