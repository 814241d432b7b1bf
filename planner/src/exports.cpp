// DeepSpeed, launcher and Accelerate exports of a plan.
#include "dtplan/planner/exports.hpp"

#include <sstream>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::planner {

namespace {

int zero_stage(Strategy s) {
  return cost::traits_of(s).zero_stage;
}

bool runs_on_deepspeed(Strategy s) {
  return cost::traits_of(s).framework == "deepspeed";
}

bool fp16(Precision p) {
  return p == Precision::fp16 || p == Precision::amp_fp16;
}
bool bf16(Precision p) {
  return p == Precision::bf16 || p == Precision::amp_bf16;
}

// GPUs per launcher host: the node's, or the host's where a node spans several hosts.
std::int64_t host_size(const Plan& p, const LaunchOptions& o) {
  const auto per = p.training.gpus_per_node;
  return o.gpus_per_host > 0 ? std::min(o.gpus_per_host, per) : per;
}

std::string gpus_per_node(const Plan& p, const LaunchOptions& o) {
  return std::to_string(std::min(p.training.dp_size, host_size(p, o)));
}

std::int64_t nodes_used(const Plan& p, const LaunchOptions& o) {
  const auto per = host_size(p, o);
  return (p.training.dp_size + per - 1) / per;
}

}  // namespace

namespace {

// zero_optimization as DeepSpeed documents it; parameter offload exists only in stage 3.
nlohmann::json zero_section(const TrainingConfig& t, const LaunchOptions& o,
                            std::vector<std::string>& notes) {
  int stage = zero_stage(t.strategy);
  if (t.offload == Offload::optimizer_and_params && stage != 3) {
    notes.push_back("DeepSpeed offloads parameters only in ZeRO stage 3: exported as stage 3");
    stage = 3;
  }
  nlohmann::json zero = {{"stage", stage}};
  if (stage > 0) {
    zero["overlap_comm"] = true;
    zero["contiguous_gradients"] = true;
    zero["reduce_bucket_size"] = o.zero_reduce_bucket_elements;
  }
  if (stage == 1 || stage == 2) {
    zero["allgather_partitions"] = true;
    zero["allgather_bucket_size"] = o.zero_reduce_bucket_elements;
    zero["reduce_scatter"] = true;
  }
  if (stage == 3) {
    zero["stage3_prefetch_bucket_size"] = 50000000;
    zero["stage3_param_persistence_threshold"] = 100000;
    zero["stage3_max_live_parameters"] = 1000000000;
    zero["stage3_max_reuse_distance"] = 1000000000;
    zero["stage3_gather_16bit_weights_on_model_save"] = true;
  }
  if (t.offload != Offload::none) {
    zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  }
  if (t.offload == Offload::optimizer_and_params) {
    zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  }
  return zero;
}

// The optimizer section, written when a learning rate is known or offload needs DeepSpeed to
// build the (CPU) optimizer; DeepSpeed takes other torch.optim names as they are.
std::optional<nlohmann::json> optimizer_section(const TrainingConfig& t, const LaunchOptions& o,
                                                std::vector<std::string>& notes) {
  if (t.offload == Offload::none && !o.lr) return std::nullopt;
  if (t.optimizer == Optimizer::adam8bit) {
    notes.push_back("8-bit Adam is not a DeepSpeed optimizer: pass it to deepspeed.initialize");
    return std::nullopt;
  }
  const double lr = o.lr.value_or(1e-4);
  if (!o.lr) notes.push_back("optimizer lr 1e-4 is a placeholder: pass --lr or --base-lr");
  nlohmann::json params = {{"lr", lr}};
  std::string type;
  switch (t.optimizer) {
    case Optimizer::adam:
    case Optimizer::adamw:
      type = t.optimizer == Optimizer::adam ? "Adam" : "AdamW";
      params.update({{"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 0.01}});
      // --optimizer-impl foreach (or for-loop): DeepSpeed builds torch.optim's Adam(W), which
      // steps foreach on CUDA, instead of its FusedAdam (an offloaded step stays its CPU Adam).
      if ((t.optimizer_impl == OptimizerImpl::foreach ||
           t.optimizer_impl == OptimizerImpl::for_loop) &&
          t.offload == Offload::none)
        params["torch_adam"] = true;
      break;
    case Optimizer::sgd:
    case Optimizer::sgd_momentum:
      type = "SGD";
      params["momentum"] = t.optimizer == Optimizer::sgd ? 0.0 : 0.9;
      break;
    case Optimizer::adam8bit:
      break;
  }
  return nlohmann::json{{"type", type}, {"params", params}};
}

}  // namespace

DeepSpeedExport deepspeed_config(const Plan& p, const LaunchOptions& o) {
  const auto& t = p.training;
  DeepSpeedExport out;
  auto& j = out.config;
  j["train_batch_size"] = p.global_batch;
  j["train_micro_batch_size_per_gpu"] = t.micro_batch;
  j["gradient_accumulation_steps"] = p.grad_accum;
  j["gradient_clipping"] = 1.0;
  j["steps_per_print"] = 100;
  j["wall_clock_breakdown"] = false;
  if (bf16(t.precision)) j["bf16"] = {{"enabled", true}};
  if (fp16(t.precision)) {
    // Dynamic loss scaling (loss_scale 0), DeepSpeed's documented defaults.
    j["fp16"] = {{"enabled", true},           {"loss_scale", 0}, {"loss_scale_window", 1000},
                 {"initial_scale_power", 16}, {"hysteresis", 2}, {"min_loss_scale", 1}};
  }
  if (t.precision == Precision::amp_fp16 || t.precision == Precision::amp_bf16) {
    out.notes.push_back("torch.autocast has no DeepSpeed form: exported as DeepSpeed's own " +
                        std::string(compute_type(t.precision)) + " mixed precision");
  }
  j["zero_optimization"] = zero_section(t, o, out.notes);
  if (const auto opt = optimizer_section(t, o, out.notes)) j["optimizer"] = *opt;
  if (t.offload != Offload::none && t.optimizer != Optimizer::adam &&
      t.optimizer != Optimizer::adamw) {
    // ZeRO-Offload expects DeepSpeed's CPU Adam unless told otherwise.
    j["zero_force_ds_cpu_optimizer"] = false;
  }
  if (t.checkpointing != Checkpointing::none) {
    j["activation_checkpointing"] = {{"partition_activations", false},
                                     {"contiguous_memory_optimization", false},
                                     {"cpu_checkpointing", false},
                                     {"synchronize_checkpoint_boundary", false},
                                     {"profile", false}};
    out.notes.push_back(
        "activation checkpointing also needs the model to wrap its blocks "
        "(deepspeed.checkpointing.checkpoint or gradient_checkpointing_enable())" +
        std::string(t.checkpointing == Checkpointing::selective
                        ? "; the plan recomputes only attention (selective): wrap those"
                        : ""));
  }
  const int stage = j["zero_optimization"]["stage"].get<int>();
  if (!runs_on_deepspeed(t.strategy)) {
    out.notes.push_back("the plan uses " + std::string(name_of(t.strategy)) +
                        "; the DeepSpeed equivalent is ZeRO stage " + std::to_string(stage));
  }
  return out;
}

namespace {

struct LaunchText {
  std::int64_t nodes;
  std::string per_node;
  std::string addr;
  std::string port;
  std::string script;  // with its arguments
};

LaunchText launch_text(const Plan& p, const LaunchOptions& o) {
  return {nodes_used(p, o), gpus_per_node(p, o),
          o.master_addr.empty() ? "$MASTER_ADDR" : o.master_addr, std::to_string(o.master_port),
          o.script + (o.script_args.empty() ? "" : " " + o.script_args)};
}

}  // namespace

std::vector<std::string> torchrun_lines(const Plan& p, const LaunchOptions& o) {
  const auto l = launch_text(p, o);
  if (p.training.strategy == Strategy::dp) {
    std::string devices;
    for (std::int64_t i = 0; i < p.training.dp_size; ++i) {
      devices += (i ? "," : "") + std::to_string(i);
    }
    return {"CUDA_VISIBLE_DEVICES=" + devices + " python " + l.script +
            "   # DataParallel: one process drives every GPU; no launcher"};
  }
  if (l.nodes == 1) {
    return {"torchrun --standalone --nnodes=1 --nproc_per_node=" + l.per_node + " " + l.script};
  }
  std::vector<std::string> lines;
  if (o.master_addr.empty()) lines.emplace_back("# set MASTER_ADDR to node 0's address first");
  for (std::int64_t rank = 0; rank < l.nodes; ++rank) {
    lines.push_back("torchrun --nnodes=" + std::to_string(l.nodes) +
                    " --nproc_per_node=" + l.per_node + " --node_rank=" + std::to_string(rank) +
                    " --master_addr=" + l.addr + " --master_port=" + l.port + " " + l.script +
                    "   # on node " + std::to_string(rank));
  }
  return lines;
}

std::vector<std::string> deepspeed_lines(const Plan& p, const LaunchOptions& o) {
  const auto l = launch_text(p, o);
  const std::string tail = " " + l.script + " --deepspeed --deepspeed_config " + o.ds_config;
  if (l.nodes == 1) return {"deepspeed --num_nodes=1 --num_gpus=" + l.per_node + tail};
  return {
      "# deepspeed starts every node from node 0; hostfile: one line per node, e.g. "
      "'node0 slots=" +
          l.per_node + "'",
      "deepspeed --hostfile=hostfile --num_nodes=" + std::to_string(l.nodes) + " --num_gpus=" +
          l.per_node + " --master_addr=" + l.addr + " --master_port=" + l.port + tail};
}

std::string accelerate_config(const Plan& p, const LaunchOptions& o) {
  const auto& t = p.training;
  const auto& traits = cost::traits_of(t.strategy);
  const bool fsdp = traits.fsdp;
  const bool zero = runs_on_deepspeed(t.strategy);
  const auto nodes = nodes_used(p, o);
  std::ostringstream y;
  y << "# Accelerate config written by dtplan for " << p.model << " (" << name_of(t.strategy)
    << ", " << t.dp_size << " GPUs)\n";
  y << "compute_environment: LOCAL_MACHINE\n";
  y << "distributed_type: "
    << (fsdp            ? "FSDP"
        : zero          ? "DEEPSPEED"
        : t.dp_size > 1 ? "MULTI_GPU"
                        : "NO")
    << "\n";
  y << "downcast_bf16: 'no'\n";
  if (fsdp) {
    const auto sharding = traits.fsdp_sharding;
    y << "fsdp_config:\n"
      << "  fsdp_activation_checkpointing: "
      << (t.checkpointing == Checkpointing::full ? "true" : "false") << "\n"
      << "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
      << "  fsdp_backward_prefetch: BACKWARD_PRE\n"
      << "  fsdp_cpu_ram_efficient_loading: true\n"
      << "  fsdp_forward_prefetch: false\n"
      << "  fsdp_offload_params: " << (t.offload != Offload::none ? "true" : "false") << "\n"
      << "  fsdp_sharding_strategy: " << sharding << "\n"
      << "  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
      << "  fsdp_sync_module_states: true\n"
      << "  fsdp_use_orig_params: true\n";
  }
  if (zero) {
    y << "deepspeed_config:\n"
      << "  deepspeed_config_file: " << o.ds_config << "\n"
      << "  zero3_init_flag: " << (zero_stage(t.strategy) == 3 ? "true" : "false") << "\n";
  }
  if (nodes > 1) y << "# on node N set machine_rank: N\n";
  y << "machine_rank: 0\n";
  if (nodes > 1) {
    y << "main_process_ip: " << (o.master_addr.empty() ? "MASTER_ADDR_HERE" : o.master_addr)
      << "\n";
    y << "main_process_port: " << o.master_port << "\n";
  }
  y << "main_training_function: main\n";
  // With a DeepSpeed config file, Accelerate requires its own mixed_precision to be 'no': the
  // precision comes from the file.
  y << "mixed_precision: "
    << (zero                ? "'no'"
        : bf16(t.precision) ? "bf16"
        : fp16(t.precision) ? "fp16"
                            : "'no'")
    << "\n";
  y << "num_machines: " << nodes << "\n";
  y << "num_processes: " << t.dp_size << "\n";
  y << "rdzv_backend: static\n";
  y << "same_network: true\n";
  y << "use_cpu: false\n";
  return y.str();
}

bool uses_deepspeed(const Plan& p) {
  return runs_on_deepspeed(p.training.strategy);
}

std::vector<std::string> accelerate_notes(const Plan& p) {
  const auto& t = p.training;
  std::vector<std::string> notes;
  if (t.strategy == Strategy::dp) {
    notes.emplace_back(
        "Accelerate has no DataParallel mode: MULTI_GPU runs DDP, one process per GPU");
  }
  if (t.checkpointing == Checkpointing::selective) {
    notes.emplace_back(
        "Accelerate checkpoints whole blocks, the plan only attention (selective): "
        "the config leaves fsdp_activation_checkpointing off; checkpoint attention "
        "in the model");
  }
  if (t.precision == Precision::amp_fp16 || t.precision == Precision::amp_bf16) {
    notes.emplace_back("mixed_precision in Accelerate is torch.autocast, as the plan's " +
                       std::string(name_of(t.precision)));
  }
  return notes;
}

}  // namespace dtplan::planner
