// Accelerate configs for FSDP2 layouts (see export_accelerate_fsdp2.hpp).
#include "dtplan/planner/export_accelerate_fsdp2.hpp"

#include <sstream>

#include "dtplan/model/error.hpp"

namespace dtplan::planner {

std::optional<std::string> accelerate_fsdp2_problem(const cost::Layout3D& l) {
  if (l.framework != cost::Framework::fsdp2) {
    return "the layout runs under " + std::string(cost::name_of(l.framework)) +
           ", not FSDP2 ({framework} fsdp2)";
  }
  if (l.pp > 1) return "Accelerate has no pipeline parallelism: the layout needs pp 1";
  if (l.cp > 1 && l.cp_comm == cost::CpComm::a2a) {
    return "Accelerate's FSDP2 context parallelism rotates K/V (allgather or alltoall), not "
           "Ulysses";
  }
  if (l.sequence_parallel) {
    return "Accelerate's tensor parallelism follows the model's tp_plan, which keeps the "
           "norms' sequence whole: the layout needs sequence parallelism off";
  }
  if (l.shard_ranks() % l.cp != 0) {
    return "Accelerate shards over dp_shard x cp; a shard group of " +
           std::to_string(l.shard_ranks()) + " does not divide by cp " + std::to_string(l.cp);
  }
  return std::nullopt;
}

std::string accelerate_fsdp2_config(const ModelDesc& m, const cost::Layout3D& l,
                                    std::int64_t gpus_per_node, const LaunchOptions& o) {
  if (const auto why = accelerate_fsdp2_problem(l)) throw FieldError("export_accelerate", *why);
  if (gpus_per_node < 1) throw FieldError("export_accelerate", "GPUs per node must be positive");
  const std::int64_t shard = l.shard_ranks() / l.cp;  // FSDP shards over dp_shard x cp
  const std::int64_t nodes = (l.gpus() + gpus_per_node - 1) / gpus_per_node;
  std::ostringstream y;
  y << "# Accelerate config written by dtplan for " << m.name << ": FSDP2, tp " << l.tp << " x cp "
    << l.cp << " x dp " << l.dp << " on " << l.gpus() << " GPUs\n"
    << "# the script must use micro-batch " << l.micro_batch << " per data-parallel rank and "
    << "accumulate " << l.micro_batches << " micro-steps (global batch " << l.global_batch()
    << "), sequences of " << l.seq_len << " tokens\n";
  if (l.recompute == Checkpointing::selective) {
    y << "# selective recompute: checkpoint attention in the model (Accelerate checkpoints "
         "whole blocks)\n";
  }
  y << "compute_environment: LOCAL_MACHINE\n"
    << "distributed_type: FSDP\n"
    << "downcast_bf16: 'no'\n"
    << "fsdp_config:\n"
    << "  fsdp_activation_checkpointing: "
    << (l.recompute == Checkpointing::full ? "true" : "false") << "\n"
    << "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
    << "  fsdp_cpu_ram_efficient_loading: true\n"
    << "  fsdp_offload_params: " << (l.offload == Offload::none ? "false" : "true") << "\n"
    << "  fsdp_reshard_after_forward: "
    << (l.sharding == cost::DpSharding::parameters ? "true" : "false") << "\n"
    << "  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
    << "  fsdp_version: 2\n";
  if (nodes > 1) y << "# on node N set machine_rank: N\n";
  y << "machine_rank: 0\n";
  if (nodes > 1) {
    y << "main_process_ip: " << (o.master_addr.empty() ? "MASTER_ADDR_HERE" : o.master_addr) << "\n"
      << "main_process_port: " << o.master_port << "\n";
  }
  y << "main_training_function: main\n"
    << "mixed_precision: "
    << (l.precision == Precision::fp16 ? "fp16"
        : is_mixed(l.precision)        ? "bf16"
                                       : "'no'")
    << "\n"
    << "num_machines: " << nodes << "\n"
    << "num_processes: " << l.gpus() << "\n"
    << "parallelism_config:\n";
  if (l.cp > 1) {
    y << "  parallelism_config_cp_comm_strategy: "
      << (l.cp_comm == cost::CpComm::all_gather ? "allgather" : "alltoall") << "\n";
  }
  y << "  parallelism_config_cp_size: " << l.cp << "\n"
    << "  parallelism_config_dp_replicate_size: " << l.dp * l.cp / l.shard_ranks() << "\n"
    << "  parallelism_config_dp_shard_size: " << shard << "\n"
    << "  parallelism_config_tp_size: " << l.tp << "\n"
    << "rdzv_backend: static\n"
    << "same_network: true\n"
    << "use_cpu: false\n";
  return y.str();
}

}  // namespace dtplan::planner
