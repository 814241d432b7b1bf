// Common parts of JSON reports.
#include "json_output.hpp"

#include <cmath>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/eager_layers.hpp"
#include "format.hpp"

namespace dtplan::cli {

namespace {

void check_finite(const nlohmann::json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    throw NonFiniteInReport(j.get<double>());
  }
  if (j.is_structured()) {
    for (const auto& item : j)
      check_finite(item);
  }
}

}  // namespace

std::string report_text(const nlohmann::json& report) {
  check_finite(report);
  return report.dump(2) + "\n";
}

nlohmann::json report_preamble(const std::string& command, const std::vector<std::string>& args) {
  return {
      {"schema_version", 1},
      {"generated_by",
       {{"tool", "dtplan"}, {"version", DTPLAN_VERSION}, {"command", command}, {"args", args}}}};
}

nlohmann::json model_json(const ModelDesc& m) {
  nlohmann::json components = nlohmann::json::object();
  for (const auto& c : m.components)
    components[c.name] = c.params;
  nlohmann::json j = {
      {"name", m.name}, {"origin", m.origin}, {"params", m.params}, {"components", components}};
  if (!m.reference.empty()) j["reference"] = m.reference;
  if (m.transformer) {
    const auto& t = *m.transformer;
    j["kind"] = "transformer";
    j["shape"] = {{"model_type", t.model_type},
                  {"hidden", t.hidden_size},
                  {"layers", t.num_layers},
                  {"heads", t.num_heads},
                  {"kv_heads", t.num_kv_heads},
                  {"head_dim", t.head_dim},
                  {"ffn", t.ffn_size},
                  {"vocab", t.vocab_size},
                  {"max_positions", t.max_positions},
                  {"mlp", t.mlp == MlpKind::swiglu  ? "swiglu"
                          : t.mlp == MlpKind::geglu ? "geglu"
                                                    : "gelu"},
                  {"positions", t.positions == PositionKind::rotary ? "rotary" : "learned"},
                  {"tied_embeddings", t.tied_embeddings},
                  {"qk_norm", t.qk_norm},
                  {"sliding_window", t.sliding_window},
                  {"windowed_layers", t.windowed_layers(t.num_layers)},
                  {"norms_per_layer", t.norms_per_layer},
                  {"attention_sinks", t.attention_sinks},
                  {"attn_logit_softcap", t.attn_logit_softcap},
                  {"final_logit_softcap", t.final_logit_softcap},
                  {"v_head_dim", t.v_dim()},
                  {"mtp_layers", t.mtp_layers}};
    if (t.mla.active()) {
      j["shape"]["latent_attention"] = {{"q_lora_rank", t.mla.q_lora_rank},
                                        {"kv_lora_rank", t.mla.kv_lora_rank},
                                        {"qk_rope_head_dim", t.mla.qk_rope_head_dim}};
    }
    j["active_params"] = count_parameters(t).active;
    if (t.moe.active()) {
      j["shape"]["moe"] = {{"experts", t.moe.experts},
                           {"experts_per_token", t.moe.experts_per_token},
                           {"expert_ffn", t.moe.expert_ffn_size},
                           {"shared_ffn", t.moe.shared_ffn_size},
                           {"shared_expert_gate", t.moe.shared_expert_gate},
                           {"first_dense_layers", t.moe.first_dense_layers},
                           {"groups", t.moe.groups},
                           {"groups_per_token", t.moe.groups_per_token}};
    }
  } else if (m.layers) {
    j["kind"] = "layer_list";
    auto layers = nlohmann::json::array();
    for (const auto& l : m.layers->layers) {
      layers.push_back({{"type", l.type},
                        {"label", l.label},
                        {"params", l.params},
                        {"input_shape", l.input_shape},
                        {"output_shape", l.output_shape},
                        {"output_elements", element_count(l.output_shape)}});
    }
    j["input_shape"] = m.layers->input_shape;
    j["layers"] = layers;
  } else {
    j["kind"] = "param_count";
  }
  return j;
}

namespace {
// How the step was priced: fused, foreach or for-loop for Adam and AdamW, null for the others
// (priced as one fused pass whatever runs them).
nlohmann::json optimizer_impl_json(const TrainingConfig& c) {
  const auto impl = cost::priced_optimizer_impl(c);
  return impl ? nlohmann::json(name_of(*impl)) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json training_json(const TrainingConfig& c) {
  return {{"precision", name_of(c.precision)},
          {"optimizer", name_of(c.optimizer)},
          {"optimizer_impl", optimizer_impl_json(c)},
          {"layer_kernels", cost::eager_layers(c).has_value() ? "eager" : "fused"},
          {"gpus", c.dp_size},
          {"gpus_per_node", c.gpus_per_node},
          {"micro_batch", c.micro_batch},
          {"seq_len", c.seq_len == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.seq_len)},
          {"checkpointing", name_of(c.checkpointing)},
          {"attention", name_of(c.attention)},
          {"attention_kernel", name_of(c.attention_kernel)},
          {"offload", name_of(c.offload)},
          {"grad_bucket_view", c.grad_bucket_view},
          {"zero_grad", name_of(c.zero_grad)},
          {"bucket_cap_bytes", c.bucket_cap_bytes},
          {"fp32_grad_accumulation", c.fp32_grad_accumulation},
          {"grad_accum", c.grad_accum},
          {"no_sync", c.no_sync}};
}

nlohmann::json overheads_json(const cost::OverheadConstants& k) {
  return {{"cuda_context_bytes", k.cuda_context_bytes},
          {"allocator_slack_fraction", k.allocator_slack_fraction},
          {"nccl_channels", k.nccl_channels},
          {"nccl_connections_per_channel", k.nccl_connections_per_channel},
          {"nccl_buffer_bytes_per_connection", k.nccl_buffer_bytes_per_connection},
          {"zero_reduce_bucket_elements", k.zero_reduce_bucket_elements},
          {"zero3_max_reuse_distance_elements", k.zero3_max_reuse_distance_elements},
          {"adam8bit_block_elements", k.adam8bit_block_elements}};
}

}  // namespace dtplan::cli
