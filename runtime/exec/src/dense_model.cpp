// Forward and backward of the dense stack, unit by unit. For a Linear in -> out over T tokens
// with W[out x in]: y = x W^T;  dx = dy W;  dW += dy^T x;  db += column sums of dy.
#include "dtplan/runtime/dense_model.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {

namespace {

// Offsets of one block's tensors inside the block's unit.
struct BlockOffsets {
  std::int64_t n1 = 0, wqkv = 0, bqkv = 0, wo = 0, bo = 0, n2 = 0, wg = 0, bg = 0, wu = 0, bu = 0,
               wd = 0, bd = 0, end = 0;
};

BlockOffsets block_offsets(const cost::DenseStack& s) {
  const std::int64_t h = s.hidden, f = s.ffn;
  BlockOffsets o;
  std::int64_t at = 0;
  auto take = [&at](std::int64_t n) {
    const auto here = at;
    at += n;
    return here;
  };
  auto bias = [](bool has, std::int64_t n) { return has ? n : 0; };
  o.n1 = take(s.norm_params());
  o.wqkv = take(s.qkv_size() * h);
  o.bqkv = take(bias(s.qkv_bias, s.qkv_size()));
  o.wo = take(h * s.q_size());
  o.bo = take(bias(s.out_bias, h));
  o.n2 = take(s.norm_params());
  if (s.gated) {
    o.wg = take(f * h);
    o.bg = take(bias(s.mlp_bias, f));
  }
  o.wu = take(f * h);
  o.bu = take(bias(s.mlp_bias, f));
  o.wd = take(h * f);
  o.bd = take(bias(s.mlp_bias, h));
  o.end = at;
  return o;
}

// A norm's scale and shift inside a unit (shift null for RMSNorm).
struct NormParams {
  const float* gamma;
  const float* beta;
};
struct NormGrads {
  float* gamma;
  float* beta;
};
NormParams norm_at(const cost::DenseStack& s, const float* p) {
  return {p, s.norm == cost::StackNorm::layernorm ? p + s.hidden : nullptr};
}
NormGrads norm_grads_at(const cost::DenseStack& s, float* p) {
  return {p, s.norm == cost::StackNorm::layernorm ? p + s.hidden : nullptr};
}

}  // namespace

DenseModel::DenseModel(const cost::DenseStack& stack, Device& device, std::int64_t tokens)
    : s_(stack), dev_(device), tokens_(tokens) {
  if (s_.attention != cost::StackAttention::causal || s_.norm == cost::StackNorm::none) {
    throw Error("dense stack: the value_only workload of older measurements is not executed");
  }
  if (tokens % s_.seq_len != 0) {
    throw Error("dense stack: " + std::to_string(tokens) + " tokens are not whole sequences of " +
                std::to_string(s_.seq_len));
  }
  const auto act = MemoryComponent::activations;
  const std::int64_t T = tokens, h = s_.hidden, f = s_.ffn;
  auto keep = [&](std::vector<Buffer>& v, std::int64_t floats) {
    v.push_back(dev_.allocate_floats(floats, act));
  };
  for (std::int64_t l = 0; l <= s_.layers; ++l)
    keep(x_, T * h);
  const bool full = s_.recompute == Checkpointing::full;
  for (std::int64_t l = 0; l < (full ? 1 : s_.layers); ++l) {
    keep(ln1_, T * h);
    keep(st1_, T * 2);
    keep(qkv_, T * s_.qkv_size());
    if (l == 0 || s_.recompute == Checkpointing::none) keep(probs_, T * s_.heads * s_.seq_len);
    keep(attn_, T * s_.q_size());
    keep(mid_, T * h);
    keep(ln2_, T * h);
    keep(st2_, T * 2);
    keep(up_, T * f);
    if (s_.gated) keep(gate_, T * f);
    keep(act_, T * f);
  }
  if (s_.final_norm) {
    lnf_ = dev_.allocate_floats(T * h, act);
    stf_ = dev_.allocate_floats(T * 2, act);
  }
  logits_ = dev_.allocate_floats(T * s_.vocab, act);
  const auto buf = MemoryComponent::buffers;
  dx_ = dev_.allocate_floats(T * h, buf);
  dmid_ = dev_.allocate_floats(T * h, buf);
  dln_ = dev_.allocate_floats(T * h, buf);
  dact_ = dev_.allocate_floats(T * f, buf);
  dup_ = dev_.allocate_floats(T * f, buf);
  if (s_.gated) dgate_ = dev_.allocate_floats(T * f, buf);
  dattn_ = dev_.allocate_floats(T * s_.q_size(), buf);
  dqkv_ = dev_.allocate_floats(T * s_.qkv_size(), buf);
  scratch_ = dev_.allocate_floats(cost::attention_scratch_elements(s_), buf);
}

std::size_t DenseModel::slot(std::int64_t l) const {
  return s_.recompute == Checkpointing::full ? 0 : static_cast<std::size_t>(l);
}

std::size_t DenseModel::probs_slot(std::int64_t l) const {
  return s_.recompute == Checkpointing::none ? static_cast<std::size_t>(l) : 0;
}

AttentionShape DenseModel::shape() const {
  return {s_.batch(tokens_), s_.seq_len, s_.heads, s_.kv_heads, s_.head_dim};
}

void DenseModel::forward_embedding(const float* table, const std::int32_t* ids) {
  dev_.embedding(ids, table, x_[0].f(), tokens_, s_.hidden);
  if (s_.positions == cost::StackPositions::learned) {
    dev_.add_positions(x_[0].f(), table + s_.vocab * s_.hidden, tokens_, s_.seq_len, s_.hidden);
  }
}

void DenseModel::forward_block(std::int64_t l, const float* p) {
  const auto o = block_offsets(s_);
  const std::int64_t T = tokens_, h = s_.hidden, f = s_.ffn, q = s_.q_size();
  const auto i = slot(l), xi = static_cast<std::size_t>(l);
  const auto eps = static_cast<float>(s_.norm_eps);
  const float* x = x_[xi].f();
  float* mid = mid_[i].f();
  float* qkv = qkv_[i].f();
  const auto n1 = norm_at(s_, p + o.n1), n2 = norm_at(s_, p + o.n2);
  // Attention: norm, QKV, rotary, causal softmax attention, output projection + residual.
  dev_.norm(x, n1.gamma, n1.beta, ln1_[i].f(), st1_[i].f(), T, h, eps);
  dev_.gemm(false, true, T, s_.qkv_size(), h, 1, ln1_[i].f(), p + o.wqkv, 0, qkv);
  if (s_.qkv_bias) dev_.add_bias(qkv, p + o.bqkv, T, s_.qkv_size());
  if (s_.positions == cost::StackPositions::rotary) {
    dev_.rotary(qkv, shape(), static_cast<float>(s_.rope_theta), false);
  }
  dev_.attention(qkv, probs_[probs_slot(l)].f(), attn_[i].f(), shape(), scratch_.f());
  dev_.copy(x, mid, T * h);  // residual
  dev_.gemm(false, true, T, h, q, 1, attn_[i].f(), p + o.wo, 1, mid);
  if (s_.out_bias) dev_.add_bias(mid, p + o.bo, T, h);
  // MLP: norm, up (and gate), activation, down projection + residual.
  const float* ln2 = ln2_[i].f();
  dev_.norm(mid, n2.gamma, n2.beta, ln2_[i].f(), st2_[i].f(), T, h, eps);
  dev_.gemm(false, true, T, f, h, 1, ln2, p + o.wu, 0, up_[i].f());
  if (s_.mlp_bias) dev_.add_bias(up_[i].f(), p + o.bu, T, f);
  if (s_.gated) {
    dev_.gemm(false, true, T, f, h, 1, ln2, p + o.wg, 0, gate_[i].f());
    if (s_.mlp_bias) dev_.add_bias(gate_[i].f(), p + o.bg, T, f);
    dev_.swiglu(gate_[i].f(), up_[i].f(), act_[i].f(), T * f);
  } else {
    dev_.gelu(up_[i].f(), act_[i].f(), T * f);
  }
  float* out = x_[xi + 1].f();
  dev_.copy(mid, out, T * h);  // residual
  dev_.gemm(false, true, T, h, f, 1, act_[i].f(), p + o.wd, 1, out);
  if (s_.mlp_bias) dev_.add_bias(out, p + o.bd, T, h);
}

const float* DenseModel::head_norm(const float* w) const {
  const std::int64_t after = s_.vocab * s_.hidden + (s_.tied ? s_.position_params() : 0);
  return w + after;
}

const float* DenseModel::head_input() const {
  return s_.final_norm ? lnf_.f() : x_[static_cast<std::size_t>(s_.layers)].f();
}

double DenseModel::forward_head(const float* w, const std::int32_t* targets, float grad_scale) {
  const auto last = static_cast<std::size_t>(s_.layers);
  if (s_.final_norm) {
    const auto n = norm_at(s_, head_norm(w));
    dev_.norm(x_[last].f(), n.gamma, n.beta, lnf_.f(), stf_.f(), tokens_, s_.hidden,
              static_cast<float>(s_.norm_eps));
  }
  dev_.gemm(false, true, tokens_, s_.vocab, s_.hidden, 1, head_input(), w, 0, logits_.f());
  return dev_.softmax_cross_entropy(logits_.f(), targets, tokens_, s_.vocab, grad_scale);
}

void DenseModel::backward_head(const float* w, float* dw) {
  const auto last = static_cast<std::size_t>(s_.layers);
  const std::int64_t T = tokens_, h = s_.hidden;
  float* d_input = s_.final_norm ? dln_.f() : dx_.f();
  dev_.gemm(false, false, T, h, s_.vocab, 1, logits_.f(), w, 0, d_input);
  dev_.gemm(true, false, s_.vocab, h, T, 1, logits_.f(), head_input(), 1, dw);
  if (s_.final_norm) {
    const auto n = norm_at(s_, head_norm(w));
    const auto g = norm_grads_at(s_, dw + (head_norm(w) - w));
    dev_.fill(dx_.f(), 0, T * h);
    dev_.norm_backward(x_[last].f(), n.gamma, stf_.f(), dln_.f(), dx_.f(), g.gamma, g.beta, T, h);
  }
}

void DenseModel::backward_block(std::int64_t l, const float* p, float* dp) {
  const auto o = block_offsets(s_);
  const std::int64_t T = tokens_, h = s_.hidden, f = s_.ffn, q = s_.q_size();
  if (s_.recompute == Checkpointing::full) forward_block(l, p);
  const auto i = slot(l), xi = static_cast<std::size_t>(l);
  float* probs = probs_[probs_slot(l)].f();
  if (s_.recompute == Checkpointing::selective) {
    dev_.attention(qkv_[i].f(), probs, attn_[i].f(), shape(), scratch_.f());
  }
  const auto n1 = norm_at(s_, p + o.n1), n2 = norm_at(s_, p + o.n2);
  const auto g1 = norm_grads_at(s_, dp + o.n1), g2 = norm_grads_at(s_, dp + o.n2);
  const float* ln2 = ln2_[i].f();
  // MLP down projection; dmid starts as the residual gradient.
  dev_.gemm(false, false, T, f, h, 1, dx_.f(), p + o.wd, 0, dact_.f());
  dev_.gemm(true, false, h, f, T, 1, dx_.f(), act_[i].f(), 1, dp + o.wd);
  if (s_.mlp_bias) dev_.bias_grad(dx_.f(), dp + o.bd, T, h);
  dev_.copy(dx_.f(), dmid_.f(), T * h);
  // Activation, then the up (and gate) projections into the second norm's output gradient.
  if (s_.gated) {
    dev_.swiglu_backward(gate_[i].f(), up_[i].f(), dact_.f(), dgate_.f(), dup_.f(), T * f);
    dev_.gemm(false, false, T, h, f, 1, dgate_.f(), p + o.wg, 0, dln_.f());
    dev_.gemm(true, false, f, h, T, 1, dgate_.f(), ln2, 1, dp + o.wg);
    if (s_.mlp_bias) dev_.bias_grad(dgate_.f(), dp + o.bg, T, f);
  } else {
    dev_.gelu_backward(up_[i].f(), dact_.f(), dup_.f(), T * f);
  }
  dev_.gemm(false, false, T, h, f, 1, dup_.f(), p + o.wu, s_.gated ? 1 : 0, dln_.f());
  dev_.gemm(true, false, f, h, T, 1, dup_.f(), ln2, 1, dp + o.wu);
  if (s_.mlp_bias) dev_.bias_grad(dup_.f(), dp + o.bu, T, f);
  dev_.norm_backward(mid_[i].f(), n2.gamma, st2_[i].f(), dln_.f(), dmid_.f(), g2.gamma, g2.beta, T,
                     h);
  // Attention output projection, attention, rotary back, QKV projection, first norm.
  dev_.gemm(false, false, T, q, h, 1, dmid_.f(), p + o.wo, 0, dattn_.f());
  dev_.gemm(true, false, h, q, T, 1, dmid_.f(), attn_[i].f(), 1, dp + o.wo);
  if (s_.out_bias) dev_.bias_grad(dmid_.f(), dp + o.bo, T, h);
  dev_.attention_backward(qkv_[i].f(), attn_[i].f(), dattn_.f(), probs, dqkv_.f(), shape(),
                          scratch_.f());
  if (s_.positions == cost::StackPositions::rotary) {
    dev_.rotary(dqkv_.f(), shape(), static_cast<float>(s_.rope_theta), true);
  }
  dev_.gemm(false, false, T, h, s_.qkv_size(), 1, dqkv_.f(), p + o.wqkv, 0, dln_.f());
  dev_.gemm(true, false, s_.qkv_size(), h, T, 1, dqkv_.f(), ln1_[i].f(), 1, dp + o.wqkv);
  if (s_.qkv_bias) dev_.bias_grad(dqkv_.f(), dp + o.bqkv, T, s_.qkv_size());
  dev_.copy(dmid_.f(), dx_.f(), T * h);
  dev_.norm_backward(x_[xi].f(), n1.gamma, st1_[i].f(), dln_.f(), dx_.f(), g1.gamma, g1.beta, T, h);
}

void DenseModel::backward_embedding(const std::int32_t* ids, float* dtable) {
  dev_.embedding_backward(ids, dx_.f(), dtable, tokens_, s_.hidden);
  if (s_.positions == cost::StackPositions::learned) {
    dev_.positions_backward(dx_.f(), dtable + s_.vocab * s_.hidden, tokens_, s_.seq_len, s_.hidden);
  }
}

namespace {

// splitmix64: a fixed, well-mixed function of (seed, index) for reproducible values.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-a, a] with standard deviation `std`.
float uniform(std::uint64_t key, float std) {
  const double u = static_cast<double>(mix(key) >> 11) / 9007199254740992.0;  // [0, 1)
  return static_cast<float>((2 * u - 1) * std * std::sqrt(3.0));
}

}  // namespace

std::vector<float> DenseModel::initial_unit(const cost::DenseStack& stack, std::int64_t unit,
                                            std::uint64_t seed) {
  const auto units = cost::units_of(stack);
  const auto n = units.at(static_cast<std::size_t>(unit)).params;
  std::vector<float> v(static_cast<std::size_t>(n), 0.0f);
  const std::uint64_t base = mix(seed ^ mix(static_cast<std::uint64_t>(unit)));
  auto fill = [&](std::int64_t from, std::int64_t count, float std) {
    for (std::int64_t k = from; k < from + count; ++k) {
      v[static_cast<std::size_t>(k)] = uniform(base + static_cast<std::uint64_t>(k), std);
    }
  };
  const bool is_block = unit >= 1 && unit <= stack.layers;
  const std::int64_t table = stack.vocab * stack.hidden;
  auto ones = [&](std::int64_t from) {  // a norm's scale; its shift stays zero
    std::fill(v.begin() + from, v.begin() + from + stack.hidden, 1.0f);
  };
  if (!is_block) {
    // The token (or head) matrix and learned positions at 0.02; then the final norm.
    const std::int64_t weights = table + (unit == 0 ? stack.position_params() : 0);
    fill(0, weights, 0.02f);
    if (weights < n) ones(weights);
    return v;
  }
  // Weights at 0.02, output projections at 0.02 / sqrt(2 L); biases stay zero.
  const auto o = block_offsets(stack);
  const float out_std = 0.02f / std::sqrt(2.0f * static_cast<float>(stack.layers));
  ones(o.n1);
  ones(o.n2);
  fill(o.wqkv, o.bqkv - o.wqkv, 0.02f);
  fill(o.wo, o.bo - o.wo, out_std);
  if (stack.gated) fill(o.wg, o.bg - o.wg, 0.02f);
  fill(o.wu, o.bu - o.wu, 0.02f);
  fill(o.wd, o.bd - o.wd, out_std);
  return v;
}

}  // namespace dtplan::runtime
