// Shape, parameters, FLOPs and stored activations of the dense stack dtplan-run executes.
#include "dtplan/cost/dense_stack.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {
namespace {

std::int64_t scaled(std::int64_t n, double scale) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(n) * scale));
}

// Parameters of one block: two norms, fused QKV, attention output, MLP (2 or 3 matrices),
// and the biases the model has.
std::int64_t block_params(const DenseStack& s) {
  const std::int64_t h = s.hidden;
  const std::int64_t mlp_mats = s.gated ? 3 : 2;
  std::int64_t p = 2 * s.norm_params() + h * s.qkv_size() + s.q_size() * h + mlp_mats * h * s.ffn;
  if (s.qkv_bias) p += s.qkv_size();
  if (s.out_bias) p += h;
  if (s.mlp_bias) p += (s.gated ? 2 : 1) * s.ffn + h;
  return p;
}

std::int64_t final_norm_params(const DenseStack& s) {
  return s.final_norm ? s.norm_params() : 0;
}

void check_runnable(const TransformerSpec& spec, std::int64_t seq_len) {
  if (spec.moe.active()) {
    throw Error("model_type " + spec.model_type +
                ": dtplan-run executes dense blocks only; a mixture of experts (" +
                std::to_string(spec.moe.experts) + " experts) is estimated and planned, not run");
  }
  if (spec.mla.active()) {
    throw Error("model_type " + spec.model_type +
                ": dtplan-run does not execute multi-head latent attention; it is estimated and "
                "planned, not run");
  }
  if (spec.positions == PositionKind::learned && seq_len > spec.max_positions) {
    throw Error("sequence length " + std::to_string(seq_len) + ": the model has " +
                std::to_string(spec.max_positions) +
                " learned positions (max_position_embeddings)");
  }
}

}  // namespace

std::int64_t DenseStack::norm_params() const {
  switch (norm) {
    case StackNorm::none:
      return 0;
    case StackNorm::layernorm:
      return 2 * hidden;
    case StackNorm::rmsnorm:
      return hidden;
  }
  return 0;
}

std::int64_t DenseStack::position_params() const {
  return positions == StackPositions::learned ? max_positions * hidden : 0;
}

std::vector<std::string> not_executed(const TransformerSpec& spec) {
  std::vector<std::string> out;
  if (spec.mlp == MlpKind::geglu) out.push_back("GeGLU's GELU gate (it runs SiLU, as SwiGLU)");
  if (spec.sliding_window > 0) out.push_back("the sliding window (every layer attends to all)");
  if (spec.qk_norm) out.push_back("query/key norms");
  if (spec.norms_per_layer > 2) out.push_back("the norms after each sub-layer");
  if (spec.embedding_norm) out.push_back("the embedding norm");
  if (spec.attention_sinks) out.push_back("attention sinks");
  if (spec.attn_logit_softcap > 0 || spec.final_logit_softcap > 0) out.push_back("soft-capping");
  if (spec.type_vocab_size > 0) out.push_back("token-type embeddings");
  if (spec.head != HeadKind::causal_lm) out.push_back("the model's head (a causal LM head runs)");
  return out;
}

DenseStack dense_stack_of(const TransformerSpec& spec, double scale, std::int64_t seq_len) {
  if (!(scale > 0 && scale <= 1)) {
    throw FieldError("scale", std::to_string(scale) + " is not in (0, 1]");
  }
  if (seq_len < 1) throw Error("sequence length " + std::to_string(seq_len) + ": must be >= 1");
  check_runnable(spec, seq_len);
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
  s.qkv_bias = spec.qkv_bias;
  s.out_bias = spec.attn_out_bias;
  s.mlp_bias = spec.mlp_bias;
  s.tied = spec.tied_embeddings;
  s.norm = spec.norm == NormKind::rmsnorm ? StackNorm::rmsnorm : StackNorm::layernorm;
  s.final_norm = spec.final_norm;
  s.attention_dropout = spec.attention_dropout;
  s.hidden_dropout = spec.hidden_dropout;
  s.embedding_dropout = spec.embedding_dropout;
  if (spec.positions == PositionKind::rotary) {
    s.positions = StackPositions::rotary;
    s.rope_theta = spec.rope_theta > 0 ? spec.rope_theta : 10000.0;  // the common default base
  } else {
    s.positions = StackPositions::learned;
    s.max_positions = spec.max_positions;
  }
  return s;
}

namespace {

// Where a dimension was scaled (dtplan-run --scale), so an error about it is not taken for the
// model's own.
std::string scaled_note(const DenseStack& s) {
  if (s.scale == 1) return "";
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%g", s.scale);
  return std::string(" at --scale ") + text.data();
}

}  // namespace

DenseStack tensor_parallel_share(const DenseStack& whole, std::int64_t tp) {
  if (tp < 1) throw Error("tensor-parallel ranks " + std::to_string(tp) + ": not a positive count");
  if (whole.tp != 1) throw Error("tensor_parallel_share: the stack is already a share");
  auto divide = [&](const char* field, std::int64_t n) {
    if (n % tp != 0) {
      // The MLP width shrinks with --scale; the heads do not.
      const std::string scaled = std::string(field) == "ffn" ? scaled_note(whole) : "";
      throw Error(std::to_string(tp) + " tensor-parallel ranks do not divide " + field + " " +
                  std::to_string(n) + scaled + " (the split needs whole " + field +
                  " on each rank)");
    }
    return n / tp;
  };
  DenseStack s = whole;
  s.tp = tp;
  s.heads = divide("heads", whole.heads);
  s.kv_heads = divide("kv_heads", whole.kv_heads);
  s.ffn = divide("ffn", whole.ffn);
  s.vocab = (whole.vocab + tp - 1) / tp;
  return s;
}

DenseStack whole_of(const DenseStack& share) {
  DenseStack s = share;
  s.tp = 1;
  s.heads *= share.tp;
  s.kv_heads *= share.tp;
  s.ffn *= share.tp;
  s.vocab *= share.tp;
  return s;
}

DenseStack pipeline_stage(const DenseStack& whole, std::int64_t pp, std::int64_t stage) {
  if (whole.pp != 1) throw Error("pipeline_stage: the stack is already a stage");
  if (pp < 1 || whole.layers % pp != 0) {
    throw Error(std::to_string(pp) + " pipeline stages do not divide layers " +
                std::to_string(whole.layers) + " (each stage runs as many blocks)");
  }
  if (stage < 0 || stage >= pp) {
    throw Error("pipeline stage " + std::to_string(stage) + " of " + std::to_string(pp));
  }
  DenseStack s = whole;
  s.pp = pp;
  s.stage = stage;
  s.layers = whole.layers / pp;
  s.first_layer = stage * s.layers;
  return s;
}

DenseStack pipeline_whole_of(const DenseStack& stage) {
  DenseStack s = stage;
  s.layers = stage.layers * stage.pp;
  s.pp = 1;
  s.stage = s.first_layer = 0;
  return s;
}

DenseStack whole_model_of(const DenseStack& part) {
  return pipeline_whole_of(whole_of(part));
}

std::vector<DenseUnit> units_of(const DenseStack& s) {
  const std::int64_t table = s.vocab * s.hidden;
  std::vector<DenseUnit> u;
  // The final norm travels with the head's matrix: in the embedding unit when tied, unless the
  // head is on another stage (which then keeps its own copy of the tied matrix).
  const bool tied_here = s.tied && s.pp == 1;
  if (s.has_embedding()) {
    u.push_back(
        {"embedding", table + s.position_params() + (tied_here ? final_norm_params(s) : 0)});
  }
  for (std::int64_t l = 0; l < s.layers; ++l) {
    u.push_back({"block " + std::to_string(s.first_layer + l), block_params(s)});
  }
  if (s.has_head() && !tied_here) u.push_back({"head", table + final_norm_params(s)});
  return u;
}

UnitKind unit_kind(const DenseStack& s, std::int64_t unit) {
  const std::int64_t first_block = s.has_embedding() ? 1 : 0;
  const auto count = static_cast<std::int64_t>(units_of(s).size());
  if (unit < 0 || unit >= count) {
    throw Error("unit " + std::to_string(unit) + " of " + std::to_string(count));
  }
  if (unit < first_block) return UnitKind::embedding;
  return unit < first_block + s.layers ? UnitKind::block : UnitKind::head;
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
  const auto a = attention_gemms_of(s, s.seq_len);
  double attention = 0;
  for (const auto* list : {&a.forward, &a.backward}) {
    for (const auto& g : *list)
      attention += g.flops();
  }
  return matrix + attention / static_cast<double>(s.seq_len);
}

std::int64_t stored_elements_per_token(const DenseStack& s) {
  const std::int64_t h = s.hidden, mlp = (s.gated ? 3 : 2) * s.ffn;
  if (s.attention == StackAttention::value_only) {
    return s.layers * (h + s.q_size() + h + mlp) + h + s.vocab;
  }
  const std::int64_t norm = s.norm == StackNorm::none ? 0 : h + 2;  // output, mean, 1/rms
  const std::int64_t probs = s.heads * s.seq_len;
  const std::int64_t per_block = h + norm + s.qkv_size() + probs + s.q_size() + h + norm + mlp;
  // The last block's output, then on the last stage the final norm and the logits.
  const std::int64_t head_side = h + (s.has_head() ? (s.final_norm ? norm : 0) + s.vocab : 0);
  switch (s.recompute) {
    case Checkpointing::full:
      return s.layers * h + (per_block - h) + head_side;
    case Checkpointing::selective:
      return s.layers * (per_block - probs) + probs + head_side;
    case Checkpointing::none:
      break;
  }
  return s.layers * per_block + head_side;
}

std::int64_t mask_bytes_per_token(const DenseStack& s) {
  if (s.attention == StackAttention::value_only) return 0;
  const std::int64_t probs = s.attention_dropout > 0 ? s.heads * s.seq_len : 0;
  const std::int64_t hidden = s.hidden_dropout > 0 ? 2 * s.hidden : 0;
  const std::int64_t embedding = s.embedding_dropout > 0 && s.has_embedding() ? s.hidden : 0;
  switch (s.recompute) {
    case Checkpointing::full:
      return probs + hidden + embedding;
    case Checkpointing::selective:
      return s.layers * hidden + probs + embedding;
    case Checkpointing::none:
      break;
  }
  return s.layers * (probs + hidden) + embedding;
}

std::int64_t attention_scratch_elements(const DenseStack& s) {
  const std::int64_t head_grad = s.compute == ElementType::fp32 ? 0 : s.seq_len * s.head_dim;
  return s.seq_len * s.seq_len + head_grad;
}

std::int64_t scratch_elements(const DenseStack& s, std::int64_t tokens) {
  const std::int64_t mlp = (s.gated ? 3 : 2) * s.ffn;
  if (s.attention == StackAttention::value_only) {
    return tokens * (s.qkv_size() + 2 * s.hidden + mlp + s.q_size());
  }
  // Hidden dropout and row-parallel projections in fp32 use the hidden-sized temporary that
  // 16-bit compute has anyway.
  const bool temporary = (s.hidden_dropout > 0 || s.tp > 1) && s.compute == ElementType::fp32;
  const std::int64_t vocab_parallel_loss = s.tp > 1 && s.has_head() ? 3 * tokens : 0;
  return tokens * (s.qkv_size() + 3 * s.hidden + mlp + s.q_size()) + attention_scratch_elements(s) +
         mixed_precision_elements(s, tokens) + (temporary ? tokens * s.hidden : 0) +
         vocab_parallel_loss;
}

namespace {

// The extra passes of one block (see mixed_precision_passes): forward, the attention core's
// share of it (what selective recomputation reruns), backward.
struct BlockPasses {
  std::vector<ElementPass> forward, attention_forward, backward;
};

BlockPasses block_passes(const DenseStack& s, std::int64_t tokens) {
  const auto T = static_cast<double>(tokens), h = static_cast<double>(s.hidden);
  const auto f = static_cast<double>(s.ffn), qkv = static_cast<double>(s.qkv_size());
  const auto q = static_cast<double>(s.q_size()), d = static_cast<double>(s.head_dim);
  const auto S = static_cast<double>(s.seq_len);
  const double heads = static_cast<double>(s.batch(tokens) * s.heads);
  const double groups = static_cast<double>(s.batch(tokens) * s.kv_heads);
  const double unit = static_cast<double>(units_of(s)[1].params);
  const double mlp_in = s.gated ? 2 : 1, rotary = s.positions == StackPositions::rotary ? 2 : 1;
  constexpr double round = 8, add = 12, fill = 4;  // bytes per element of each pass
  BlockPasses b;
  auto fwd = [&](double bytes, double count) { b.forward.push_back({bytes, count, false}); };
  auto bwd = [&](double bytes, double count) { b.backward.push_back({bytes, count, true}); };
  // Attention core: each head's probabilities copied and rounded for p v; the output rounded.
  b.attention_forward = {{round * S * S, 2 * heads, false}, {round * T * q, 1, false}};
  fwd(round * unit, 2);   // the weights copied, then rounded
  fwd(round * T * h, 2);  // two norm outputs
  fwd(round * T * qkv, rotary);
  fwd(round * T * f, mlp_in + 1);      // up (and gate), then the activation
  if (s.gated) fwd(round * T * f, 2);  // SiLU rounded, then its product with up
  for (const auto& pass : b.attention_forward)
    b.forward.push_back(pass);
  fwd(round * T * h, 2);  // two projections rounded ...
  fwd(add * T * h, 2);    // ... then added to the residual
  bwd(round * unit, 2);
  bwd(round * T * h, 4);                      // two rounded copies of the residual's gradient
  bwd(round * T * f, 1 + (s.gated ? 5 : 1));  // dact; GELU's, or SwiGLU's five roundings
  bwd(round * T * q, 2);                      // dattn; the query gradients
  bwd(round * T * h, 2);                      // two input gradients into the norms
  if (s.gated) bwd(round * T * h, 1), bwd(add * T * h, 1);  // up's, added to gate's
  bwd(round * S * S, 3 * heads);  // probabilities copied and rounded; dp rounded
  bwd(round * S * d, 2 * heads);  // each head's dv and dk rounded ...
  bwd(add * S * d, 2 * heads);    // ... and added to its group's
  bwd(round * S * d, 2 * groups);
  if (s.positions == StackPositions::rotary) bwd(round * T * qkv, 1);
  auto weight_grad = [&](double out, double in, bool bias, double count) {
    bwd(round * out * in, count);
    bwd(add * out * in, count);
    if (bias) bwd(fill * out, count), bwd(round * out, count), bwd(add * out, count);
  };
  weight_grad(h, f, s.mlp_bias, 1);
  weight_grad(f, h, s.mlp_bias, mlp_in);
  weight_grad(h, q, s.out_bias, 1);
  weight_grad(qkv, h, s.qkv_bias, 1);
  return b;
}

}  // namespace

std::int64_t largest_matrix(const DenseStack& s) {
  const std::int64_t h = s.hidden;
  return std::max({s.has_head() ? s.vocab * h : 0, s.qkv_size() * h, s.q_size() * h, s.ffn * h});
}

std::int64_t largest_unit(const DenseStack& s) {
  std::int64_t most = 0;
  for (const auto& u : units_of(s))
    most = std::max(most, u.params);
  return most;
}

std::int64_t mixed_precision_elements(const DenseStack& s, std::int64_t tokens) {
  if (s.compute == ElementType::fp32 || s.attention == StackAttention::value_only) return 0;
  return largest_unit(s) + largest_matrix(s) + tokens * s.hidden;
}

std::vector<ElementPass> mixed_precision_passes(const DenseStack& s, std::int64_t tokens) {
  if (s.compute == ElementType::fp32 || s.attention == StackAttention::value_only) return {};
  const auto b = block_passes(s, tokens);
  const auto T = static_cast<double>(tokens), h = static_cast<double>(s.hidden);
  const auto V = static_cast<double>(s.vocab), L = static_cast<double>(s.layers);
  std::vector<ElementPass> out;
  auto times = [&](const std::vector<ElementPass>& passes, double n, bool backward) {
    for (auto p : passes) {
      p.count *= n;
      p.backward = backward;
      out.push_back(p);
    }
  };
  times(b.forward, L, false);
  times(b.backward, L, true);
  if (s.recompute == Checkpointing::full) times(b.forward, L, true);
  if (s.recompute == Checkpointing::selective) times(b.attention_forward, L, true);
  if (!s.has_head()) return out;  // a pipeline stage before the last
  // Head: its matrix copied and rounded, the final norm's output and the logits rounded;
  // backward: the logits' and the input's gradients, the weight gradient rounded and added.
  out.insert(out.end(), {{8 * V * h, 2, false},
                         {8 * T * h, 1, false},
                         {8 * T * V, 1, false},
                         {8 * T * V, 1, true},
                         {8 * T * h, 1, true},
                         {8 * V * h, 1, true},
                         {12 * V * h, 1, true}});
  return out;
}

namespace {

// One block's dropout work (see dropout_work): forward, its attention core's share, backward.
struct BlockDropout {
  double draws = 0, attention_draws = 0;
  std::vector<ElementPass> forward, attention_forward, backward;
};

BlockDropout block_dropout(const DenseStack& s, std::int64_t tokens) {
  const auto T = static_cast<double>(tokens), h = static_cast<double>(s.hidden);
  const auto S = static_cast<double>(s.seq_len);
  const double heads = static_cast<double>(s.batch(tokens) * s.heads);
  const bool half = s.compute != ElementType::fp32;
  constexpr double drop = 9, copy = 8, round = 8, add = 12, zero = 1;
  BlockDropout b;
  if (s.hidden_dropout > 0) {
    // Per projection: forward drops its output (rounded again in 16 bits) and adds the
    // residual (16-bit compute added it already); backward copies the gradient and drops it.
    b.draws += 2 * T * h;
    b.forward.push_back({(half ? drop + round : drop + add) * T * h, 2, false});
    b.backward.push_back({(half ? drop + round : drop + copy) * T * h, 2, true});
  }
  if (s.attention_dropout > 0) {
    // Per (sequence, head): the square's kept probabilities (a copy in fp32; 16-bit compute
    // copies and rounds anyway) dropped for p v, again in backward for dv, and dp dropped.
    b.attention_draws = heads * S * (S + 1) / 2;
    const double per_square = (half ? drop + round : drop + copy) * S * S;
    b.attention_forward = {{per_square, heads, false}, {zero * S * (S - 1) / 2, heads, false}};
    b.backward.push_back({per_square, heads, true});
    b.backward.push_back({(half ? drop + round : drop) * S * S, heads, true});
  }
  b.draws += b.attention_draws;
  b.forward.insert(b.forward.end(), b.attention_forward.begin(), b.attention_forward.end());
  return b;
}

}  // namespace

DropoutWork dropout_work(const DenseStack& s, std::int64_t tokens) {
  DropoutWork w;
  if (s.attention == StackAttention::value_only) return w;
  const auto b = block_dropout(s, tokens);
  const auto L = static_cast<double>(s.layers);
  auto times = [&](const std::vector<ElementPass>& passes, bool backward) {
    for (auto p : passes) {
      p.count *= L;
      p.backward = backward;
      w.passes.push_back(p);
    }
  };
  w.forward_draws = L * b.draws;
  times(b.forward, false);
  times(b.backward, true);
  if (s.recompute == Checkpointing::full) {
    w.backward_draws = L * b.draws;
    times(b.forward, true);
  }
  if (s.recompute == Checkpointing::selective) {
    w.backward_draws = L * b.attention_draws;
    times(b.attention_forward, true);
  }
  if (s.embedding_dropout > 0 && s.has_embedding()) {  // drawn and dropped forward and back
    const double e = static_cast<double>(tokens * s.hidden);
    w.forward_draws += e;
    w.passes.push_back({9 * e, 1, false});
    w.passes.push_back({9 * e, 1, true});
  }
  return w;
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
  if (s.has_head()) linear(s.hidden, s.vocab, 1);  // the LM head, last
  return g;
}

AttentionGemms attention_gemms_of(const DenseStack& s, std::int64_t tokens) {
  AttentionGemms a;
  if (s.attention == StackAttention::value_only) return a;
  const std::int64_t S = s.seq_len, d = s.head_dim, n = s.batch(tokens) * s.heads * s.layers;
  a.forward = {{S, S, d, n}, {S, d, S, n}};                               // q k^T, p v
  a.backward = {{S, d, S, n}, {S, S, d, n}, {S, d, S, n}, {S, d, S, n}};  // dv, dp, dq, dk
  return a;
}

nlohmann::json to_json(const DenseStack& s) {
  nlohmann::json j{{"vocab", s.vocab},
                   {"hidden", s.hidden},
                   {"heads", s.heads},
                   {"kv_heads", s.kv_heads},
                   {"head_dim", s.head_dim},
                   {"ffn", s.ffn},
                   {"layers", s.layers},
                   {"seq_len", s.seq_len},
                   {"gated", s.gated},
                   {"tied", s.tied},
                   {"scale", s.scale},
                   {"params", params_of(s)},
                   {"flops_per_token", flops_per_token(s)}};
  if (s.tp > 1) j["tp"] = s.tp;
  if (s.pp > 1) j["pipeline"] = {{"pp", s.pp}, {"stage", s.stage}, {"first_layer", s.first_layer}};
  if (s.attention == StackAttention::value_only) {
    j["attention"] = "value_only";
    j["bias"] = s.qkv_bias;
    return j;
  }
  j["attention"] = "causal";
  j["recompute"] = std::string(name_of(s.recompute));
  j["compute"] = std::string(name_of(s.compute));
  j["qkv_bias"] = s.qkv_bias;
  j["out_bias"] = s.out_bias;
  j["mlp_bias"] = s.mlp_bias;
  j["norm"] = s.norm == StackNorm::rmsnorm ? "rmsnorm" : "layernorm";
  j["final_norm"] = s.final_norm;
  j["norm_eps"] = s.norm_eps;
  j["dropout"] = {{"attention", s.attention_dropout},
                  {"hidden", s.hidden_dropout},
                  {"embedding", s.embedding_dropout}};
  if (s.positions == StackPositions::rotary) {
    j["positions"] = "rotary";
    j["rope_theta"] = s.rope_theta;
  } else {
    j["positions"] = "learned";
    j["max_positions"] = s.max_positions;
  }
  return j;
}

namespace {

// Files without "attention" were written when the runtime ran the value_only workload.
void read_layer_kinds(const ObjectReader& r, DenseStack& s) {
  const auto attention = r.has("attention") ? r.string("attention") : std::string("value_only");
  if (attention == "value_only") {
    s.attention = StackAttention::value_only;
    s.qkv_bias = s.out_bias = s.mlp_bias = r.boolean("bias");
    s.norm = StackNorm::none;
    s.final_norm = false;
    s.positions = StackPositions::none;
    return;
  }
  if (attention != "causal")
    r.fail("attention", "is \"" + attention + "\", not causal or value_only");
  s.attention = StackAttention::causal;
  if (r.has("recompute")) {
    try {
      s.recompute = parse_checkpointing(r.string("recompute"));
    } catch (const Error& e) {
      r.fail("recompute", e.what());
    }
  }
  // Files written before mixed precision was executed computed in fp32.
  if (r.has("compute")) {
    const auto compute = r.string("compute");
    if (compute == "bf16") {
      s.compute = ElementType::bf16;
    } else if (compute == "fp16") {
      s.compute = ElementType::fp16;
    } else if (compute != "fp32") {
      r.fail("compute", "is \"" + compute + "\", not fp32, bf16 or fp16");
    }
  }
  s.qkv_bias = r.boolean("qkv_bias");
  s.out_bias = r.boolean("out_bias");
  s.mlp_bias = r.boolean("mlp_bias");
  const auto norm = r.string("norm");
  if (norm != "layernorm" && norm != "rmsnorm") {
    r.fail("norm", "is \"" + norm + "\", not layernorm or rmsnorm");
  }
  s.norm = norm == "rmsnorm" ? StackNorm::rmsnorm : StackNorm::layernorm;
  s.final_norm = r.boolean("final_norm");
  s.norm_eps = r.number("norm_eps", NumberRange::positive(1.0));
  // Files written before dropout was executed ran without it.
  if (const auto d = r.optional_object("dropout")) {
    s.attention_dropout = d->number("attention", kDropoutProbability);
    s.hidden_dropout = d->number("hidden", kDropoutProbability);
    s.embedding_dropout = d->number("embedding", kDropoutProbability);
  }
  const auto positions = r.string("positions");
  if (positions == "rotary") {
    s.positions = StackPositions::rotary;
    s.rope_theta = r.number("rope_theta", NumberRange::positive(1e12));
  } else if (positions == "learned") {
    s.positions = StackPositions::learned;
    s.max_positions = r.positive_integer("max_positions");
  } else {
    r.fail("positions", "is \"" + positions + "\", not rotary or learned");
  }
}

}  // namespace

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
  s.tied = r.boolean("tied");
  if (r.has("tp")) s.tp = r.positive_integer("tp");    // files before tensor parallelism: 1
  if (const auto p = r.optional_object("pipeline")) {  // files before pipelines: one stage
    s.pp = p->positive_integer("pp");
    s.stage = p->integer("stage", 0, s.pp - 1);
    s.first_layer = p->integer("first_layer", 0, 1'000'000);
    p->reject_unknown_keys();
  }
  read_layer_kinds(r, s);
  s.scale = r.number("scale", NumberRange::positive(1.0));  // dtplan-run --scale, (0, 1]
  if (s.hidden != s.heads * s.head_dim * s.tp) r.fail("hidden", "is not heads x head_dim x tp");
  if (s.heads % s.kv_heads != 0) r.fail("kv_heads", "does not divide heads");
  if (r.integer("params") != params_of(s)) r.fail("params", "does not match the shape");
  (void)r.number("flops_per_token");
  r.reject_unknown_keys();
  return s;
}

}  // namespace dtplan::cost
