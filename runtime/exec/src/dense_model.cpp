// Forward and backward of the dense stack, unit by unit. For a Linear in -> out over T tokens
// with W[out x in]: y = x W^T;  dx = dy W;  dW += dy^T x;  db += column sums of dy.
#include "dtplan/runtime/dense_model.hpp"

#include <cmath>

namespace dtplan::runtime {

namespace {

// Offsets of one block's tensors inside the block's unit.
struct BlockOffsets {
  std::int64_t wqkv = 0, bqkv = 0, wo = 0, bo = 0, wg = 0, bg = 0, wu = 0, bu = 0, wd = 0, bd = 0,
               end = 0;
};

BlockOffsets block_offsets(const cost::DenseStack& s) {
  const std::int64_t h = s.hidden, f = s.ffn, b = s.bias ? 1 : 0;
  BlockOffsets o;
  std::int64_t at = 0;
  auto take = [&at](std::int64_t n) {
    const auto here = at;
    at += n;
    return here;
  };
  o.wqkv = take(s.qkv_size() * h);
  o.bqkv = take(b * s.qkv_size());
  o.wo = take(h * s.q_size());
  o.bo = take(b * h);
  if (s.gated) {
    o.wg = take(f * h);
    o.bg = take(b * f);
  }
  o.wu = take(f * h);
  o.bu = take(b * f);
  o.wd = take(h * f);
  o.bd = take(b * h);
  o.end = at;
  return o;
}

}  // namespace

DenseModel::DenseModel(const cost::DenseStack& stack, Device& device, std::int64_t tokens)
    : s_(stack), dev_(device), tokens_(tokens) {
  const auto act = MemoryComponent::activations;
  const std::int64_t T = tokens, h = s_.hidden, f = s_.ffn;
  for (std::int64_t l = 0; l <= s_.layers; ++l)
    x_.push_back(dev_.allocate_floats(T * h, act));
  for (std::int64_t l = 0; l < s_.layers; ++l) {
    attn_.push_back(dev_.allocate_floats(T * s_.q_size(), act));
    mid_.push_back(dev_.allocate_floats(T * h, act));
    up_.push_back(dev_.allocate_floats(T * f, act));
    if (s_.gated) gate_.push_back(dev_.allocate_floats(T * f, act));
    act_.push_back(dev_.allocate_floats(T * f, act));
  }
  logits_ = dev_.allocate_floats(T * s_.vocab, act);
  const auto buf = MemoryComponent::buffers;
  qkv_ = dev_.allocate_floats(T * s_.qkv_size(), buf);
  dx_ = dev_.allocate_floats(T * h, buf);
  dmid_ = dev_.allocate_floats(T * h, buf);
  dact_ = dev_.allocate_floats(T * f, buf);
  dup_ = dev_.allocate_floats(T * f, buf);
  if (s_.gated) dgate_ = dev_.allocate_floats(T * f, buf);
  dattn_ = dev_.allocate_floats(T * s_.q_size(), buf);
}

void DenseModel::forward_embedding(const float* table, const std::int32_t* ids) {
  dev_.embedding(ids, table, x_[0].f(), tokens_, s_.hidden);
}

void DenseModel::forward_block(std::int64_t l, const float* p) {
  const auto o = block_offsets(s_);
  const std::int64_t T = tokens_, h = s_.hidden, f = s_.ffn, q = s_.q_size();
  const auto i = static_cast<std::size_t>(l);
  const float* x = x_[i].f();
  float* mid = mid_[i].f();
  dev_.gemm(false, true, T, s_.qkv_size(), h, 1, x, p + o.wqkv, 0, qkv_.f());
  if (s_.bias) dev_.add_bias(qkv_.f(), p + o.bqkv, T, s_.qkv_size());
  dev_.value_heads(qkv_.f(), attn_[i].f(), T, s_.heads, s_.kv_heads, s_.head_dim);
  dev_.copy(x, mid, T * h);  // residual
  dev_.gemm(false, true, T, h, q, 1, attn_[i].f(), p + o.wo, 1, mid);
  if (s_.bias) dev_.add_bias(mid, p + o.bo, T, h);
  dev_.gemm(false, true, T, f, h, 1, mid, p + o.wu, 0, up_[i].f());
  if (s_.bias) dev_.add_bias(up_[i].f(), p + o.bu, T, f);
  if (s_.gated) {
    dev_.gemm(false, true, T, f, h, 1, mid, p + o.wg, 0, gate_[i].f());
    if (s_.bias) dev_.add_bias(gate_[i].f(), p + o.bg, T, f);
    dev_.swiglu(gate_[i].f(), up_[i].f(), act_[i].f(), T * f);
  } else {
    dev_.gelu(up_[i].f(), act_[i].f(), T * f);
  }
  float* out = x_[i + 1].f();
  dev_.copy(mid, out, T * h);  // residual
  dev_.gemm(false, true, T, h, f, 1, act_[i].f(), p + o.wd, 1, out);
  if (s_.bias) dev_.add_bias(out, p + o.bd, T, h);
}

double DenseModel::forward_head(const float* w, const std::int32_t* targets, float grad_scale) {
  const auto last = static_cast<std::size_t>(s_.layers);
  dev_.gemm(false, true, tokens_, s_.vocab, s_.hidden, 1, x_[last].f(), w, 0, logits_.f());
  return dev_.softmax_cross_entropy(logits_.f(), targets, tokens_, s_.vocab, grad_scale);
}

void DenseModel::backward_head(const float* w, float* dw) {
  const auto last = static_cast<std::size_t>(s_.layers);
  dev_.gemm(false, false, tokens_, s_.hidden, s_.vocab, 1, logits_.f(), w, 0, dx_.f());
  dev_.gemm(true, false, s_.vocab, s_.hidden, tokens_, 1, logits_.f(), x_[last].f(), 1, dw);
}

void DenseModel::backward_block(std::int64_t l, const float* p, float* dp) {
  const auto o = block_offsets(s_);
  const std::int64_t T = tokens_, h = s_.hidden, f = s_.ffn, q = s_.q_size();
  const auto i = static_cast<std::size_t>(l);
  // MLP down projection.
  dev_.gemm(false, false, T, f, h, 1, dx_.f(), p + o.wd, 0, dact_.f());
  dev_.gemm(true, false, h, f, T, 1, dx_.f(), act_[i].f(), 1, dp + o.wd);
  if (s_.bias) dev_.bias_grad(dx_.f(), dp + o.bd, T, h);
  // Activation, then the up (and gate) projections; dmid starts as the residual gradient.
  dev_.copy(dx_.f(), dmid_.f(), T * h);
  if (s_.gated) {
    dev_.swiglu_backward(gate_[i].f(), up_[i].f(), dact_.f(), dgate_.f(), dup_.f(), T * f);
    dev_.gemm(false, false, T, h, f, 1, dgate_.f(), p + o.wg, 1, dmid_.f());
    dev_.gemm(true, false, f, h, T, 1, dgate_.f(), mid_[i].f(), 1, dp + o.wg);
    if (s_.bias) dev_.bias_grad(dgate_.f(), dp + o.bg, T, f);
  } else {
    dev_.gelu_backward(up_[i].f(), dact_.f(), dup_.f(), T * f);
  }
  dev_.gemm(false, false, T, h, f, 1, dup_.f(), p + o.wu, 1, dmid_.f());
  dev_.gemm(true, false, f, h, T, 1, dup_.f(), mid_[i].f(), 1, dp + o.wu);
  if (s_.bias) dev_.bias_grad(dup_.f(), dp + o.bu, T, f);
  // Attention output projection, then the value heads back into the fused QKV gradient.
  dev_.gemm(false, false, T, q, h, 1, dmid_.f(), p + o.wo, 0, dattn_.f());
  dev_.gemm(true, false, h, q, T, 1, dmid_.f(), attn_[i].f(), 1, dp + o.wo);
  if (s_.bias) dev_.bias_grad(dmid_.f(), dp + o.bo, T, h);
  dev_.value_heads_backward(dattn_.f(), qkv_.f(), T, s_.heads, s_.kv_heads, s_.head_dim);
  // QKV projection; dx(l) = dmid + dqkv Wqkv.
  dev_.copy(dmid_.f(), dx_.f(), T * h);
  dev_.gemm(false, false, T, h, s_.qkv_size(), 1, qkv_.f(), p + o.wqkv, 1, dx_.f());
  dev_.gemm(true, false, s_.qkv_size(), h, T, 1, qkv_.f(), x_[i].f(), 1, dp + o.wqkv);
  if (s_.bias) dev_.bias_grad(qkv_.f(), dp + o.bqkv, T, s_.qkv_size());
}

void DenseModel::backward_embedding(const std::int32_t* ids, float* dtable) {
  dev_.embedding_backward(ids, dx_.f(), dtable, tokens_, s_.hidden);
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
  if (!is_block) {
    fill(0, n, 0.02f);
    return v;
  }
  // Weights at 0.02, output projections at 0.02 / sqrt(2 L); biases stay zero.
  const auto o = block_offsets(stack);
  const float out_std = 0.02f / std::sqrt(2.0f * static_cast<float>(stack.layers));
  fill(o.wqkv, o.bqkv - o.wqkv, 0.02f);
  fill(o.wo, o.bo - o.wo, out_std);
  if (stack.gated) fill(o.wg, o.bg - o.wg, 0.02f);
  fill(o.wu, o.bu - o.wu, 0.02f);
  fill(o.wd, o.bd - o.wd, out_std);
  return v;
}

}  // namespace dtplan::runtime
