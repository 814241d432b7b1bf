// Layouts and plan entries as JSON (see layout_json.hpp).
#include "dtplan/planner/layout_json.hpp"

#include <algorithm>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/strategy_traits.hpp"

namespace dtplan::planner {

nlohmann::json memory_details_json(const cost::Memory3D& m) {
  return {{"activations", cost::terms_json(m.activation_terms)},
          {"buffers", cost::terms_json(m.buffer_terms)},
          {"overhead", cost::terms_json(m.overhead_terms)}};
}

nlohmann::json memory_explain_json(const cost::Memory3D& m) {
  nlohmann::json explain = nlohmann::json::object();
  for (const auto& [component, text] : m.explain)
    explain[component] = text;
  return explain;
}

namespace {

// What selective recomputation rebuilds ("none" under other modes).
std::string recompute_modules_text(const cost::Layout3D& l) {
  return l.recompute == Checkpointing::selective ? text_of(l.recompute_modules) : "none";
}

}  // namespace

nlohmann::json to_json(const Candidate3D& c) {
  const auto& l = c.layout;
  const auto& t = c.time;
  auto collectives = nlohmann::json::array();  // the data-parallel ones, as a strategy's
  for (const auto& op : t.dp_ops)
    collectives.push_back(cost::to_json(op));
  return {{"tp", l.tp},
          {"pp", l.pp},
          {"dp", l.dp},
          {"cp", l.cp},
          {"ep", l.ep},
          {"etp", l.expert_tp()},
          {"expert_dp", l.expert_dp()},
          {"overlap_ep_comm", l.overlap_ep_comm},
          {"deepep", l.deepep},
          {"overlap_grad_reduce", l.overlap_grad_reduce},
          {"overlap_param_gather", l.overlap_param_gather},
          {"ddp_bucket_size", l.ddp_bucket_params},
          {"grad_reduce_in_bf16", l.grad_reduce_bf16},
          {"fp8_param_gather", l.fp8_param_gather},
          {"tp_comm_overlap", l.tp_comm_overlap},
          {"framework", std::string(name_of(l.framework))},
          {"sharding", std::string(name_of(l.sharding))},
          {"shard_ranks", l.shard_ranks()},
          {"cp_comm", l.cp > 1 ? std::string(name_of(l.cp_comm)) : "none"},
          {"interleave", l.interleave},
          {"schedule", l.pp > 1 ? std::string(name_of(l.pipeline_schedule())) : "none"},
          {"stage_layers", l.stage_layers},
          {"heaviest_stage", c.memory.stage},
          {"precision", std::string(name_of(l.precision))},
          {"fp8_recipe", std::string(name_of(l.fp8))},
          {"optimizer", std::string(name_of(l.optimizer))},
          {"attention", std::string(name_of(l.attention))},
          {"attention_kernel", std::string(name_of(l.attention_kernel))},
          {"offload", std::string(name_of(l.offload))},
          {"sequence_parallel", l.sequence_parallel},
          {"micro_batch", l.micro_batch},
          {"micro_batches", l.micro_batches},
          {"recompute", std::string(name_of(l.recompute))},
          {"checkpoint_every", l.checkpoint_every},
          {"recompute_modules", recompute_modules_text(l)},
          {"memory_bytes", c.memory.total().value},
          {"memory",
           {{"weights", c.memory.weights.value},
            {"master_weights", c.memory.master_weights.value},
            {"gradients", c.memory.gradients.value},
            {"optimizer_states", c.memory.optimizer_states.value},
            {"activations", c.memory.activations.value},
            {"logits", c.memory.logits.value},
            {"buffers", c.memory.buffers.value},
            {"overhead", c.memory.overhead.value}}},
          {"step_time_s", t.step_s},
          {"samples_per_s", t.samples_per_s},
          {"tokens_per_s", t.tokens_per_s},
          {"mfu", t.mfu},
          {"time",
           {{"compute_per_microbatch_s", t.compute_s},
            {"tp_comm_per_microbatch_s", t.tp_comm_s},
            {"cp_comm_per_microbatch_s", t.cp_comm_s},
            {"ep_comm_per_microbatch_s", t.ep_comm_s},
            {"fsdp_comm_per_microbatch_s", t.fsdp_comm_s},
            {"p2p_per_microbatch_s", t.p2p_s},
            {"pipeline_s", t.pipeline_s},
            {"bubble_s", t.bubble_s},
            {"dp_sync_s", t.dp_sync_s},
            {"host_transfer_s", t.host_transfer_s},
            {"optimizer_s", t.optimizer_s}}},
          {"collectives", collectives}};
}

std::string framework_of(Strategy s) {
  return std::string(cost::traits_of(s).framework);
}

std::string sharding_of(Strategy s) {
  const auto& t = cost::traits_of(s);
  if (t.shards_weights) return "parameters";
  if (t.shards_gradients) return "gradients";
  return t.shards_optimizer ? "optimizer" : "none";
}

namespace {

nlohmann::json data_parallel_layout(const Candidate& c, std::int64_t gpus_per_node) {
  const auto& t = cost::traits_of(c.strategy);
  const bool sharded = sharding_of(c.strategy) != "none";
  const std::int64_t shard = !sharded ? 1 : t.hybrid ? std::min(c.dp, gpus_per_node) : c.dp;
  return {{"family", std::string(name_of(c.strategy))},
          {"framework", framework_of(c.strategy)},
          {"sharding", sharding_of(c.strategy)},
          {"shard_ranks", shard},
          {"dp", c.dp},
          {"tp", 1},
          {"pp", 1},
          {"cp", 1},
          {"ep", 1},
          {"etp", 1},
          {"cp_comm", "none"},
          {"interleave", 1},
          {"schedule", "none"},
          {"stage_layers", nlohmann::json::array()},
          {"sequence_parallel", false},
          {"micro_batch", c.micro_batch},
          {"grad_accum", c.grad_accum},
          {"no_sync", c.no_sync},
          {"recompute", std::string(name_of(c.checkpointing))},
          {"offload", std::string(name_of(c.offload))},
          {"precision", std::string(name_of(c.precision))}};
}

nlohmann::json model_parallel_layout(const cost::Layout3D& l) {
  return {{"family", std::string(name_of(l.framework))},
          {"framework", std::string(name_of(l.framework))},
          {"sharding", std::string(name_of(l.sharding))},
          {"shard_ranks", l.shard_ranks()},
          {"dp", l.dp},
          {"tp", l.tp},
          {"pp", l.pp},
          {"cp", l.cp},
          {"ep", l.ep},
          {"etp", l.expert_tp()},
          {"overlap_ep_comm", l.overlap_ep_comm},
          {"deepep", l.deepep},
          {"overlap_grad_reduce", l.overlap_grad_reduce},
          {"overlap_param_gather", l.overlap_param_gather},
          {"ddp_bucket_size", l.ddp_bucket_params},
          {"grad_reduce_in_bf16", l.grad_reduce_bf16},
          {"fp8_param_gather", l.fp8_param_gather},
          {"tp_comm_overlap", l.tp_comm_overlap},
          {"cp_comm", l.cp > 1 ? std::string(name_of(l.cp_comm)) : "none"},
          {"interleave", l.interleave},
          {"schedule", l.pp > 1 ? std::string(name_of(l.pipeline_schedule())) : "none"},
          {"stage_layers", l.stage_layers},
          {"sequence_parallel", l.sequence_parallel},
          {"micro_batch", l.micro_batch},
          {"grad_accum", l.micro_batches},
          // Megatron-LM reduces gradients once, after the last micro-batch; FSDP2 (as
          // torchtitan runs it) reduce-scatters them in every micro-batch's backward.
          {"no_sync", l.framework == cost::Framework::megatron},
          {"recompute", std::string(name_of(l.recompute))},
          {"checkpoint_every", l.checkpoint_every},
          {"recompute_modules", recompute_modules_text(l)},
          {"attention", std::string(name_of(l.attention))},
          {"attention_kernel", std::string(name_of(l.attention_kernel))},
          {"offload", std::string(name_of(l.offload))},
          {"precision", std::string(name_of(l.precision))},
          {"optimizer", std::string(name_of(l.optimizer))}};
}

}  // namespace

nlohmann::json layout_json(const LayoutChoice& c, std::int64_t gpus_per_node) {
  return c.data_parallel ? data_parallel_layout(*c.data_parallel, gpus_per_node)
                         : model_parallel_layout(c.layout->layout);
}

}  // namespace dtplan::planner
