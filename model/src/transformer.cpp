// Parameter counting for transformer models and reading of Hugging Face config.json files.
//
// Per block (h hidden, q = heads*head_dim, k = kv_heads*head_dim, f ffn):
//   attention  h*q + 2*h*k + q*h  (+ q + 2k biases if qkv_bias, + h if attn_out_bias)
//   mlp gelu   2*h*f              (+ f + h if mlp_bias)
//   mlp swiglu 3*h*f              (+ 2f + h if mlp_bias)
//   norms      2 (4 in Gemma 2/3) * (h, + h if LayerNorm has a bias)  (+ 2 head_dim for the
//              q/k norms of Qwen3 and Gemma 3)
//   sinks      heads (gpt-oss: one learned logit per head)
//   mixture of experts: router h*E (+ E), E experts of f_e, a shared expert of f_s (+ h for
//   its gate); a token runs through the router, the shared expert and k of the E experts.
#include "dtplan/model/transformer.hpp"

#include <algorithm>
#include <functional>
#include <string_view>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan {

namespace {

constexpr std::int64_t kMaxExperts = std::int64_t{1} << 16;  // DeepSeek-V3 has 256

// Counts from a config file can be absurd (a fuzzed n_embd of 2^63 - 1): every product and
// sum below is checked, so an overflow is an error and never undefined behaviour.
std::int64_t mul(std::int64_t a, std::int64_t b) {
  return checked_mul(a, b, "parameter count");
}

std::int64_t add(std::int64_t a, std::int64_t b) {
  return checked_add(a, b, "parameter count");
}

std::int64_t norm_params(const TransformerSpec& s) {
  return s.norm == NormKind::layernorm ? mul(2, s.hidden_size) : s.hidden_size;
}

// Latent attention: the query bottleneck (down, norm, up) or one query projection; the key
// and value latent with the shared rotary key (down), its norm, the up-projection to every
// head's non-rotary key and value; the output projection.
std::int64_t latent_attention_params(const TransformerSpec& s) {
  const std::int64_t h = s.hidden_size, ql = s.mla.q_lora_rank, kvl = s.mla.kv_lora_rank;
  const std::int64_t nope = s.head_dim - s.mla.qk_rope_head_dim;
  std::int64_t p = ql > 0 ? add(add(mul(h, ql), ql), mul(ql, s.q_size())) : mul(h, s.q_size());
  p = add(p, add(mul(h, add(kvl, s.mla.qk_rope_head_dim)), kvl));
  p = add(p, mul(kvl, mul(s.num_heads, add(nope, s.v_dim()))));
  p = add(p, mul(s.o_size(), h));
  if (s.attn_out_bias) p = add(p, h);
  return p;
}

std::int64_t attention_params(const TransformerSpec& s) {
  if (s.mla.active()) return latent_attention_params(s);
  const std::int64_t h = s.hidden_size;
  std::int64_t p = add(add(mul(h, s.q_size()), mul(2, mul(h, s.kv_size()))), mul(s.q_size(), h));
  if (s.qkv_bias) p = add(p, add(s.q_size(), mul(2, s.kv_size())));
  if (s.attn_out_bias) p = add(p, h);
  if (s.attention_sinks) p = add(p, s.num_heads);
  return p;
}

// One MLP of intermediate size f, of the model's kind.
std::int64_t one_mlp(const TransformerSpec& s, std::int64_t f) {
  const std::int64_t h = s.hidden_size;
  if (is_gated(s.mlp)) return add(mul(3, mul(h, f)), s.mlp_bias ? add(mul(2, f), h) : 0);
  return add(mul(2, mul(h, f)), s.mlp_bias ? add(f, h) : 0);
}

// A mixture-of-experts MLP with `routed` of its experts counted.
std::int64_t moe_params(const TransformerSpec& s, std::int64_t routed) {
  const auto& m = s.moe;
  std::int64_t p = add(mul(s.hidden_size, m.experts), m.router_bias ? m.experts : 0);
  p = add(p, mul(routed, one_mlp(s, m.expert_ffn_size)));
  if (m.shared_ffn_size > 0) p = add(p, one_mlp(s, m.shared_ffn_size));
  if (m.shared_expert_gate) p = add(p, s.hidden_size);
  return p;
}

std::int64_t layer_norm_params(const TransformerSpec& s) {
  return add(mul(s.norms_per_layer, norm_params(s)), s.qk_norm ? mul(2, s.head_dim) : 0);
}

std::int64_t embedding_params(const TransformerSpec& s) {
  std::int64_t p = mul(s.vocab_size, s.hidden_size);
  if (s.positions == PositionKind::learned) p = add(p, mul(s.max_positions, s.hidden_size));
  p = add(p, mul(s.type_vocab_size, s.hidden_size));
  return p;
}

}  // namespace

std::int64_t mlp_params(const TransformerSpec& s) {
  return s.moe.active() ? moe_params(s, s.moe.experts) : one_mlp(s, s.ffn_size);
}

std::int64_t mlp_active_params(const TransformerSpec& s) {
  return s.moe.active() ? moe_params(s, s.moe.experts_per_token) : one_mlp(s, s.ffn_size);
}

std::int64_t TransformerSpec::windowed_layers(std::int64_t layers) const {
  if (sliding_window <= 0) return 0;
  return full_attention_every > 0 ? layers - layers / full_attention_every : layers;
}

double TransformerSpec::windowed_share() const {
  const std::int64_t layers = window_pattern_layers > 0 ? window_pattern_layers : num_layers;
  if (layers <= 0) return 0;
  return static_cast<double>(windowed_layers(layers)) / static_cast<double>(layers);
}

std::vector<ParamComponent> TransformerParams::components() const {
  std::vector<ParamComponent> out{{"embeddings", embeddings},
                                  {"attention", attention},
                                  {"mlp", mlp},
                                  {"norms", norms},
                                  {"head", head}};
  if (mtp > 0) out.push_back({"mtp", mtp});
  return out;
}

namespace {

// One block with a dense MLP of ffn_size: a mixture of experts' dense first layers.
TransformerSpec dense_block_of(const TransformerSpec& s) {
  TransformerSpec d = s;
  d.moe = MoeSpec{};
  return d;
}

}  // namespace

BlockRuns block_runs(const TransformerSpec& s, std::int64_t first, std::int64_t count) {
  BlockRuns out;
  const std::int64_t dense_end = s.moe.active() ? s.moe.first_dense_layers : 0;
  const std::int64_t dense = std::clamp<std::int64_t>(dense_end - first, 0, count);
  if (dense > 0) out.add(dense_block_of(s), dense);  // a copy of the spec only when one is asked
  if (count - dense > 0) out.add(s, count - dense);
  return out;
}

void BlockRuns::add(const TransformerSpec& block, std::int64_t layers) {
  auto& run = runs_[size_++];  // assigned in place: one copy of the spec per run
  run.block = block;
  run.block.num_layers = layers;
  run.block.moe.first_dense_layers = 0;
  run.layers = layers;
}

BlockRuns block_runs(const TransformerSpec& s) {
  return block_runs(s, 0, s.num_layers);
}

namespace {

void validate_moe(const MoeSpec& m, const std::string& origin) {
  if (m.experts > kMaxExperts) {
    throw Error(origin + "num_experts " + std::to_string(m.experts) +
                " is beyond the sane maximum " + std::to_string(kMaxExperts));
  }
  if (m.experts_per_token < 1 || m.experts_per_token > m.experts) {
    throw Error(origin + "num_experts_per_tok " + std::to_string(m.experts_per_token) +
                " must be between 1 and the " + std::to_string(m.experts) + " experts");
  }
  if (m.expert_ffn_size <= 0 || m.expert_ffn_size > (std::int64_t{1} << 27)) {
    throw Error(origin + "the experts' intermediate size " + std::to_string(m.expert_ffn_size) +
                " must be positive and below 2^27");
  }
  if (m.shared_ffn_size < 0 || m.shared_ffn_size > (std::int64_t{1} << 27)) {
    throw Error(origin + "the shared expert's intermediate size " +
                std::to_string(m.shared_ffn_size) + " must be between 0 and 2^27");
  }
}

}  // namespace

void validate(const TransformerSpec& s, const std::string& origin_in) {
  const std::string origin = origin_in.empty() ? "" : origin_in + ": ";
  // Sane maxima, each well beyond any published model (Llama 3.1 405B: hidden 16,384, 126
  // layers, vocabulary 128,256, FFN 53,248; contexts of 10M tokens): a larger value is a
  // typing or unit mistake, refused here rather than overflowing a count later.
  struct Size {
    const char* name;
    std::int64_t value;
    std::int64_t max;
  };
  const Size sizes[] = {{"vocab_size", s.vocab_size, std::int64_t{1} << 28},
                        {"hidden_size", s.hidden_size, std::int64_t{1} << 24},
                        {"num_layers", s.num_layers, std::int64_t{1} << 16},
                        {"num_heads", s.num_heads, std::int64_t{1} << 16},
                        {"num_kv_heads", s.num_kv_heads, std::int64_t{1} << 16},
                        {"head_dim", s.head_dim, std::int64_t{1} << 16},
                        {"ffn_size", s.ffn_size, std::int64_t{1} << 27},
                        {"max_positions", s.max_positions, std::int64_t{1} << 31}};
  for (const auto& [name, value, max] : sizes) {
    if (value <= 0) {
      throw Error(origin + name + " must be positive, got " + std::to_string(value));
    }
    if (value > max) {
      throw Error(origin + name + " " + std::to_string(value) + " is beyond the sane maximum " +
                  std::to_string(max) + " (a typing or unit mistake?)");
    }
  }
  if (s.num_heads % s.num_kv_heads != 0) {
    throw Error(origin + "num_key_value_heads " + std::to_string(s.num_kv_heads) +
                " does not divide num_attention_heads " + std::to_string(s.num_heads));
  }
  if (s.type_vocab_size < 0) throw Error(origin + "type_vocab_size must not be negative");
  if (s.norms_per_layer != 2 && s.norms_per_layer != 4)
    throw Error(origin + "a block has 2 or 4 norms, not " + std::to_string(s.norms_per_layer));
  // A period longer than the model leaves every layer windowed, as Megatron-LM reads it.
  if (s.full_attention_every < 0 || s.full_attention_every > (std::int64_t{1} << 16)) {
    throw Error(origin + "full attention every " + std::to_string(s.full_attention_every) +
                " layers must be 0 (none) or a positive number of layers");
  }
  if (s.moe.active()) validate_moe(s.moe, origin);
  if (s.moe.first_dense_layers < 0 || s.moe.first_dense_layers > s.num_layers) {
    throw Error(origin + "first_k_dense_replace " + std::to_string(s.moe.first_dense_layers) +
                " must be between 0 and the " + std::to_string(s.num_layers) + " layers");
  }
  if (s.mla.active() && (s.mla.qk_rope_head_dim < 0 || s.mla.qk_rope_head_dim >= s.head_dim ||
                         s.mla.q_lora_rank < 0 || s.mla.kv_lora_rank > (std::int64_t{1} << 20) ||
                         s.mla.q_lora_rank > (std::int64_t{1} << 20))) {
    throw Error(origin + "latent attention needs 0 <= qk_rope_head_dim < the " +
                std::to_string(s.head_dim) + "-wide query/key head and ranks below 2^20");
  }
  if (s.v_head_dim < 0 || s.v_head_dim > (std::int64_t{1} << 16))
    throw Error(origin + "v_head_dim " + std::to_string(s.v_head_dim) + " is out of range");
  if (s.mtp_layers < 0 || s.mtp_layers > 64) {
    throw Error(origin + "num_nextn_predict_layers " + std::to_string(s.mtp_layers) +
                " must be between 0 and 64");
  }
  // q_size() and kv_size() multiply unchecked; a valid spec keeps them in range.
  checked_mul(s.num_heads, s.head_dim, origin + "num_heads x head_dim");
}

std::int64_t blocks_params(const TransformerSpec& s) {
  std::int64_t p = 0;
  for (const auto& run : block_runs(s))
    p = add(p, mul(count_parameters(run.block).per_layer, run.layers));
  return p;
}

TransformerParams count_parameters(const TransformerSpec& s) {
  TransformerParams p;
  const std::int64_t layer_norms = layer_norm_params(s);
  p.per_layer = add(add(attention_params(s), mlp_params(s)), layer_norms);
  p.embeddings = embedding_params(s);
  p.attention = mul(attention_params(s), s.num_layers);
  // A mixture's dense first layers hold a dense MLP of ffn_size; the rest its experts.
  const std::int64_t dense = s.moe.active() ? s.moe.first_dense_layers : 0;
  const std::int64_t sparse = s.num_layers - dense;
  p.mlp = add(mul(mlp_params(s), sparse), mul(one_mlp(s, s.ffn_size), dense));
  // Multi-token prediction: a sparse block, the 2h x h projection, two input norms and an
  // output norm per module.
  p.mtp = mul(s.mtp_layers, add(add(p.per_layer, mul(2, mul(s.hidden_size, s.hidden_size))),
                                mul(3, norm_params(s))));
  p.norms = add(add(mul(layer_norms, s.num_layers), s.final_norm ? norm_params(s) : 0),
                s.embedding_norm ? norm_params(s) : 0);
  const std::int64_t h = s.hidden_size;
  switch (s.head) {
    case HeadKind::causal_lm:
      if (!s.tied_embeddings) p.head = add(p.head, mul(s.vocab_size, h));
      break;
    case HeadKind::pretraining:
      p.head = add(p.head, add(mul(2, h), 2));  // next-sentence classifier
      [[fallthrough]];
    case HeadKind::masked_lm:
      // transform dense + LayerNorm, decoder tied to the word embeddings, its own bias
      p.head = add(p.head, add(add(mul(h, h), h), add(norm_params(s), s.vocab_size)));
      break;
    case HeadKind::sequence_classification:
      p.head = add(p.head, add(mul(h, s.num_labels), s.pooler ? s.num_labels : 0));
      break;
    case HeadKind::base:
      break;
  }
  if (s.pooler) p.head = add(p.head, add(mul(h, h), h));
  p.active = add(add(p.embeddings, p.attention), add(p.mlp, add(p.norms, add(p.head, p.mtp))));
  p.active -= mul(add(sparse, s.mtp_layers), mlp_params(s) - mlp_active_params(s));
  return p;
}

bool fuses_qkv(const TransformerSpec& s) {
  for (const char* t : {"gpt2", "gpt_neox", "bloom", "mpt", "phi3", "gpt_bigcode", "falcon"}) {
    if (s.model_type == t) return true;
  }
  return false;
}

namespace {

// A weight and, when present, its bias.
void linear(std::vector<std::int64_t>& out, std::int64_t in, std::int64_t outputs, bool bias) {
  out.push_back(mul(in, outputs));
  if (bias) out.push_back(outputs);
}

void norm(std::vector<std::int64_t>& out, const TransformerSpec& s) {
  out.push_back(s.hidden_size);
  if (s.norm == NormKind::layernorm) out.push_back(s.hidden_size);
}

}  // namespace

std::vector<std::vector<std::int64_t>> layer_submodules(const TransformerSpec& s) {
  std::vector<std::vector<std::int64_t>> out;
  auto next = [&out]() -> std::vector<std::int64_t>& { return out.emplace_back(); };
  const std::int64_t h = s.hidden_size;
  norm(next(), s);
  if (s.mla.active()) {
    const std::int64_t ql = s.mla.q_lora_rank, kvl = s.mla.kv_lora_rank;
    if (ql > 0) {
      linear(next(), h, ql, false);  // q_a_proj, q_a_layernorm, q_b_proj
      next().push_back(ql);
      linear(next(), ql, s.q_size(), false);
    } else {
      linear(next(), h, s.q_size(), false);
    }
    linear(next(), h, add(kvl, s.mla.qk_rope_head_dim), false);  // kv_a_proj_with_mqa
    next().push_back(kvl);                                       // kv_a_layernorm
    linear(next(), kvl, mul(s.num_heads, add(s.head_dim - s.mla.qk_rope_head_dim, s.v_dim())),
           false);
  } else if (fuses_qkv(s)) {
    linear(next(), h, add(s.q_size(), mul(2, s.kv_size())), s.qkv_bias);
  } else {
    linear(next(), h, s.q_size(), s.qkv_bias);
    linear(next(), h, s.kv_size(), s.qkv_bias);
    linear(next(), h, s.kv_size(), s.qkv_bias);
  }
  if (s.qk_norm) {
    next().push_back(s.head_dim);
    next().push_back(s.head_dim);
  }
  linear(next(), s.o_size(), h, s.attn_out_bias);
  if (s.attention_sinks) next().push_back(s.num_heads);
  norm(next(), s);
  if (s.norms_per_layer == 4) norm(next(), s);  // the attention output's, then the MLP's input
  // One MLP's projections, each its own module: gate (gated kinds), up, down; gate and up in
  // one tensor where the model fuses them (phi3's gate_up_proj, gpt-oss's experts).
  auto mlp = [&](std::int64_t f) {
    if (is_gated(s.mlp) && (s.model_type == "phi3" || s.model_type == "gpt_oss")) {
      linear(next(), h, mul(2, f), s.mlp_bias);
    } else {
      if (is_gated(s.mlp)) linear(next(), h, f, s.mlp_bias);
      linear(next(), h, f, s.mlp_bias);
    }
    linear(next(), f, h, s.mlp_bias);
  };
  if (!s.moe.active()) {
    mlp(s.ffn_size);
    if (s.norms_per_layer == 4) norm(next(), s);  // the MLP output's
    return out;
  }
  linear(next(), h, s.moe.experts, s.moe.router_bias);
  if (s.model_type == "gpt_oss") {
    // GptOssExperts: every expert's gate_up_proj, down_proj and their biases, 4 tensors.
    const std::int64_t e = s.moe.experts, f = s.moe.expert_ffn_size;
    auto& experts = next();
    linear(experts, h, mul(e, mul(2, f)), s.mlp_bias);
    linear(experts, f, mul(e, h), s.mlp_bias);
  } else {
    for (std::int64_t e = 0; e < s.moe.experts; ++e)
      mlp(s.moe.expert_ffn_size);
  }
  if (s.moe.shared_ffn_size > 0) mlp(s.moe.shared_ffn_size);
  if (s.moe.shared_expert_gate) linear(next(), h, 1, false);
  if (s.norms_per_layer == 4) norm(next(), s);
  return out;
}

std::vector<std::int64_t> layer_parameter_tensors(const TransformerSpec& s) {
  std::vector<std::int64_t> out;
  for (const auto& module : layer_submodules(s))
    out.insert(out.end(), module.begin(), module.end());
  return out;
}

std::vector<std::int64_t> root_parameter_tensors(const TransformerSpec& s) {
  std::vector<std::int64_t> out{mul(s.vocab_size, s.hidden_size)};
  if (s.positions == PositionKind::learned) out.push_back(mul(s.max_positions, s.hidden_size));
  if (s.type_vocab_size > 0) out.push_back(mul(s.type_vocab_size, s.hidden_size));
  if (s.embedding_norm) norm(out, s);
  if (s.final_norm) norm(out, s);
  const auto p = count_parameters(s);
  std::int64_t counted = 0;
  for (const auto t : out)
    counted = add(counted, t);
  const std::int64_t rest = p.total() - blocks_params(s) - counted;
  if (rest > 0) out.push_back(rest);
  return out;
}

namespace {

// The dimensions every Hugging Face config except GPT-2's names the same way.
// A dropout probability from the config (`absent` when the key is not there).
double dropout_of(const ObjectReader& c, std::string_view key, double absent) {
  return c.optional_number(key, kDropoutProbability).value_or(absent);
}

void read_common_dims(const ObjectReader& c, TransformerSpec& s) {
  s.vocab_size = c.positive_integer("vocab_size");
  s.hidden_size = c.positive_integer("hidden_size");
  s.num_layers = c.positive_integer("num_hidden_layers");
  s.num_heads = c.positive_integer("num_attention_heads");
  s.num_kv_heads = c.optional_integer("num_key_value_heads").value_or(s.num_heads);
  s.ffn_size = c.positive_integer("intermediate_size");
  s.max_positions = c.positive_integer("max_position_embeddings");
  s.head_dim = c.optional_integer("head_dim").value_or(s.hidden_size / s.num_heads);
  if (!c.has("head_dim") && s.hidden_size % s.num_heads != 0) {
    c.fail("num_attention_heads", "does not divide hidden_size " + std::to_string(s.hidden_size));
  }
}

// Sliding-window attention (Mistral v0.1, Phi-3): each token attends to the last
// `sliding_window` positions; null or absent: to all earlier ones.
void read_sliding_window(const ObjectReader& c, TransformerSpec& s) {
  s.sliding_window = c.optional_integer("sliding_window").value_or(0);
  if (s.sliding_window < 0) c.fail("sliding_window", "must be a positive number of tokens");
}

// Qwen's configs carry a window that applies only when use_sliding_window is true, and then
// only to some layers (max_window_layers): not modelled, so refused rather than ignored.
void refuse_layer_windows(const ObjectReader& c) {
  if (c.optional_boolean("use_sliding_window").value_or(false)) {
    c.fail("use_sliding_window",
           "sliding-window attention on some layers (max_window_layers) is not modelled yet; "
           "set it to false to plan with full attention");
  }
}

// Llama family (llama, mistral, qwen2): SwiGLU, RMSNorm, rotary, untied by default.
void read_llama_like(const ObjectReader& c, TransformerSpec& s) {
  read_common_dims(c, s);
  s.tied_embeddings = c.optional_boolean("tie_word_embeddings").value_or(false);
  s.mlp = MlpKind::swiglu;
  s.norm = NormKind::rmsnorm;
  s.positions = PositionKind::rotary;
  s.rope_theta = c.optional_number("rope_theta", NumberRange::positive(1e12)).value_or(10000.0);
  s.qkv_bias = s.attn_out_bias = c.optional_boolean("attention_bias").value_or(false);
  s.mlp_bias = c.optional_boolean("mlp_bias").value_or(false);
  s.attention_dropout = dropout_of(c, "attention_dropout", 0.0);
  s.hidden_dropout = 0;
}

TransformerSpec read_llama(const ObjectReader& c) {
  TransformerSpec s;
  read_llama_like(c, s);
  return s;
}

// Qwen2 attention: q, k and v projections carry biases, the output projection does not.
TransformerSpec read_qwen2(const ObjectReader& c) {
  TransformerSpec s;
  read_llama_like(c, s);
  refuse_layer_windows(c);
  s.qkv_bias = true;
  s.attn_out_bias = false;
  return s;
}

TransformerSpec read_mistral(const ObjectReader& c) {
  TransformerSpec s;
  read_llama_like(c, s);
  read_sliding_window(c, s);
  return s;
}

// Qwen3: Qwen2's shape with an RMSNorm on every query and key head and no projection biases
// unless attention_bias says so.
TransformerSpec read_qwen3(const ObjectReader& c) {
  TransformerSpec s;
  read_llama_like(c, s);
  refuse_layer_windows(c);
  s.qk_norm = true;
  return s;
}

// Phi-3: Llama's shape with fused qkv_proj and gate_up_proj, a sliding window, dropouts.
TransformerSpec read_phi3(const ObjectReader& c) {
  TransformerSpec s;
  read_llama_like(c, s);
  read_sliding_window(c, s);
  s.hidden_dropout = dropout_of(c, "resid_pdrop", 0.0);
  s.embedding_dropout = dropout_of(c, "embd_pdrop", 0.0);
  if (c.optional_number("partial_rotary_factor").value_or(1.0) != 1.0) {
    c.fail("partial_rotary_factor", "partial rotary embeddings are not modelled yet");
  }
  return s;
}

// Which layers attend through the sliding window, for models that mix windowed and full
// layers: "layer_types" (one "sliding_attention" or "full_attention" per layer, written by
// transformers 4.53 and later), else the period under `period_key` (Gemma 3's
// sliding_window_pattern), else `default_every`. Full attention must fall on layers N, 2N, ...
// (1-based), the pattern Megatron-LM's --window-attn-skip-freq and the cost model express.
void read_layer_windows(const ObjectReader& c, TransformerSpec& s, const char* period_key,
                        std::int64_t default_every) {
  if (!c.has("layer_types")) {
    s.full_attention_every = c.optional_integer(period_key).value_or(default_every);
    if (s.full_attention_every < 1 || s.full_attention_every > (std::int64_t{1} << 16)) {
      c.fail(period_key, "must be a positive number of layers");
    }
    return;
  }
  const auto types = c.strings("layer_types");
  if (static_cast<std::int64_t>(types.size()) != s.num_layers) {
    c.fail("layer_types", "lists " + std::to_string(types.size()) +
                              " layers, num_hidden_layers is " + std::to_string(s.num_layers));
  }
  std::vector<bool> full;
  for (const auto& t : types) {
    if (t != "sliding_attention" && t != "full_attention") {
      c.fail("layer_types", "'" + t + "' is not modelled (sliding_attention, full_attention)");
    }
    full.push_back(t == "full_attention");
  }
  const auto first = std::find(full.begin(), full.end(), true);
  if (first == full.begin() && std::all_of(full.begin(), full.end(), [](bool f) { return f; })) {
    s.sliding_window = 0;  // no layer uses the window
    return;
  }
  const std::int64_t every = first == full.end() ? 0 : (first - full.begin()) + 1;
  for (std::size_t i = 0; i < full.size(); ++i) {
    const bool expected = every > 0 && static_cast<std::int64_t>(i + 1) % every == 0;
    if (full[i] != expected) {
      c.fail("layer_types", "layer index " + std::to_string(i) +
                                " breaks the pattern of full attention "
                                "every " +
                                std::to_string(every) +
                                " layers; only such periodic "
                                "patterns are modelled");
    }
  }
  s.full_attention_every = every;
}

// Gemma: Llama's blocks with the gate under tanh-approximated GELU (GeGLU), tied embeddings
// (scaled by sqrt(hidden), no parameters) and head_dim 256 by default.
void read_gemma_like(const ObjectReader& c, TransformerSpec& s) {
  read_llama_like(c, s);
  s.tied_embeddings = c.optional_boolean("tie_word_embeddings").value_or(true);
  const char* key = c.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = c.optional_string(key).value_or("gelu_pytorch_tanh");
  if (act.rfind("gelu", 0) != 0) {
    c.fail(key, "'" + act + "' is not modelled for Gemma (gelu_pytorch_tanh, gelu)");
  }
  s.mlp = MlpKind::geglu;
}

TransformerSpec read_gemma(const ObjectReader& c) {
  TransformerSpec s;
  read_gemma_like(c, s);
  return s;
}

void read_softcaps(const ObjectReader& c, TransformerSpec& s) {
  s.attn_logit_softcap =
      c.optional_number("attn_logit_softcapping", NumberRange::positive(1e6)).value_or(0.0);
  s.final_logit_softcap =
      c.optional_number("final_logit_softcapping", NumberRange::positive(1e6)).value_or(0.0);
}

// Gemma 2: four norms per block (each sub-layer's input and output), local sliding-window and
// global layers alternating, tanh soft-capping of the attention scores and of the logits.
TransformerSpec read_gemma2(const ObjectReader& c) {
  TransformerSpec s;
  read_gemma_like(c, s);
  s.norms_per_layer = 4;
  read_sliding_window(c, s);
  read_layer_windows(c, s, "sliding_window_pattern", 2);
  read_softcaps(c, s);
  return s;
}

// Gemma 3 (text): Gemma 2's blocks with RMSNorm on each query and key head, five local layers
// to one global, soft-capping replaced by the q/k norms (the keys are null in its configs).
TransformerSpec read_gemma3_text(const ObjectReader& c) {
  TransformerSpec s;
  read_gemma_like(c, s);
  s.norms_per_layer = 4;
  s.qk_norm = true;
  read_sliding_window(c, s);
  read_layer_windows(c, s, "sliding_window_pattern", 6);
  read_softcaps(c, s);
  return s;
}

// Mixtral: Mistral's blocks with num_local_experts SwiGLU experts of intermediate_size each,
// num_experts_per_tok of them per token, behind a bias-free router.
// Routed experts and how many each token runs through, checked where the config states them.
void read_routing(const ObjectReader& c, const char* experts_key, MoeSpec& m) {
  m.experts = c.integer(experts_key, 1, kMaxExperts);
  m.experts_per_token = c.integer("num_experts_per_tok", 1, m.experts);
  m.aux_loss_coef =
      c.optional_number("router_aux_loss_coef", NumberRange::non_negative(1e3)).value_or(0.0);
}

TransformerSpec read_mixtral(const ObjectReader& c) {
  TransformerSpec s = read_mistral(c);
  read_routing(c, "num_local_experts", s.moe);
  s.moe.expert_ffn_size = s.ffn_size;
  return s;
}

// Qwen-MoE (qwen2_moe, qwen3_moe): num_experts experts of moe_intermediate_size; Qwen2-MoE adds
// a shared expert of shared_expert_intermediate_size behind a sigmoid gate. Every layer must
// be sparse: dense layers among them (decoder_sparse_step, mlp_only_layers) are refused.
void read_qwen_moe(const ObjectReader& c, TransformerSpec& s) {
  read_routing(c, "num_experts", s.moe);
  s.moe.expert_ffn_size = c.positive_integer("moe_intermediate_size");
  s.moe.normalize_top_k = c.optional_boolean("norm_topk_prob").value_or(false);
  if (c.optional_integer("decoder_sparse_step").value_or(1) != 1) {
    c.fail("decoder_sparse_step",
           "dense layers between sparse ones are not modelled yet (only 1 is supported)");
  }
  if (c.has("mlp_only_layers") && !c.integers("mlp_only_layers").empty()) {
    c.fail("mlp_only_layers", "dense layers among sparse ones are not modelled yet");
  }
}

TransformerSpec read_qwen2_moe(const ObjectReader& c) {
  TransformerSpec s = read_qwen2(c);
  refuse_layer_windows(c);
  read_qwen_moe(c, s);
  s.moe.shared_ffn_size = c.positive_integer("shared_expert_intermediate_size");
  s.moe.shared_expert_gate = true;
  return s;
}

TransformerSpec read_qwen3_moe(const ObjectReader& c) {
  TransformerSpec s = read_qwen3(c);
  read_qwen_moe(c, s);
  return s;
}

// gpt-oss: every block a mixture of num_local_experts experts of intermediate_size, their gate
// and up in one tensor with biases (and the router's bias), a learned sink logit per attention
// head, projections with biases, banded (sliding-window) and full layers alternating.
TransformerSpec read_gpt_oss(const ObjectReader& c) {
  TransformerSpec s;
  read_llama_like(c, s);
  s.qkv_bias = s.attn_out_bias = c.optional_boolean("attention_bias").value_or(true);
  s.attention_sinks = true;
  read_sliding_window(c, s);
  read_layer_windows(c, s, "sliding_window_pattern", 2);
  read_routing(c, "num_local_experts", s.moe);
  if (c.has("experts_per_token") &&
      c.positive_integer("experts_per_token") != s.moe.experts_per_token) {
    c.fail("experts_per_token",
           "differs from num_experts_per_tok " + std::to_string(s.moe.experts_per_token));
  }
  s.moe.expert_ffn_size = s.ffn_size;
  s.moe.router_bias = true;
  s.mlp_bias = true;
  return s;
}

// DeepSeek-V2/V3: latent attention, a mixture of n_routed_experts experts of
// moe_intermediate_size with n_shared_experts of that size always active, behind a router
// whose per-expert bias steers the top-k choice (topk_method noaux_tc, DeepSeek-V3's
// auxiliary-loss-free balancing); the first first_k_dense_replace blocks dense (ffn_size),
// multi-token prediction modules beside the model.
void read_latent_attention(const ObjectReader& c, TransformerSpec& s) {
  s.mla.kv_lora_rank = c.positive_integer("kv_lora_rank");
  s.mla.q_lora_rank = c.optional_integer("q_lora_rank").value_or(0);  // null: no bottleneck
  if (s.mla.q_lora_rank < 0) c.fail("q_lora_rank", "must be a positive rank or null");
  s.mla.qk_rope_head_dim = c.positive_integer("qk_rope_head_dim");
  s.head_dim = checked_add(c.positive_integer("qk_nope_head_dim"), s.mla.qk_rope_head_dim,
                           c.location("qk_nope_head_dim"));
  s.v_head_dim = c.positive_integer("v_head_dim");
}

TransformerSpec read_deepseek(const ObjectReader& c, bool v3) {
  TransformerSpec s;
  read_llama_like(c, s);
  read_latent_attention(c, s);
  auto& m = s.moe;
  read_routing(c, "n_routed_experts", m);
  m.expert_ffn_size = c.positive_integer("moe_intermediate_size");
  m.shared_ffn_size = checked_mul(c.optional_integer("n_shared_experts").value_or(0),
                                  m.expert_ffn_size, c.location("n_shared_experts"));
  if (m.shared_ffn_size < 0) c.fail("n_shared_experts", "must not be negative");
  m.first_dense_layers = c.optional_integer("first_k_dense_replace").value_or(0);
  if (m.first_dense_layers < 0 || m.first_dense_layers > s.num_layers) {
    c.fail("first_k_dense_replace",
           "must be between 0 and the " + std::to_string(s.num_layers) + " layers");
  }
  if (c.optional_integer("moe_layer_freq").value_or(1) != 1) {
    c.fail("moe_layer_freq", "dense layers between sparse ones are not modelled (only 1)");
  }
  const std::string topk = c.optional_string("topk_method").value_or(v3 ? "noaux_tc" : "greedy");
  m.router_bias = m.selection_bias = topk == "noaux_tc";  // e_score_correction_bias
  const std::string scoring = c.optional_string("scoring_func").value_or("softmax");
  if (scoring != "softmax" && scoring != "sigmoid")
    c.fail("scoring_func", "'" + scoring + "' is not modelled (softmax, sigmoid)");
  m.sigmoid_scores = scoring == "sigmoid";
  m.sequence_aux_loss = c.optional_boolean("seq_aux").value_or(false);
  m.routed_scale =
      c.optional_number("routed_scaling_factor", NumberRange::positive(1e6)).value_or(1.0);
  m.normalize_top_k = c.optional_boolean("norm_topk_prob").value_or(v3);
  m.aux_loss_coef =
      c.optional_number("aux_loss_alpha", NumberRange::non_negative(1e3)).value_or(0.0);
  m.groups = c.optional_integer("n_group").value_or(0);
  m.groups_per_token = c.optional_integer("topk_group").value_or(0);
  if (m.groups < 0 || (m.groups > 0 && m.experts % m.groups != 0)) {
    c.fail("n_group", "must divide the " + std::to_string(m.experts) + " routed experts");
  }
  if (m.groups_per_token < 0 || m.groups_per_token > std::max<std::int64_t>(m.groups, 0)) {
    c.fail("topk_group", "must be between 0 and n_group " + std::to_string(m.groups));
  }
  s.mtp_layers = c.optional_integer("num_nextn_predict_layers").value_or(0);
  if (s.mtp_layers < 0 || s.mtp_layers > 64)
    c.fail("num_nextn_predict_layers", "must be between 0 and 64");
  return s;
}

TransformerSpec read_deepseek_v2(const ObjectReader& c) {
  return read_deepseek(c, false);
}

TransformerSpec read_deepseek_v3(const ObjectReader& c) {
  return read_deepseek(c, true);
}

TransformerSpec read_gpt2(const ObjectReader& c) {
  TransformerSpec s;
  s.vocab_size = c.positive_integer("vocab_size");
  s.hidden_size = c.positive_integer("n_embd");
  s.num_layers = c.positive_integer("n_layer");
  s.num_heads = c.positive_integer("n_head");
  s.num_kv_heads = s.num_heads;
  if (s.hidden_size % s.num_heads != 0) c.fail("n_head", "does not divide n_embd");
  s.head_dim = s.hidden_size / s.num_heads;
  const auto n_inner = c.optional_integer("n_inner");
  s.ffn_size =
      n_inner ? *n_inner : checked_mul(4, s.hidden_size, c.location("n_embd") + ": 4 x n_embd");
  s.max_positions =
      c.has("n_positions") ? c.positive_integer("n_positions") : c.positive_integer("n_ctx");
  s.tied_embeddings = c.optional_boolean("tie_word_embeddings").value_or(true);
  s.attention_dropout = dropout_of(c, "attn_pdrop", 0.1);
  s.hidden_dropout = dropout_of(c, "resid_pdrop", 0.1);
  s.embedding_dropout = dropout_of(c, "embd_pdrop", 0.1);
  if (c.optional_boolean("add_cross_attention").value_or(false)) {
    c.fail("add_cross_attention", "cross-attention (encoder-decoder GPT-2) is not supported");
  }
  // transformers' GPT2MLP: ACT2FN[activation_function], "gelu_new" by default.
  const std::string act = c.optional_string("activation_function").value_or("gelu_new");
  if (act != "gelu_new" && act != "gelu" && act != "gelu_pytorch_tanh") {
    c.fail("activation_function",
           "'" + act + "' is not modelled for GPT-2 (gelu_new, gelu, gelu_pytorch_tanh)");
  }
  s.gelu_as_tensor_ops = act == "gelu_new";
  return s;  // learned positions, GELU MLP, LayerNorm, biases everywhere
}

TransformerSpec read_gpt_neox(const ObjectReader& c) {
  TransformerSpec s;
  read_common_dims(c, s);
  s.positions = PositionKind::rotary;
  s.rope_theta =
      c.optional_number("rotary_emb_base", NumberRange::positive(1e12)).value_or(10000.0);
  s.tied_embeddings = c.optional_boolean("tie_word_embeddings").value_or(false);
  s.qkv_bias = s.attn_out_bias = c.optional_boolean("attention_bias").value_or(true);
  s.attention_dropout = dropout_of(c, "attention_dropout", 0.0);
  s.hidden_dropout = dropout_of(c, "hidden_dropout", 0.0);
  s.embedding_dropout = s.hidden_dropout;
  return s;
}

// BERT encoder (BertModel): embeddings with LayerNorm, post-LN blocks, pooler; no LM head.
TransformerSpec read_bert(const ObjectReader& c) {
  TransformerSpec s;
  read_common_dims(c, s);
  s.type_vocab_size = c.optional_integer("type_vocab_size").value_or(2);
  s.embedding_norm = true;
  s.final_norm = false;
  s.head = HeadKind::base;
  s.pooler = true;  // BertModel's default add_pooling_layer=True
  s.attention_dropout = dropout_of(c, "attention_probs_dropout_prob", 0.1);
  s.hidden_dropout = dropout_of(c, "hidden_dropout_prob", 0.1);
  s.embedding_dropout = s.hidden_dropout;
  const auto positions = c.optional_string("position_embedding_type").value_or("absolute");
  if (positions != "absolute") {
    c.fail("position_embedding_type", "'" + positions + "' is not supported (only absolute)");
  }
  return s;
}

// "architectures": ["LlamaForCausalLM"] sets the head; absent, decoders are causal LMs and
// BERT is the bare BertModel.
void read_architecture(const ObjectReader& c, TransformerSpec& s) {
  if (!c.has("architectures")) {
    c.optional_string("architectures");
    return;
  }
  const auto list = c.strings("architectures");
  if (list.empty()) return;
  const std::string& a = list.front();
  auto ends_with = [&a](std::string_view suffix) {
    return a.size() >= suffix.size() &&
           a.compare(a.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool bert = s.model_type == "bert";
  if (ends_with("ForCausalLM") || a == "GPT2LMHeadModel") {
    s.head = HeadKind::causal_lm;
    s.pooler = false;
  } else if (ends_with("ForMaskedLM") && bert) {
    s.head = HeadKind::masked_lm;
    s.pooler = false;
  } else if (ends_with("ForPreTraining") && bert) {
    s.head = HeadKind::pretraining;
    s.pooler = true;
  } else if (ends_with("ForSequenceClassification")) {
    s.head = HeadKind::sequence_classification;
    s.pooler = bert;
    s.num_labels = c.optional_integer("num_labels").value_or(0);
    if (s.num_labels == 0 && c.has("id2label")) {
      s.num_labels = static_cast<std::int64_t>(c.value("id2label").size());
    }
    if (s.num_labels == 0) s.num_labels = 2;  // transformers' PretrainedConfig default
    if (s.num_labels < 0) c.fail("num_labels", "must be a positive integer");
  } else if (ends_with("Model")) {
    s.head = HeadKind::base;
    s.pooler = bert;
  } else {
    c.fail("architectures", "'" + a + "' is not supported (supported: *ForCausalLM, *Model, " +
                                "*ForSequenceClassification, BertForMaskedLM, BertForPreTraining)");
  }
  if (s.head == HeadKind::base && !bert) s.tied_embeddings = false;  // no LM head to tie
}

struct ModelTypeReader {
  const char* model_type;
  TransformerSpec (*read)(const ObjectReader&);
  std::string_view expert_keys;  // the keys below that it reads, space-separated
};

// Keys that add or resize parameters in some model_type (experts, latent attention, extra
// prediction layers). A reader that does not read one refuses it: counting Mixtral as a dense
// Mistral because the expert keys were skipped would be off by 6.5x.
constexpr std::string_view kCountKeys[] = {
    "num_local_experts",   "num_experts",           "n_routed_experts",
    "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "n_shared_experts",    "first_k_dense_replace", "moe_layer_freq",
    "decoder_sparse_step", "mlp_only_layers",       "q_lora_rank",
    "kv_lora_rank",        "qk_rope_head_dim",      "num_nextn_predict_layers",
};

constexpr std::string_view kDeepseekKeys =
    "n_routed_experts num_experts_per_tok moe_intermediate_size n_shared_experts "
    "first_k_dense_replace moe_layer_freq q_lora_rank kv_lora_rank qk_rope_head_dim "
    "num_nextn_predict_layers";

constexpr ModelTypeReader kReaders[] = {
    {"gpt2", read_gpt2, ""},
    {"gpt_neox", read_gpt_neox, ""},
    {"llama", read_llama, ""},
    {"mistral", read_mistral, ""},
    {"qwen2", read_qwen2, ""},
    {"qwen3", read_qwen3, ""},
    {"phi3", read_phi3, ""},
    {"gemma", read_gemma, ""},
    {"gemma2", read_gemma2, ""},
    {"gemma3_text", read_gemma3_text, ""},
    {"bert", read_bert, ""},
    {"mixtral", read_mixtral, "num_local_experts num_experts_per_tok"},
    {"qwen2_moe", read_qwen2_moe,
     "num_experts num_experts_per_tok moe_intermediate_size shared_expert_intermediate_size "
     "decoder_sparse_step mlp_only_layers"},
    {"qwen3_moe", read_qwen3_moe,
     "num_experts num_experts_per_tok moe_intermediate_size decoder_sparse_step mlp_only_layers"},
    {"gpt_oss", read_gpt_oss, "num_local_experts num_experts_per_tok"},
    {"deepseek_v2", read_deepseek_v2, kDeepseekKeys},
    {"deepseek_v3", read_deepseek_v3, kDeepseekKeys},
    // Kimi K2 (moonshotai): DeepSeek-V3's architecture (DeepseekV3ForCausalLM) and keys.
    {"kimi_k2", read_deepseek_v3, kDeepseekKeys},
};

bool reads_key(std::string_view keys, std::string_view key) {
  while (!keys.empty()) {
    const auto end = std::min(keys.find(' '), keys.size());
    if (keys.substr(0, end) == key) return true;
    keys.remove_prefix(std::min(end + 1, keys.size()));
  }
  return false;
}

void refuse_unread_count_keys(const ObjectReader& c, const ModelTypeReader& r) {
  for (const auto key : kCountKeys) {
    if (!c.has(key) || reads_key(r.expert_keys, key)) continue;
    c.fail(std::string(key), "changes the parameter count but model_type '" +
                                 std::string(r.model_type) +
                                 "' has no such parameters: a mixture-of-experts or latent-"
                                 "attention model needs its own model_type (mixtral, qwen2_moe, "
                                 "qwen3_moe, ...)");
  }
}

// Releases whose config states the weights' storage format, not a quantized model to train:
// gpt-oss's experts in MXFP4 (training dequantizes them to bf16, transformers'
// Mxfp4Config(dequantize=True)), DeepSeek-V3's block-scaled FP8 weights (its own training
// recipe, --fp8-recipe blockwise). The parameter count is the same.
bool release_format(const ObjectReader& config, const std::string& type) {
  const auto method = config.object("quantization_config").optional_string("quant_method");
  if (type == "gpt_oss") return method.value_or("") == "mxfp4";
  if (type == "deepseek_v3" || type == "kimi_k2") return method.value_or("") == "fp8";
  return false;
}

}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> names;
  for (const auto& r : kReaders)
    names.emplace_back(r.model_type);
  return names;
}

TransformerSpec spec_from_hf_config(const ObjectReader& config) {
  const std::string type = config.string("model_type");
  const auto known = std::find_if(std::begin(kReaders), std::end(kReaders),
                                  [&](const auto& r) { return type == r.model_type; });
  if (known != std::end(kReaders) && config.has("quantization_config") &&
      !release_format(config, type)) {
    config.fail("quantization_config",
                "quantized checkpoints are not supported: dtplan models full-precision training");
  }
  for (const auto& r : kReaders) {
    if (type == r.model_type) {
      refuse_unread_count_keys(config, r);
      TransformerSpec s = r.read(config);
      s.model_type = type;
      read_architecture(config, s);
      try {
        validate(s, "");
      } catch (const Error& e) {
        config.fail_here(e.what());
      }
      return s;
    }
  }
  if (type == "gemma3") {
    // Gemma 3's image-text checkpoints nest the language model under text_config beside a
    // SigLIP vision tower that dtplan does not model.
    config.fail("model_type",
                "'gemma3' is Gemma 3's image-and-text model, whose SigLIP vision "
                "tower is not modelled: plan its language model by saving the "
                "\"text_config\" object as its own config.json (model_type "
                "gemma3_text) with the keys transformers' Gemma3TextConfig fills in "
                "when absent (vocab_size, num_attention_heads, num_key_value_heads, "
                "head_dim, max_position_embeddings, sliding_window_pattern) written "
                "out as the model card states them");
  }
  config.fail("model_type", "model_type '" + type + "' is not supported (supported: " +
                                join(supported_model_types(), ", ") + ")");
}

std::int64_t sequence_length(const TransformerSpec& t, std::int64_t seq_len) {
  const std::int64_t s = seq_len > 0 ? seq_len : t.max_positions;
  if (t.positions == PositionKind::learned && s > t.max_positions) {
    throw Error("{seq_len} " + std::to_string(s) + ": longer than the model's " +
                std::to_string(t.max_positions) + " learned positions");
  }
  return s;
}

}  // namespace dtplan
