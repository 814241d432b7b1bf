// The layout flags (see layout_options.hpp).
#include "layout_options.hpp"

#include "dtplan/model/error.hpp"

namespace dtplan::cli {

void add_layout_options(CLI::App& cmd, LayoutOptions& o) {
  cmd.add_option("--tp", o.tp, "tensor-parallel size (a layout: dp = GPUs / (tp x cp x pp))")
      ->capture_default_str();
  cmd.add_option("--pp", o.pp, "pipeline-parallel stages")->capture_default_str();
  cmd.add_option("--cp", o.cp,
                 "context-parallel size: ranks that share each sequence (dp = GPUs / (tp x cp "
                 "x pp))")
      ->capture_default_str();
  cmd.add_option("--cp-comm", o.cp_comm,
                 "context-parallel K/V exchange: p2p (ring attention)|all_gather|a2a (Ulysses)")
      ->capture_default_str();
  cmd.add_option("--interleave", o.interleave, "model chunks per GPU (interleaved 1F1B)")
      ->capture_default_str();
  cmd.add_flag("--sp", o.sequence_parallel, "sequence parallelism (needs --tp > 1)");
  cmd.add_option("--pp-layers", o.pp_layers,
                 "layers of each pipeline stage, first to last, e.g. 7,8,8,7 (default: even, "
                 "or one fewer on the first and last stage as Megatron-LM splits)")
      ->delimiter(',');
  cmd.add_option("--schedule", o.schedule,
                 "pipeline schedule: 1f1b|interleaved|gpipe|zb-h1|zb-h2|zbv (default: 1f1b, "
                 "interleaved with --interleave > 1)");
  cmd.add_option("--framework", o.framework,
                 "who runs the layout: megatron (distributed optimizer, the default) or fsdp2 "
                 "(torchtitan: FSDP2 per block); also --strategy megatron|fsdp2");
  cmd.add_option("--sharding", o.sharding,
                 "model states sharded over dp x cp: none|optimizer|gradients|parameters "
                 "(default: optimizer under megatron, parameters under fsdp2)");
  cmd.add_option("--dp-shard", o.dp_shard,
                 "ranks each state is sharded over (hybrid sharding; default: all dp x cp)");
}

bool is_layout_framework(const std::string& strategy) {
  return strategy == "megatron" || strategy == "fsdp2";
}

bool wants_layout(const LayoutOptions& o, const std::string& strategy) {
  return o.tp != 1 || o.pp != 1 || o.cp != 1 || o.interleave != 1 || o.sequence_parallel ||
         !o.schedule.empty() || !o.pp_layers.empty() || !o.framework.empty() ||
         !o.sharding.empty() || o.dp_shard != 0 || is_layout_framework(strategy);
}

namespace {

cost::Framework framework_of(const LayoutOptions& o, const std::string& strategy) {
  if (!o.framework.empty() && is_layout_framework(strategy) && o.framework != strategy) {
    throw Error("--framework " + o.framework + " and --strategy " + strategy +
                ": name the framework once");
  }
  if (!o.framework.empty()) return cost::parse_framework(o.framework);
  return is_layout_framework(strategy) ? cost::parse_framework(strategy)
                                       : cost::Framework::megatron;
}

void check_sizes(const LayoutOptions& o) {
  if (o.tp < 1 || o.pp < 1 || o.cp < 1 || o.interleave < 1) {
    throw Error("--tp " + std::to_string(o.tp) + ", --pp " + std::to_string(o.pp) + ", --cp " +
                std::to_string(o.cp) + ", --interleave " + std::to_string(o.interleave) +
                ": sizes are positive");
  }
  if (o.dp_shard < 0) throw Error("--dp-shard " + std::to_string(o.dp_shard) + ": a positive size");
  if (o.cp == 1 && o.cp_comm != "p2p") throw Error("--cp-comm " + o.cp_comm + ": needs --cp > 1");
  if (!o.schedule.empty() && o.pp == 1) {
    throw Error("--schedule " + o.schedule + ": needs --pp > 1");
  }
}

}  // namespace

std::int64_t layout_dp(const LayoutOptions& o, std::int64_t gpus) {
  check_sizes(o);
  const std::int64_t model_parallel = o.tp * o.cp * o.pp;
  if (gpus % model_parallel != 0) {
    throw Error("--gpus " + std::to_string(gpus) +
                ": not divisible by tp x cp x pp = " + std::to_string(model_parallel));
  }
  return gpus / model_parallel;
}

cost::Layout3D layout_of(const LayoutOptions& o, const std::string& strategy, const ModelDesc& m,
                         const TrainingConfig& c, std::int64_t micro_batches) {
  if (!m.transformer) throw Error("--tp/--pp/--cp: model " + m.name + " has no layer shapes");
  cost::Layout3D l;
  l.dp = layout_dp(o, c.dp_size);
  l.tp = o.tp;
  l.pp = o.pp;
  l.cp = o.cp;
  l.cp_comm = cost::parse_cp_comm(o.cp_comm);
  l.framework = framework_of(o, strategy);
  l.sharding = !o.sharding.empty()                     ? cost::parse_dp_sharding(o.sharding)
               : l.framework == cost::Framework::fsdp2 ? cost::DpSharding::parameters
                                                       : cost::DpSharding::optimizer;
  l.shard_group = o.dp_shard;
  l.interleave = o.interleave;
  if (!o.schedule.empty()) l.schedule = cost::parse_schedule(o.schedule);
  l.sequence_parallel = o.sequence_parallel;
  l.stage_layers = o.pp_layers;
  l.micro_batch = c.micro_batch;
  l.micro_batches = micro_batches;
  l.seq_len = c.seq_len > 0 ? c.seq_len : m.transformer->max_positions;
  l.recompute = c.checkpointing;
  l.precision = c.precision;
  cost::check_layout(*m.transformer, l, c.gpus_per_node);
  l.stage_layers = cost::layers_per_stage(*m.transformer, l);  // the split, resolved
  return l;
}

}  // namespace dtplan::cli
