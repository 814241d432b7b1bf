// Layouts from their names (see layout_spec.hpp).
#include "dtplan/planner/layout_spec.hpp"

#include <algorithm>
#include <utility>

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan::planner {

bool is_layout_framework(std::string_view strategy) {
  return strategy == "megatron" || strategy == "fsdp2";
}

bool wants_layout(const LayoutSpec& s, std::string_view strategy) {
  return s.tp != 1 || s.pp != 1 || s.cp != 1 || s.ep != 1 || s.etp != 0 || s.capacity_factor != 0 ||
         s.interleave != 1 || s.sequence_parallel || !s.schedule.empty() || !s.pp_layers.empty() ||
         !s.framework.empty() || !s.sharding.empty() || s.dp_shard != 0 || s.overlap_ep_comm ||
         s.deepep || s.overlap_grad_reduce || s.overlap_param_gather || s.ddp_bucket_size != 0 ||
         s.grad_reduce_in_bf16 || s.fp8_param_gather || s.tp_comm_overlap ||
         !s.recompute_modules.empty() || is_layout_framework(strategy);
}

namespace {

// A name parsed for `field`: an unknown name is a FieldError naming the field.
template <class Parse>
auto parsed(const char* field, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    throw FieldError(field, e.what());
  }
}

// The spec without its recompute modules.
LayoutSpec sizes_only(LayoutSpec s) {
  s.recompute_modules.clear();
  return s;
}

// The first field of `s` that asks for a layout (the spec holds one: wants_layout), in the
// order the CLI lists them.
std::string first_layout_field(const LayoutSpec& s) {
  const std::pair<bool, const char*> fields[] = {
      {s.tp != 1, "tp"},
      {s.pp != 1, "pp"},
      {s.cp != 1, "cp"},
      {s.ep != 1, "ep"},
      {s.etp != 0, "etp"},
      {s.capacity_factor != 0, "capacity_factor"},
      {s.interleave != 1, "interleave"},
      {s.sequence_parallel, "sequence_parallel"},
      {!s.schedule.empty(), "schedule"},
      {!s.pp_layers.empty(), "pp_layers"},
      {!s.framework.empty(), "framework"},
      {!s.sharding.empty(), "sharding"},
      {s.dp_shard != 0, "dp_shard"},
      {s.overlap_ep_comm, "overlap_ep_comm"},
      {s.deepep, "deepep"},
      {s.overlap_grad_reduce, "overlap_grad_reduce"},
      {s.overlap_param_gather, "overlap_param_gather"},
      {s.ddp_bucket_size != 0, "ddp_bucket_size"},
      {s.grad_reduce_in_bf16, "grad_reduce_in_bf16"},
      {s.fp8_param_gather, "fp8_param_gather"},
      {s.tp_comm_overlap, "tp_comm_overlap"},
  };
  for (const auto& [set, field] : fields) {
    if (set) return field;
  }
  return "tp";
}

cost::Framework framework_of(const LayoutSpec& s, std::string_view strategy) {
  if (!strategy.empty() && !is_layout_framework(strategy)) {
    auto known = strategy_names();
    if (std::find(known.begin(), known.end(), strategy) == known.end()) {
      known.insert(known.end(), {"megatron", "fsdp2"});
      throw FieldError("strategies", unknown_name_message("strategy", strategy, known));
    }
    // Recompute modules alone make a layout of the request: name them, not the sizes.
    if (!s.recompute_modules.empty() && !wants_layout(sizes_only(s), "")) {
      throw FieldError("recompute_modules",
                       "Megatron-LM's; {strategies} " + std::string(strategy) +
                           " is a data-parallel strategy: run a Megatron-LM layout ({strategies} "
                           "megatron)");
    }
    const std::string field = first_layout_field(s);
    throw FieldError("strategies", std::string(strategy) + " is a data-parallel strategy; {" +
                                       field +
                                       "} belongs to a layout ({tp}, {pp}, {cp}, ...), which "
                                       "runs under megatron or fsdp2");
  }
  if (!s.framework.empty() && is_layout_framework(strategy) && s.framework != strategy) {
    throw FieldError("framework", s.framework + " and {strategies} " + std::string(strategy) +
                                      " both name the framework: name it once");
  }
  if (!s.framework.empty()) return parsed("framework", s.framework, cost::parse_framework);
  return is_layout_framework(strategy) ? cost::parse_framework(strategy)
                                       : cost::Framework::megatron;
}

void check_size(const char* field, std::int64_t value) {
  if (value < 1) {
    throw FieldError(field, std::to_string(value) + " is not a size: sizes are positive integers");
  }
}

void check_sizes(const LayoutSpec& s) {
  check_size("tp", s.tp);
  check_size("pp", s.pp);
  check_size("cp", s.cp);
  check_size("interleave", s.interleave);
  check_size("ep", s.ep);
  if (s.etp < 0) {
    throw FieldError("etp", std::to_string(s.etp) +
                                " is not a size: a positive integer, or 0 for the tensor-parallel "
                                "size");
  }
  if (s.dp_shard < 0) {
    throw FieldError("dp_shard", std::to_string(s.dp_shard) +
                                     " is not a size: a positive "
                                     "integer, or 0 for all dp x cp");
  }
  if (s.cp == 1 && s.cp_comm != "p2p") {
    throw FieldError("cp_comm", s.cp_comm + " needs {cp} > 1 (no context parallelism here)");
  }
  if (!s.schedule.empty() && s.pp == 1) {
    throw FieldError("schedule", s.schedule + " needs {pp} > 1 (no pipeline here)");
  }
  if (s.sequence_parallel && s.tp == 1) {
    throw FieldError("sequence_parallel",
                     "needs {tp} > 1 (it splits the tensor-parallel "
                     "activations)");
  }
}

// Megatron-LM's distributed optimizer; FSDP2 as torchtitan's reshard_after_forward_policy
// "default" sets it: resharded after forward, kept gathered under pipeline parallelism (its
// micro-batches would otherwise gather every block again in each forward).
cost::DpSharding default_sharding(cost::Framework f, std::int64_t pp) {
  if (f == cost::Framework::megatron) return cost::DpSharding::optimizer;
  return pp > 1 ? cost::DpSharding::gradients : cost::DpSharding::parameters;
}

}  // namespace

std::int64_t layout_dp(const LayoutSpec& s, std::int64_t gpus) {
  check_sizes(s);
  const std::int64_t model_parallel = s.tp * s.cp * s.pp;
  if (gpus % model_parallel != 0) {
    throw FieldError("gpus", std::to_string(gpus) + " is not divisible by {tp} x {cp} x {pp} = " +
                                 std::to_string(model_parallel));
  }
  return gpus / model_parallel;
}

cost::Layout3D layout_of(const LayoutSpec& s, std::string_view strategy, const ModelDesc& m,
                         const TrainingConfig& c, std::int64_t micro_batches) {
  if (!m.transformer) {
    throw FieldError("tp", "model " + m.name + " has no layer shapes: a layout needs them");
  }
  if (c.precision == Precision::amp_fp16 || c.precision == Precision::amp_bf16) {
    throw FieldError("precision", std::string(name_of(c.precision)) +
                                      " (torch.autocast) is modelled for dp and ddp; layouts "
                                      "run fp32, fp16 or bf16 mixed precision");
  }
  cost::Layout3D l;
  l.dp = layout_dp(s, c.dp_size);
  l.tp = s.tp;
  l.pp = s.pp;
  l.cp = s.cp;
  l.ep = s.ep;
  l.etp = s.etp;
  l.capacity_factor = s.capacity_factor;
  l.overlap_ep_comm = s.overlap_ep_comm;
  l.deepep = s.deepep;
  l.overlap_grad_reduce = s.overlap_grad_reduce;
  l.overlap_param_gather = s.overlap_param_gather;
  l.ddp_bucket_params = s.ddp_bucket_size;
  l.grad_reduce_bf16 = s.grad_reduce_in_bf16;
  l.fp8_param_gather = s.fp8_param_gather;
  l.tp_comm_overlap = s.tp_comm_overlap;
  l.cp_comm = parsed("cp_comm", s.cp_comm, cost::parse_cp_comm);
  l.framework = framework_of(s, strategy);
  if (c.layer_kernels == LayerKernels::eager &&
      (l.framework != cost::Framework::fsdp2 || l.tp > 1)) {
    throw FieldError("layer-kernels", std::string(kEagerLayouts));
  }
  l.layer_kernels = c.layer_kernels;
  l.sharding = !s.sharding.empty() ? parsed("sharding", s.sharding, cost::parse_dp_sharding)
                                   : default_sharding(l.framework, l.pp);
  l.shard_group = s.dp_shard;
  l.interleave = s.interleave;
  if (!s.schedule.empty()) l.schedule = parsed("schedule", s.schedule, cost::parse_schedule);
  l.sequence_parallel = s.sequence_parallel;
  l.stage_layers = s.pp_layers;
  l.micro_batch = c.micro_batch;
  l.micro_batches = micro_batches;
  l.seq_len = c.seq_len > 0 ? c.seq_len : m.transformer->max_positions;
  l.recompute = c.checkpointing;
  l.checkpoint_every = c.checkpoint_every;
  if (!s.recompute_modules.empty()) {
    l.recompute_modules = parsed("recompute_modules", s.recompute_modules, parse_recompute_modules);
  }
  l.attention = c.attention;
  l.attention_kernel = c.attention_kernel;
  l.precision = c.precision;
  l.fp8 = c.fp8;
  l.optimizer = c.optimizer;
  l.optimizer_impl = c.optimizer_impl;
  l.zero_grad = c.zero_grad;
  l.offload = c.offload;
  cost::check_layout(*m.transformer, l, c.gpus_per_node);
  l.stage_layers = cost::layers_per_stage(*m.transformer, l);  // the split, resolved
  return l;
}

}  // namespace dtplan::planner
