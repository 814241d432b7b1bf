// dtplan-gui's flags (see gui_options.hpp).
#include "gui_options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <iostream>
#include <utility>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::gui {

namespace {

// A flag's bounds as CLI11 checks them: "--micro-batch: Value -3 not in range 1 to 1000000".
CLI::Range in_range(IntRange r) {
  return CLI::Range(r.min, r.max);
}

// The layout flags of dtplan estimate: with any of them (or megatron|fsdp2 as --strategy) the
// session is a tensor x context x pipeline layout.
void add_layout_flags(CLI::App& app, planner::LayoutSpec& l) {
  app.add_option("--tp", l.tp, "tensor-parallel size")->capture_default_str();
  app.add_option("--pp", l.pp, "pipeline stages")->capture_default_str();
  app.add_option("--cp", l.cp, "context-parallel size")->capture_default_str();
  app.add_option("--cp-comm", l.cp_comm, "p2p, all_gather, a2a")->capture_default_str();
  app.add_option("--ep", l.ep, "expert-parallel size (mixture of experts)")->capture_default_str();
  app.add_option("--etp", l.etp, "expert tensor-parallel size (0: --tp)")->capture_default_str();
  app.add_option("--capacity-factor", l.capacity_factor,
                 "experts' padded capacity over the balanced share (0: dropless)")
      ->capture_default_str();
  app.add_flag("--overlap-ep-comm", l.overlap_ep_comm,
               "experts' all-to-alls behind the adjacent micro-batch's compute");
  app.add_flag("--deepep", l.deepep, "DeepEP token dispatch (once per node across nodes)");
  app.add_flag("--overlap-grad-reduce", l.overlap_grad_reduce,
               "Megatron-LM: gradients reduced alongside the last backward");
  app.add_flag("--overlap-param-gather", l.overlap_param_gather,
               "Megatron-LM: updated weights gathered alongside the next forward");
  app.add_option("--ddp-bucket-size", l.ddp_bucket_size,
                 "Megatron-LM: parameters per overlapped gradient bucket")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 50));
  app.add_flag("--grad-reduce-in-bf16", l.grad_reduce_in_bf16,
               "Megatron-LM: main gradients kept and reduced in bf16");
  app.add_flag("--fp8-param-gather", l.fp8_param_gather,
               "Megatron-LM: Linear weights kept and gathered in FP8");
  app.add_flag("--tp-comm-overlap", l.tp_comm_overlap,
               "Megatron-LM: tensor-parallel collectives overlapped with their GEMMs");
  app.add_option("--recompute-modules", l.recompute_modules,
                 "with --checkpointing selective: the parts rebuilt (Megatron-LM's "
                 "--recompute-modules), comma-separated or none");
  app.add_option("--interleave", l.interleave, "model chunks per GPU")->capture_default_str();
  app.add_flag("--sp", l.sequence_parallel, "sequence parallelism (needs --tp > 1)");
  app.add_option("--pp-layers", l.pp_layers, "layers of each stage, first to last: 7,8,8,7")
      ->delimiter(',');
  app.add_option("--schedule", l.schedule, "1f1b, interleaved, gpipe, zb-h1, zb-h2, zbv");
  app.add_option("--framework", l.framework, "megatron or fsdp2");
  app.add_option("--sharding", l.sharding, "none, optimizer, gradients, parameters");
  app.add_option("--dp-shard", l.dp_shard, "ranks each state is sharded over (hybrid)");
}

constexpr std::array<const char*, 23> kLayoutFlags{"--capacity-factor",
                                                   "--tp",
                                                   "--pp",
                                                   "--cp",
                                                   "--ep",
                                                   "--etp",
                                                   "--cp-comm",
                                                   "--interleave",
                                                   "--sp",
                                                   "--pp-layers",
                                                   "--schedule",
                                                   "--framework",
                                                   "--sharding",
                                                   "--dp-shard",
                                                   "--overlap-ep-comm",
                                                   "--deepep",
                                                   "--overlap-grad-reduce",
                                                   "--overlap-param-gather",
                                                   "--ddp-bucket-size",
                                                   "--grad-reduce-in-bf16",
                                                   "--fp8-param-gather",
                                                   "--tp-comm-overlap",
                                                   "--recompute-modules"};

// As dtplan estimate: layout flags without --strategy make the session a layout, run by
// --framework or else Megatron-LM.
void default_layout_strategy(const CLI::App& app, Session& s) {
  const bool layout_flag = std::any_of(kLayoutFlags.begin(), kLayoutFlags.end(),
                                       [&](const char* flag) { return app.count(flag) > 0; });
  if (!layout_flag || app.count("--strategy") > 0 || planner::is_layout_framework(s.strategy))
    return;
  if (s.layout.framework.empty()) {
    s.strategy = "megatron";
    return;
  }
  try {
    (void)cost::parse_framework(s.layout.framework);
  } catch (const Error& e) {
    throw Error(std::string("--framework: ") + e.what());
  }
  // The form names the framework as the strategy.
  s.strategy = std::exchange(s.layout.framework, std::string());
}

// The layout flags given on the command line, carried over a session read from a file.
void merge_layout(const CLI::App& app, const planner::LayoutSpec& given, planner::LayoutSpec& l) {
  const auto set = [&](const char* flag, auto& to, const auto& from) {
    if (app.count(flag) > 0) to = from;
  };
  set("--tp", l.tp, given.tp);
  set("--pp", l.pp, given.pp);
  set("--cp", l.cp, given.cp);
  set("--ep", l.ep, given.ep);
  set("--etp", l.etp, given.etp);
  set("--capacity-factor", l.capacity_factor, given.capacity_factor);
  set("--overlap-ep-comm", l.overlap_ep_comm, given.overlap_ep_comm);
  set("--deepep", l.deepep, given.deepep);
  set("--overlap-grad-reduce", l.overlap_grad_reduce, given.overlap_grad_reduce);
  set("--overlap-param-gather", l.overlap_param_gather, given.overlap_param_gather);
  set("--ddp-bucket-size", l.ddp_bucket_size, given.ddp_bucket_size);
  set("--grad-reduce-in-bf16", l.grad_reduce_in_bf16, given.grad_reduce_in_bf16);
  set("--fp8-param-gather", l.fp8_param_gather, given.fp8_param_gather);
  set("--tp-comm-overlap", l.tp_comm_overlap, given.tp_comm_overlap);
  set("--recompute-modules", l.recompute_modules, given.recompute_modules);
  set("--cp-comm", l.cp_comm, given.cp_comm);
  set("--interleave", l.interleave, given.interleave);
  set("--sp", l.sequence_parallel, given.sequence_parallel);
  set("--pp-layers", l.pp_layers, given.pp_layers);
  set("--schedule", l.schedule, given.schedule);
  set("--framework", l.framework, given.framework);
  set("--sharding", l.sharding, given.sharding);
  set("--dp-shard", l.dp_shard, given.dp_shard);
}

}  // namespace

std::optional<GuiOptions> parse_gui_options(int argc, char** argv) {
  CLI::App app{"dtplan-gui: memory, topology, step timeline, plans and validation, drawn"};
  GuiOptions o;
  auto& s = o.session;
  std::string session_file;
  app.add_option("--session", session_file, "open a saved session (JSON); flags override it");
  app.add_option("--model", s.model, "preset name or file")->capture_default_str();
  app.add_option("--gpu", s.gpu, "GPU model")->capture_default_str();
  app.add_option("--topology", s.topology, "preset, JSON or nvidia-smi topo -m text")
      ->capture_default_str();
  app.add_option("--nodes", s.nodes, "nodes")->capture_default_str()->check(in_range(kNodesRange));
  app.add_option("--gpus-per-node", s.gpus_per_node,
                 "GPUs used in each node (default: all): fewer takes its first hosts, e.g. 64 of "
                 "an NVL72 rack's 72 (16 of its 18 trays)")
      ->check(in_range(kGpusPerNodeRange));
  app.add_option("--gpus", s.gpus,
                 "GPUs (a layout's dp = GPUs / (tp x cp x pp)); with --nodes and no --gpus: "
                 "every GPU of the nodes")
      ->capture_default_str()
      ->check(in_range(kGpusRange));
  app.add_option("--strategy", s.strategy, "strategy")->capture_default_str();
  app.add_option("--precision", s.precision, "precision")->capture_default_str();
  app.add_option("--optimizer", s.optimizer, "optimizer")->capture_default_str();
  app.add_option("--optimizer-impl", s.optimizer_impl,
                 "the optimizer step's kernels: framework, fused, foreach, for-loop")
      ->capture_default_str();
  app.add_option("--layer-kernels", s.layer_kernels,
                 "how norms, activations and casts run: framework, fused, eager")
      ->capture_default_str();
  app.add_option("--zero-grad", s.zero_grad,
                 "set-to-none (PyTorch 2: gradients freed after each step) or zeros")
      ->capture_default_str();
  app.add_option("--micro-batch", s.micro_batch, "samples per GPU per micro-step")
      ->capture_default_str()
      ->check(in_range(kMicroBatchRange));
  app.add_option("--grad-accum", s.grad_accum, "micro-steps per step")
      ->capture_default_str()
      ->check(in_range(kGradAccumRange));
  app.add_option("--seq-len", s.seq_len, "tokens per sample (0: the model's maximum)")
      ->capture_default_str()
      ->check(in_range(kSeqLenRange));
  app.add_option("--checkpoint-every", s.checkpoint_every,
                 "with --checkpointing full: every Nth block only");
  app.add_option("--checkpointing", s.checkpointing, "none, selective, full")
      ->capture_default_str();
  app.add_option("--offload", s.offload, "none, optimizer, optimizer+params")
      ->capture_default_str();
  app.add_option("--attention", s.attention, "flash, eager, hf-eager")->capture_default_str();
  app.add_option("--attention-kernel", s.attention_kernel,
                 "fused attention kernel: framework, flash-attn-1, flash-attn-2, cudnn, "
                 "flash-attn-triton")
      ->capture_default_str();
  app.add_option("--fp8-recipe", s.fp8_recipe,
                 "FP8 Linear GEMMs of a layout: none, delayed, tensorwise, rowwise, blockwise, "
                 "mxfp8")
      ->capture_default_str();
  app.add_option("--global-batch", s.global_batch, "the planner's target")
      ->capture_default_str()
      ->check(in_range(kGlobalBatchRange));
  add_layout_flags(app, s.layout);
  app.add_option("--measured", s.measurements, "dtplan-run measurement files (validation)");
  app.add_option("--profile", s.profile, "hardware profile for the measurements");
  app.add_option("--screenshot", o.screenshot, "render --view headless to this PNG (or .svg)");
  app.add_option("--view", o.view, "memory, topology, timeline, plan or validation")
      ->capture_default_str();
  app.add_option("--width", o.width, "screenshot width (at least 1200)")->capture_default_str();
  app.add_option("--height", o.height, "screenshot height (at least 800)")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw Error(std::string(e.what()) + " (see --help)");
  }
  if (!session_file.empty()) {
    // The file first; flags given on the command line override it.
    const auto from_file = load_session(session_file);
    const auto given = [&](const char* flag) { return app.count(flag) > 0; };
    Session merged = from_file;
    if (given("--model")) merged.model = s.model;
    if (given("--gpu")) merged.gpu = s.gpu;
    if (given("--topology")) merged.topology = s.topology;
    if (given("--nodes")) merged.nodes = s.nodes;
    if (given("--gpus-per-node")) merged.gpus_per_node = s.gpus_per_node;
    if (given("--gpus")) merged.gpus = s.gpus;
    if (given("--strategy")) merged.strategy = s.strategy;
    if (given("--precision")) merged.precision = s.precision;
    if (given("--optimizer")) merged.optimizer = s.optimizer;
    if (given("--optimizer-impl")) merged.optimizer_impl = s.optimizer_impl;
    if (given("--layer-kernels")) merged.layer_kernels = s.layer_kernels;
    if (given("--zero-grad")) merged.zero_grad = s.zero_grad;
    if (given("--checkpointing")) merged.checkpointing = s.checkpointing;
    if (given("--checkpoint-every")) merged.checkpoint_every = s.checkpoint_every;
    if (given("--offload")) merged.offload = s.offload;
    if (given("--profile")) merged.profile = s.profile;
    if (given("--micro-batch")) merged.micro_batch = s.micro_batch;
    if (given("--grad-accum")) merged.grad_accum = s.grad_accum;
    if (given("--seq-len")) merged.seq_len = s.seq_len;
    if (given("--global-batch")) merged.global_batch = s.global_batch;
    if (given("--measured")) merged.measurements = s.measurements;
    if (given("--attention")) merged.attention = s.attention;
    if (given("--attention-kernel")) merged.attention_kernel = s.attention_kernel;
    if (given("--fp8-recipe")) merged.fp8_recipe = s.fp8_recipe;
    merge_layout(app, s.layout, merged.layout);
    s = merged;
  }
  // --nodes alone means the whole cluster, as dtplan plan and estimate's layouts take it.
  if (app.count("--nodes") > 0 && app.count("--gpus") == 0) {
    const auto node = load_node_template(s.topology, resolve_data_dir("") / "topologies");
    const auto per_node = s.gpus_per_node > 0 ? s.gpus_per_node : node.gpu_count();
    s.gpus = checked_mul(s.nodes, per_node, "--nodes x GPUs per node");
  }
  default_layout_strategy(app, s);
  const std::vector<std::string> views{"memory", "topology", "timeline", "plan", "validation"};
  if (std::find(views.begin(), views.end(), o.view) == views.end()) {
    throw Error("--view " + o.view + ": expected memory, topology, timeline, plan or validation");
  }
  if (o.width < 1200 || o.height < 800) {
    throw Error("--width/--height: screenshots are at least 1200 x 800");
  }
  return o;
}

}  // namespace dtplan::gui
