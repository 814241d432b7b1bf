// Shape, parameters, FLOPs and stored activations of the dense stack dtplan-run executes.
#include "dtplan/cost/dense_stack.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {
namespace {

std::int64_t scaled(std::int64_t n, double scale) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(n) * scale));
}

// Parameters of one block: fused QKV, attention output, MLP (2 or 3 matrices), biases.
std::int64_t block_params(const DenseStack& s) {
  const std::int64_t h = s.hidden;
  const std::int64_t mlp_mats = s.gated ? 3 : 2;
  std::int64_t p = h * s.qkv_size() + s.q_size() * h + mlp_mats * h * s.ffn;
  if (s.bias) p += s.qkv_size() + h + (s.gated ? 2 : 1) * s.ffn + h;
  return p;
}

}  // namespace

DenseStack dense_stack_of(const TransformerSpec& spec, double scale, std::int64_t seq_len) {
  if (!(scale > 0 && scale <= 1)) {
    throw FieldError("scale", std::to_string(scale) + " is not in (0, 1]");
  }
  if (seq_len < 1) throw Error("sequence length " + std::to_string(seq_len) + ": must be >= 1");
  if (spec.moe.active()) {
    throw Error("model_type " + spec.model_type +
                ": dtplan-run executes dense blocks only; a mixture of experts (" +
                std::to_string(spec.moe.experts) + " experts) is estimated and planned, not run");
  }
  DenseStack s;
  s.scale = scale;
  s.vocab = std::max<std::int64_t>(2, scaled(spec.vocab_size, scale));
  s.heads = spec.num_heads;
  s.kv_heads = spec.num_kv_heads;
  s.head_dim = scaled(spec.head_dim, scale);
  s.hidden = s.heads * s.head_dim;
  s.ffn = scaled(spec.ffn_size, scale);
  s.layers = spec.num_layers;
  s.seq_len = seq_len;
  s.gated = is_gated(spec.mlp);
  s.bias = spec.qkv_bias || spec.mlp_bias;
  s.tied = spec.tied_embeddings;
  return s;
}

std::vector<DenseUnit> units_of(const DenseStack& s) {
  std::vector<DenseUnit> u{{"embedding", s.vocab * s.hidden}};
  for (std::int64_t l = 0; l < s.layers; ++l) {
    u.push_back({"block " + std::to_string(l), block_params(s)});
  }
  if (!s.tied) u.push_back({"head", s.vocab * s.hidden});
  return u;
}

std::int64_t params_of(const DenseStack& s) {
  std::int64_t p = 0;
  for (const auto& u : units_of(s))
    p += u.params;
  return p;
}

double flops_per_token(const DenseStack& s) {
  double matrix = 0;
  for (const auto& g : gemms_of(s, 1))
    matrix += g.flops();
  return matrix;
}

std::int64_t stored_elements_per_token(const DenseStack& s) {
  const std::int64_t per_block = s.hidden + s.q_size() + s.hidden + (s.gated ? 3 : 2) * s.ffn;
  return s.layers * per_block + s.hidden + s.vocab;
}

std::int64_t scratch_elements_per_token(const DenseStack& s) {
  return s.qkv_size() + 2 * s.hidden + (s.gated ? 3 : 2) * s.ffn + s.q_size();
}

std::vector<Gemm> gemms_of(const DenseStack& s, std::int64_t tokens) {
  // A Linear in -> out over T tokens: forward T x out x in; backward the input gradient
  // (T x in x out) and the weight gradient (out x in x T): three GEMMs of equal FLOPs.
  std::vector<Gemm> g;
  auto linear = [&](std::int64_t in, std::int64_t out, std::int64_t count) {
    g.push_back({tokens, out, in, count});
    g.push_back({tokens, in, out, count});
    g.push_back({out, in, tokens, count});
  };
  const std::int64_t L = s.layers;
  linear(s.hidden, s.qkv_size(), L);
  linear(s.q_size(), s.hidden, L);
  linear(s.hidden, s.ffn, (s.gated ? 2 : 1) * L);
  linear(s.ffn, s.hidden, L);
  linear(s.hidden, s.vocab, 1);  // the LM head
  return g;
}

nlohmann::json to_json(const DenseStack& s) {
  return {{"vocab", s.vocab},       {"hidden", s.hidden},
          {"heads", s.heads},       {"kv_heads", s.kv_heads},
          {"head_dim", s.head_dim}, {"ffn", s.ffn},
          {"layers", s.layers},     {"seq_len", s.seq_len},
          {"gated", s.gated},       {"bias", s.bias},
          {"tied", s.tied},         {"scale", s.scale},
          {"params", params_of(s)}, {"flops_per_token", flops_per_token(s)}};
}

DenseStack dense_stack_from_json(const ObjectReader& r) {
  DenseStack s;
  s.vocab = r.positive_integer("vocab");
  s.hidden = r.positive_integer("hidden");
  s.heads = r.positive_integer("heads");
  s.kv_heads = r.positive_integer("kv_heads");
  s.head_dim = r.positive_integer("head_dim");
  s.ffn = r.positive_integer("ffn");
  s.layers = r.positive_integer("layers");
  s.seq_len = r.positive_integer("seq_len");
  s.gated = r.boolean("gated");
  s.bias = r.boolean("bias");
  s.tied = r.boolean("tied");
  s.scale = r.number("scale", NumberRange::positive(1.0));  // dtplan-run --scale, (0, 1]
  if (s.hidden != s.heads * s.head_dim) r.fail("hidden", "is not heads x head_dim");
  if (s.heads % s.kv_heads != 0) r.fail("kv_heads", "does not divide heads");
  if (r.integer("params") != params_of(s)) r.fail("params", "does not match the shape");
  (void)r.number("flops_per_token");
  r.reject_unknown_keys();
  return s;
}

}  // namespace dtplan::cost
