// torchtitan job configs for FSDP2 layouts (see export_torchtitan.hpp).
#include "dtplan/planner/export_torchtitan.hpp"

#include <algorithm>
#include <sstream>

#include "dtplan/model/error.hpp"

namespace dtplan::planner {
namespace {

[[noreturn]] void refuse(const std::string& why) {
  throw FieldError("export_torchtitan", why);
}

// torch.distributed.pipelining's schedule names.
std::string schedule_name(cost::PipelineSchedule s) {
  switch (s) {
    case cost::PipelineSchedule::one_f_one_b:
      return "1F1B";
    case cost::PipelineSchedule::interleaved:
      return "Interleaved1F1B";
    case cost::PipelineSchedule::gpipe:
      return "GPipe";
    case cost::PipelineSchedule::zbv:
      return "ZBVZeroBubble";
    default:
      break;
  }
  refuse("schedule " + std::string(cost::name_of(s)) +
         ": PyTorch's pipelining runs 1F1B, Interleaved1F1B, GPipe and ZBVZeroBubble");
}

void check(const cost::Layout3D& l) {
  if (l.framework != cost::Framework::fsdp2) {
    refuse("the layout runs under " + std::string(cost::name_of(l.framework)) +
           ", not FSDP2 ({framework} fsdp2)");
  }
  if (l.tp > 1 && !l.sequence_parallel) {
    refuse("torchtitan's tensor parallelism always shards the norms' sequence: add {sp}");
  }
  if (l.cp > 1 && l.cp_comm == cost::CpComm::a2a) {
    refuse("torchtitan's context parallelism rotates K/V (allgather or alltoall), not Ulysses");
  }
  if (l.shard_ranks() % l.cp != 0) {
    refuse("torchtitan shards over dp_shard x cp; a shard group of " +
           std::to_string(l.shard_ranks()) + " does not divide by cp " + std::to_string(l.cp));
  }
}

// Split points "layers.N" where stages 2.. begin, for an uneven split without interleaving.
std::string split_points(const std::vector<std::int64_t>& layers) {
  std::string out;
  std::int64_t first = 0;
  for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
    first += layers[i];
    out += std::string(out.empty() ? "" : ", ") + "\"layers." + std::to_string(first) + "\"";
  }
  return "[" + out + "]";
}

void pipeline(std::ostream& o, const TransformerSpec& s, const cost::Layout3D& l) {
  o << "pipeline_parallel_degree = " << l.pp << "\n";
  if (l.pp == 1) return;
  o << "pipeline_parallel_schedule = \"" << schedule_name(l.pipeline_schedule()) << "\"\n"
    << "pipeline_parallel_microbatch_size = " << l.micro_batch << "\n";
  const auto layers = cost::layers_per_stage(s, l);
  const bool even =
      std::all_of(layers.begin(), layers.end(), [&](auto n) { return n == layers.front(); });
  if (even) {
    o << "pipeline_parallel_layers_per_stage = " << layers.front() / l.interleave << "\n";
  } else if (l.interleave == 1) {
    o << "pipeline_parallel_split_points = " << split_points(layers) << "\n";
  } else {
    refuse("an uneven split with interleaving: give torchtitan split points by hand");
  }
}

}  // namespace

std::string torchtitan_config(const ModelDesc& m, const cost::Layout3D& l) {
  if (!m.transformer) refuse("model " + m.name + " has no layer shapes");
  check(l);
  const auto& s = *m.transformer;
  const std::int64_t shard = l.shard_ranks() / l.cp;  // FSDP shards over dp_shard x cp
  // Per data-parallel rank per step: every micro-batch (the pipeline's, or accumulated).
  const std::int64_t local = l.pp > 1 ? l.micro_batch * l.micro_batches : l.micro_batch;
  std::ostringstream o;
  o << "# torchtitan job config for " << m.name << " on " << l.gpus() << " GPUs: tp " << l.tp
    << " x cp " << l.cp << " x pp " << l.pp << " x dp " << l.dp << ", FSDP2 (written by dtplan)\n"
    << "# Add [model] (name, flavor, tokenizer), the optimizer's lr, [lr_scheduler] and the\n"
    << "# dataset;\n"
    << "# run: torchrun --nproc_per_node=... -m torchtitan.train --job.config_file FILE\n\n"
    << "[training]\n"
    << "local_batch_size = " << local << "\n"
    << "global_batch_size = " << l.global_batch() << "\n"
    << "seq_len = " << l.seq_len << "\n"
    << "mixed_precision_param = \"" << (is_mixed(l.precision) ? "bfloat16" : "float32") << "\"\n"
    << "mixed_precision_reduce = \"float32\"\n"
    // FSDP2's CPUOffloadPolicy on parameters, gradients and optimizer states.
    << "enable_cpu_offload = " << (l.offload == Offload::none ? "false" : "true") << "\n\n"
    << "[optimizer]\n"
    << "name = \"" << (l.optimizer == Optimizer::adam ? "Adam" : "AdamW") << "\"\n"
    << "implementation = \""
    << (l.optimizer_impl == OptimizerImpl::foreach    ? "foreach"
        : l.optimizer_impl == OptimizerImpl::for_loop ? "for-loop"
                                                      : "fused")
    << "\"\n\n"
    << "[parallelism]\n"
    << "data_parallel_replicate_degree = " << l.dp / shard << "\n"
    << "data_parallel_shard_degree = " << shard << "\n"
    << "fsdp_reshard_after_forward = \""
    << (l.sharding == cost::DpSharding::parameters ? "always" : "never") << "\"\n"
    << "tensor_parallel_degree = " << l.tp << "\n"
    << "context_parallel_degree = " << l.cp << "\n";
  // EP borrows its ranks from FSDP and TP (torchtitan's parallel_dims.py).
  if (s.moe.active()) o << "expert_parallel_degree = " << l.ep << "\n";
  if (l.cp > 1) {
    o << "context_parallel_rotate_method = \""
      << (l.cp_comm == cost::CpComm::all_gather ? "allgather" : "alltoall") << "\"\n";
  }
  pipeline(o, s, l);
  // torchao's float8 Linears (the job config of the TOML era): tensorwise or rowwise scales.
  if (l.fp8 != Fp8Recipe::none) {
    o << "\n[model]\n"
      << "converters = [\"quantize.linear.float8\"]\n\n"
      << "[quantize.linear.float8]\n"
      << "recipe_name = \"" << name_of(l.fp8) << "\"\n"
      << "filter_fqns = [\"output\"]\n";  // the LM head stays bf16, as priced
  }
  // torchtitan spells full checkpointing of every Nth block as its layer-wise selective mode.
  const bool every_nth = l.recompute == Checkpointing::full && l.checkpoint_every > 1;
  o << "\n[activation_checkpoint]\n"
    << "mode = \"" << (every_nth ? "selective" : name_of(l.recompute)) << "\"\n";
  if (every_nth) o << "selective_ac_option = \"" << l.checkpoint_every << "\"\n";
  if (l.recompute == Checkpointing::selective) o << "selective_ac_option = \"op\"\n";
  return o.str();
}

}  // namespace dtplan::planner
