// Text layout of a model description.
#include "model_report.hpp"

#include "dtplan/cost/activations.hpp"
#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

std::string percent(std::int64_t part, std::int64_t whole) {
  return fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) + "%";
}

void print_transformer_shape(std::ostream& out, const TransformerSpec& t) {
  TextTable s({"shape", ""});
  s.add_row({"model_type", t.model_type});
  s.add_row({"layers", std::to_string(t.num_layers)});
  s.add_row({"hidden", std::to_string(t.hidden_size)});
  s.add_row({"heads / kv heads / head dim", std::to_string(t.num_heads) + " / " +
                                                std::to_string(t.num_kv_heads) + " / " +
                                                std::to_string(t.head_dim)});
  if (!t.moe.active()) {
    s.add_row(
        {"ffn", std::to_string(t.ffn_size) +
                    (t.mlp == MlpKind::swiglu ? " (SwiGLU: gate, up, down)" : " (GELU MLP)")});
  }
  if (t.moe.active()) {
    s.add_row({"experts", std::to_string(t.moe.experts) + " of " +
                              std::to_string(t.moe.expert_ffn_size) + ", " +
                              std::to_string(t.moe.experts_per_token) + " per token"});
    if (t.moe.shared_ffn_size > 0)
      s.add_row({"shared expert", std::to_string(t.moe.shared_ffn_size) +
                                      (t.moe.shared_expert_gate ? " (gated)" : "")});
  }
  if (t.sliding_window > 0)
    s.add_row({"sliding window", std::to_string(t.sliding_window) + " tokens"});
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
        << ")\n";
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
