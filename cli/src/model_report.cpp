// Text layout of a model description.
#include "model_report.hpp"

#include <sstream>

#include "dtplan/cost/activations.hpp"
#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

std::string percent(std::int64_t part, std::int64_t whole) {
  return fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) + "%";
}

std::string mlp_text(MlpKind k) {
  switch (k) {
    case MlpKind::swiglu:
      return " (SwiGLU: gate, up, down)";
    case MlpKind::geglu:
      return " (GeGLU: gate, up, down)";
    case MlpKind::gelu:
      break;
  }
  return " (GELU MLP)";
}

std::string window_text(const TransformerSpec& t) {
  std::string out = std::to_string(t.sliding_window) + " tokens";
  if (t.full_attention_every > 0) {
    out += " on " + std::to_string(t.windowed_layers(t.num_layers)) + " of " +
           std::to_string(t.num_layers) + " layers (full attention every " +
           std::to_string(t.full_attention_every) + ")";
  }
  return out;
}

std::string cap_text(double cap) {
  if (cap <= 0) return "none";
  std::ostringstream o;
  o << cap;
  return o.str();
}

void print_transformer_shape(std::ostream& out, const TransformerSpec& t) {
  TextTable s({"shape", ""});
  s.add_row({"model_type", t.model_type});
  s.add_row({"layers", std::to_string(t.num_layers)});
  s.add_row({"hidden", std::to_string(t.hidden_size)});
  s.add_row({"heads / kv heads / head dim", std::to_string(t.num_heads) + " / " +
                                                std::to_string(t.num_kv_heads) + " / " +
                                                std::to_string(t.head_dim)});
  if (!t.moe.active()) s.add_row({"ffn", std::to_string(t.ffn_size) + mlp_text(t.mlp)});
  if (t.mla.active()) {
    s.add_row({"latent attention",
               "query rank " +
                   (t.mla.q_lora_rank > 0 ? std::to_string(t.mla.q_lora_rank) : "full") +
                   ", key/value rank " + std::to_string(t.mla.kv_lora_rank) + " + rotary " +
                   std::to_string(t.mla.qk_rope_head_dim) + ", value heads " +
                   std::to_string(t.v_dim())});
  }
  if (t.moe.active() && t.moe.first_dense_layers > 0) {
    s.add_row({"dense first layers",
               std::to_string(t.moe.first_dense_layers) + ", ffn " + std::to_string(t.ffn_size)});
  }
  if (t.moe.active()) {
    std::string routing = std::to_string(t.moe.experts_per_token) + " per token";
    if (t.moe.groups_per_token > 0) {
      routing += " from at most " + std::to_string(t.moe.groups_per_token) + " of " +
                 std::to_string(t.moe.groups) + " groups";
    }
    s.add_row({"experts", std::to_string(t.moe.experts) + " experts of ffn " +
                              std::to_string(t.moe.expert_ffn_size) + ", " + routing});
    if (t.moe.shared_ffn_size > 0)
      s.add_row({"shared expert", std::to_string(t.moe.shared_ffn_size) +
                                      (t.moe.shared_expert_gate ? " (gated)" : "")});
  }
  if (t.sliding_window > 0) s.add_row({"sliding window", window_text(t)});
  if (t.norms_per_layer != 2)
    s.add_row({"norms per block", std::to_string(t.norms_per_layer) + " (sub-layer outputs too)"});
  if (t.attention_sinks) s.add_row({"attention sinks", "one learned logit per head"});
  if (t.mtp_layers > 0)
    s.add_row({"multi-token prediction", std::to_string(t.mtp_layers) + " module(s)"});
  if (t.attn_logit_softcap > 0 || t.final_logit_softcap > 0) {
    s.add_row({"soft-capping", "scores " + cap_text(t.attn_logit_softcap) + ", logits " +
                                   cap_text(t.final_logit_softcap)});
  }
  s.add_row({"vocabulary",
             std::to_string(t.vocab_size) +
                 (t.head == HeadKind::causal_lm && !t.tied_embeddings ? ", untied LM head" : "")});
  s.add_row(
      {"max positions", std::to_string(t.max_positions) +
                            (t.positions == PositionKind::rotary ? " (rotary)" : " (learned)")});
  s.add_row({"norm", t.norm == NormKind::rmsnorm ? "RMSNorm" : "LayerNorm"});
  out << '\n';
  s.print(out, {1});
}

void print_layers(std::ostream& out, const LayerListModel& layers) {
  TextTable t({"#", "layer", "output shape", "activation elements", "params"});
  t.add_row({"", "input", format_shape(layers.input_shape),
             format_thousands(element_count(layers.input_shape)), ""});
  for (std::size_t i = 0; i < layers.layers.size(); ++i) {
    const auto& l = layers.layers[i];
    t.add_row({std::to_string(i), l.label, format_shape(l.output_shape),
               format_thousands(element_count(l.output_shape)), format_thousands(l.params)});
  }
  out << '\n';
  t.print(out, {1, 2});
  out << "\n  activation elements are per sample; shapes exclude the batch dimension\n";
}

}  // namespace

void print_model_detail(std::ostream& out, const ModelDesc& m) {
  out << m.name << ": " << format_thousands(m.params) << " parameters (" << m.origin << ")\n";
  if (m.transformer && m.transformer->moe.active()) {
    const auto active = count_parameters(*m.transformer).active;
    out << "  active per token: " << format_thousands(active) << " (" << percent(active, m.params)
        << "; the input embedding included, which model cards often leave out)\n";
  }
  if (m.transformer && m.transformer->mtp_layers > 0) {
    const auto mtp = count_parameters(*m.transformer).mtp;
    out << "  of which multi-token prediction: " << format_thousands(mtp)
        << "; the model without it: " << format_thousands(m.params - mtp)
        << " (checkpoints store the MTP module with its own embedding and head copies)\n";
  }
  if (!m.reference.empty()) out << "  reference: " << m.reference << '\n';
  TextTable c({"component", "parameters", "share"});
  for (const auto& comp : m.components) {
    c.add_row({comp.name, format_thousands(comp.params), percent(comp.params, m.params)});
  }
  out << '\n';
  c.print(out);
  if (m.transformer) print_transformer_shape(out, *m.transformer);
  if (m.layers) {
    print_layers(out, *m.layers);
    for (const auto p : {Precision::fp32, Precision::bf16}) {
      TrainingConfig config;
      config.precision = p;
      const auto a = cost::estimate_activations(m, config);
      out << "  kept for backward per sample (" << name_of(p)
          << "): " << format_thousands(a.total.value) << " bytes\n";
    }
  }
}

}  // namespace dtplan::cli
