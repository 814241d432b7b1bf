// Shared options: registration on a CLI11 app and checked conversion.
#include "common_options.hpp"

#include <cmath>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/node_subset.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/planner/layout_spec.hpp"
#include "format.hpp"

namespace dtplan::cli {

namespace {

std::string names_of(auto const& table) {
  std::string out;
  for (const auto& row : table)
    out += (out.empty() ? "" : "|") + std::string(row.name);
  return out;
}

}  // namespace

void require_positive(std::int64_t value, const char* flag, std::int64_t limit) {
  if (value < 1) {
    throw Error(std::string(flag) + ": must be a positive integer, got " + std::to_string(value));
  }
  if (value > limit) {
    throw Error(std::string(flag) + ": " + std::to_string(value) + " is beyond the supported " +
                format_thousands(limit));
  }
}

void add_model_options(CLI::App& app, ModelOptions& o) {
  app.add_option("--model", o.model,
                 "model preset name, a Hugging Face config.json (or its folder), or a dtplan "
                 "model JSON");
  app.add_option("--params", o.params, "a bare parameter count instead: 7.5e9, 7.5B, 350M");
  app.add_option("--data-dir", o.data_dir,
                 "data directory (default: $DTPLAN_DATA_DIR or built-in)");
}

namespace {
constexpr const char* kGpusPerNodeHelp =
    "GPUs used in each node (default: all of them); fewer takes the node's first hosts, e.g. 64 "
    "of an NVL72 rack's 72 GPUs (16 of its 18 trays), as a job given part of each rack";
}  // namespace

void add_topology_options(CLI::App& app, TopologyOptions& o, bool required, bool gpus_per_node) {
  auto* opt = app.add_option("--topology", o.topology,
                             "node topology: a preset (pcie-split-8, dgx-a100, ...), a topology "
                             "JSON, or a file holding `nvidia-smi topo -m` output");
  if (required) opt->required();
  app.add_option("--nodes", o.nodes, "nodes, joined by a rail-optimised fat tree")
      ->capture_default_str();
  app.add_option("--pcie-class", o.pcie_class, "nvidia-smi input: PCIe link class")
      ->capture_default_str();
  app.add_option("--socket-class", o.socket_class, "nvidia-smi input: CPU socket link class")
      ->capture_default_str();
  app.add_option("--nvlink-class", o.nvlink_class,
                 "nvidia-smi input: NVLink class (default: by links per GPU)");
  app.add_option("--nic-class", o.nic_class, "nvidia-smi input: NIC port class")
      ->capture_default_str();
  if (gpus_per_node) {
    app.add_option("--gpus-per-node", o.gpus_per_node, kGpusPerNodeHelp);
  }
}

LoadedTopology load_topology(const TopologyOptions& o, const std::filesystem::path& data) {
  require_positive(o.nodes, "--nodes", 4096);
  SmiAssumptions assume{o.pcie_class, o.socket_class, o.nvlink_class, o.nic_class};
  auto table = InterconnectTable::load(data / "interconnect.json");
  for (const auto& cls : {o.pcie_class, o.socket_class, o.nic_class})
    table.find(cls);
  if (!o.nvlink_class.empty()) table.find(o.nvlink_class);
  auto node = load_node_template(o.topology, data / "topologies", assume);
  if (o.gpus_per_node) {
    try {
      node = first_hosts(node, *o.gpus_per_node);
    } catch (const Error& e) {
      throw Error(with_flags(e.what()));
    }
  }
  auto topology = Topology::build(node, o.nodes, table);
  return {std::move(table), std::move(topology)};
}

void add_training_options(CLI::App& app, TrainingOptions& o) {
  app.add_option("--gpus", o.gpus, "data-parallel GPUs")->capture_default_str();
  app.add_option("--gpus-per-node", o.gpus_per_node,
                 "GPUs per node (hybrid shard group, host totals); default min(--gpus, 8)");
  app.add_option("--precision", o.precision, names_of(kPrecisions) + ", fp8 (bf16 with FP8 GEMMs)")
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, names_of(kOptimizers))->capture_default_str();
  app.add_option("--optimizer-impl", o.optimizer_impl, names_of(kOptimizerImpls))
      ->capture_default_str();
  app.add_option("--layer-kernels", o.layer_kernels,
                 names_of(kLayerKernels) + ": how norms, activations and casts run")
      ->capture_default_str();
  app.add_option("--zero-grad", o.zero_grad,
                 names_of(kZeroGrads) +
                     ": whether the training loop frees the gradients after each step (PyTorch's "
                     "strategies; set-to-none is PyTorch 2's default)")
      ->capture_default_str();
  app.add_flag("--grad-bucket-view", o.grad_bucket_view,
               "DDP gradient_as_bucket_view=True: no separate bucket copy");
  app.add_option("--bucket-cap-mb", o.bucket_cap_mb, "DDP bucket_cap_mb (MiB)")
      ->capture_default_str()
      ->check(number_check(kBucketCapMiB));
  app.add_flag("--fp32-grad-accum", o.fp32_grad_accumulation,
               "keep gradients in an fp32 accumulation buffer (Megatron main_grad)");
  app.add_option("--offload", o.offload, names_of(kOffloads))->capture_default_str();
  app.add_option("--micro-batch", o.micro_batch, "samples per GPU per micro-step")
      ->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "tokens per sample (default: the model's maximum)");
  app.add_option("--checkpointing", o.checkpointing, names_of(kCheckpointings))
      ->capture_default_str();
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "with --checkpointing full: checkpoint every Nth block only, the others keep "
                 "their activations (torchtitan's selective_ac_option N)")
      ->capture_default_str();
  app.add_option("--attention", o.attention, names_of(kAttentions))->capture_default_str();
  app.add_option("--attention-kernel", o.attention_kernel,
                 "fused attention kernel: " + names_of(kAttentionKernels))
      ->capture_default_str();
  app.add_option("--fp8-recipe", o.fp8_recipe,
                 "FP8 GEMMs in the blocks' Linear layers on top of bf16 (a layout: megatron or "
                 "fsdp2): " +
                     names_of(kFp8Recipes) + "; --precision fp8 is bf16 with delayed");
  app.add_option("--gpu", o.gpu, "GPU model for the fit check, e.g. A100-80GB, H100-SXM");
  app.add_option("--overhead", o.overhead_overrides,
                 "override an overhead constant, KEY=VALUE (repeatable)");
  app.add_option("--overheads", o.overheads_file, "overhead constants file (JSON)");
  app.add_option("--deepspeed-version", o.deepspeed_version,
                 "DeepSpeed release ZeRO-3 runs on, e.g. 0.4.0: before 0.6.0 it gathers each "
                 "parameter on its own and blocks compute (default: a current release)");
  app.add_option("--host-memory", o.host_memory,
                 "host RAM per node for offloaded states, e.g. 512GiB (default: the topology's)");
}

void add_compute_options(CLI::App& app, ComputeOptions& o) {
  app.add_option(
      "--compute", o.overrides,
      "override a compute constant, KEY=VALUE (repeatable; see docs/step-time-model.md)");
  app.add_option("--compute-file", o.file,
                 "compute constants file (JSON; default data/compute.json)");
}

cost::ComputeConstants compute_constants_of(const ComputeOptions& o,
                                            const std::filesystem::path& data) {
  auto k = cost::load_compute_constants(o.file.empty() ? data / "compute.json"
                                                       : std::filesystem::path(o.file));
  for (const auto& assignment : o.overrides)
    cost::apply_compute_override(k, assignment);
  return k;
}

GpuSpec find_gpu(const std::string& name, const std::filesystem::path& data, const char* flag) {
  if (name.empty()) throw Error(std::string(flag) + ": give the GPU model, e.g. A100-80GB");
  return GpuCatalog::load(data / "gpus.json").find(name);
}

std::filesystem::path data_dir_of(const ModelOptions& o) {
  return resolve_data_dir(o.data_dir);
}

ModelDesc resolve_model(const ModelOptions& o) {
  if (!o.model.empty() && !o.params.empty()) {
    throw Error("--model and --params: give one of them, not both");
  }
  if (!o.params.empty()) return model_from_param_count(parse_param_count(o.params), "--params");
  if (o.model.empty()) throw Error("no model: give --model NAME|PATH or --params COUNT");
  return load_model(o.model, data_dir_of(o) / "models");
}

TrainingConfig training_config(const TrainingOptions& o) {
  TrainingConfig c;
  require_positive(o.gpus, "--gpus", 1'000'000);
  c.dp_size = o.gpus;
  c.gpus_per_node = o.gpus_per_node.value_or(std::min<std::int64_t>(o.gpus, 8));
  require_positive(c.gpus_per_node, "--gpus-per-node", 1024);
  // --precision fp8: bf16 mixed precision with FP8 GEMMs, Transformer Engine's default recipe
  // unless --fp8-recipe names one.
  const bool fp8 = o.precision == "fp8";
  c.precision = fp8 ? Precision::bf16 : parse_flag("--precision", o.precision, parse_precision);
  if (!o.fp8_recipe.empty()) {
    c.fp8 = parse_flag("--fp8-recipe", o.fp8_recipe, parse_fp8_recipe);
  } else if (fp8) {
    c.fp8 = Fp8Recipe::delayed;
  }
  if (fp8 && c.fp8 == Fp8Recipe::none)
    throw Error("--precision fp8 with --fp8-recipe none: give an FP8 recipe, or bf16");
  c.optimizer = parse_flag("--optimizer", o.optimizer, parse_optimizer);
  c.optimizer_impl = parse_flag("--optimizer-impl", o.optimizer_impl, parse_optimizer_impl);
  c.layer_kernels = parse_flag("--layer-kernels", o.layer_kernels, parse_layer_kernels);
  c.grad_bucket_view = o.grad_bucket_view;
  c.zero_grad = parse_flag("--zero-grad", o.zero_grad, parse_zero_grad);
  c.bucket_cap_bytes = static_cast<std::int64_t>(std::llround(o.bucket_cap_mb * 1048576.0));
  c.fp32_grad_accumulation = o.fp32_grad_accumulation;
  c.offload = parse_flag("--offload", o.offload, parse_offload);
  require_positive(o.micro_batch, "--micro-batch", 1'000'000);
  c.micro_batch = o.micro_batch;
  if (o.seq_len) require_positive(*o.seq_len, "--seq-len");
  c.seq_len = o.seq_len.value_or(0);
  c.checkpointing = parse_flag("--checkpointing", o.checkpointing, parse_checkpointing);
  require_positive(o.checkpoint_every, "--checkpoint-every");
  c.checkpoint_every = o.checkpoint_every;
  c.attention = parse_flag("--attention", o.attention, parse_attention);
  c.attention_kernel = attention_kernel_of(o.attention_kernel, c.attention);
  if (!o.deepspeed_version.empty()) {
    c.zero3_gathers =
        parse_flag("--deepspeed-version", o.deepspeed_version, zero3_gathers_of_deepspeed);
  }
  return c;
}

AttentionKernel attention_kernel_of(std::string_view kernel, Attention attention) {
  const auto k = parse_flag("--attention-kernel", std::string(kernel), parse_attention_kernel);
  check_attention_kernel(attention, k);
  return k;
}

void check_deepspeed_version(const TrainingOptions& o, std::string_view runs_on) {
  if (o.deepspeed_version.empty() || runs_on == "all") return;
  const bool deepspeed = !planner::is_layout_framework(runs_on) &&
                         cost::traits_of(parse_strategy(runs_on)).framework == "deepspeed";
  if (!deepspeed) {
    throw Error("--deepspeed-version: " + std::string(runs_on) +
                " does not run on DeepSpeed (its ZeRO strategies do: zero1, zero2, zero3)");
  }
}

cost::OverheadConstants overheads_of(const TrainingOptions& o, const std::filesystem::path& data) {
  auto k = cost::load_overheads(o.overheads_file.empty() ? data / "overheads.json"
                                                         : std::filesystem::path(o.overheads_file));
  for (const auto& assignment : o.overhead_overrides)
    cost::apply_override(k, assignment);
  return k;
}

std::optional<GpuSpec> gpu_of(const TrainingOptions& o, const std::filesystem::path& data) {
  if (o.gpu.empty()) return std::nullopt;
  return GpuCatalog::load(data / "gpus.json").find(o.gpu);
}

std::optional<Bytes> host_memory_of(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto b = parse_size(text, "--host-memory");
  if (b.value <= 0) throw Error("--host-memory " + text + ": must be a positive size, e.g. 512GiB");
  return b;
}

}  // namespace dtplan::cli
