// Forward and backward of the dense stack, unit by unit. For a Linear in -> out over T tokens
// with W[out x in]: y = x W^T;  dx = dy W;  dW += dy^T x;  db += column sums of dy. Under
// 16-bit compute x, W and dy hold 16-bit values and y, dx, dW and db are rounded before they are
// used or accumulated (dense_model.hpp).
#include "dtplan/runtime/dense_model.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/block_layout.hpp"

namespace dtplan::runtime {

namespace {

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

DenseModel::DenseModel(const cost::DenseStack& stack, Device& device, std::int64_t tokens,
                       Communicator* tp)
    : s_(stack), dev_(device), tokens_(tokens), tp_(tp) {
  const std::int64_t group = tp != nullptr ? tp->size() : 1;
  if (group != s_.tp) {
    throw Error("dense stack: a share for " + std::to_string(s_.tp) +
                " tensor-parallel ranks run on a group of " + std::to_string(group));
  }
  if (s_.tp == 1) tp_ = nullptr;
  if (tp_ != nullptr) tp_rank_ = tp_->rank();
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
    const bool probs_slot = l == 0 || s_.recompute == Checkpointing::none;
    if (probs_slot) keep(probs_, T * s_.heads * s_.seq_len);
    if (probs_slot && s_.attention_dropout > 0) {
      drop_probs_.push_back(dev_.allocate(T * s_.heads * s_.seq_len, act));
    }
    if (s_.hidden_dropout > 0) {
      drop_attn_out_.push_back(dev_.allocate(T * h, act));
      drop_mlp_out_.push_back(dev_.allocate(T * h, act));
    }
    keep(attn_, T * s_.q_size());
    keep(mid_, T * h);
    keep(ln2_, T * h);
    keep(st2_, T * 2);
    keep(up_, T * f);
    if (s_.gated) keep(gate_, T * f);
    keep(act_, T * f);
  }
  if (s_.final_norm && s_.has_head()) {
    lnf_ = dev_.allocate_floats(T * h, act);
    stf_ = dev_.allocate_floats(T * 2, act);
  }
  if (s_.has_head()) logits_ = dev_.allocate_floats(T * s_.vocab, act);
  if (s_.embedding_dropout > 0 && s_.has_embedding()) drop_emb_ = dev_.allocate(T * h, act);
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
  if (half()) {
    w16_ = dev_.allocate_floats(cost::largest_unit(s_), buf);
    grad16_ = dev_.allocate_floats(cost::largest_matrix(s_), buf);
  }
  if (half() || s_.hidden_dropout > 0 || tp_ != nullptr) tmp_ = dev_.allocate_floats(T * h, buf);
  if (tp_ != nullptr && s_.has_head()) {
    top_ = dev_.allocate_floats(T, buf);
    sums_ = dev_.allocate_floats(2 * T, buf);
  }
}

void DenseModel::set_samples(std::uint64_t seed, std::int64_t step, std::int64_t first_sample) {
  seed_ = seed;
  step_ = step;
  first_sample_ = first_sample;
}

DropoutDraw DenseModel::draw(std::int64_t layer, DropoutSite site, double p) const {
  DropoutDraw d;
  d.seed = seed_;
  d.step = step_;
  d.first_sample = first_sample_;
  d.samples = s_.batch(tokens_);
  d.layer = layer + s_.first_layer;  // the block's place in the whole model
  d.site = site;
  d.p = p;
  d.per_sample = s_.seq_len * s_.hidden;
  if (site == DropoutSite::attention) {
    d.causal_seq = s_.seq_len;
    d.per_sample = s_.heads * s_.seq_len * s_.seq_len;
    d.element_offset = tp_rank_ * d.per_sample;  // this rank's heads come after the others'
  }
  return d;
}

AttentionDropout DenseModel::attention_dropout(std::int64_t l) {
  if (s_.attention_dropout <= 0) return {};
  return {drop_probs_[probs_slot(l)].bytes_ptr(), dropout_scale(s_.attention_dropout)};
}

void DenseModel::draw_attention_mask(std::int64_t l) {
  if (s_.attention_dropout <= 0) return;
  dev_.dropout_mask(drop_probs_[probs_slot(l)].bytes_ptr(),
                    draw(l, DropoutSite::attention, s_.attention_dropout));
}

const float* DenseModel::dropped_grad(const float* dy, const Buffer& mask) {
  if (mask.empty()) return rounded_copy(dy, tokens_ * s_.hidden);
  const std::int64_t n = tokens_ * s_.hidden;
  dev_.copy(dy, tmp_.f(), n);
  round(tmp_.f(), n);
  dev_.apply_dropout(tmp_.f(), mask.bytes_ptr(), n, dropout_scale(s_.hidden_dropout), s_.compute);
  return tmp_.f();
}

bool DenseModel::half() const {
  return s_.compute != cost::ElementType::fp32;
}

void DenseModel::round(float* x, std::int64_t n) {
  if (half()) dev_.round_to(x, n, s_.compute);
}

const float* DenseModel::gemm_weights(const float* p, std::int64_t n) {
  if (!half()) return p;
  dev_.copy(p, w16_.f(), n);
  dev_.round_to(w16_.f(), n, s_.compute);
  return w16_.f();
}

const float* DenseModel::rounded_copy(const float* x, std::int64_t n) {
  if (!half()) return x;
  dev_.copy(x, tmp_.f(), n);
  dev_.round_to(tmp_.f(), n, s_.compute);
  return tmp_.f();
}

void DenseModel::linear(const float* x, const float* w, const float* b, float* y, std::int64_t out,
                        std::int64_t in) {
  dev_.gemm(false, true, tokens_, out, in, 1, x, w, 0, y);
  if (b != nullptr) dev_.add_bias(y, b, tokens_, out);
  round(y, tokens_ * out);
}

void DenseModel::linear_residual(const float* x, const float* w, const float* b,
                                 const float* residual, float* y, std::int64_t in,
                                 const Buffer& mask) {
  const std::int64_t T = tokens_, h = s_.hidden;
  if (!mask.empty()) {
    // residual + drop(r(x W^T + b)), summed in that order as PyTorch's residual add does.
    float* proj = half() ? tmp_.f() : y;
    linear(x, w, b, proj, h, in);
    dev_.apply_dropout(proj, mask.bytes_ptr(), T * h, dropout_scale(s_.hidden_dropout), s_.compute);
    if (proj != y) dev_.copy(proj, y, T * h);
    dev_.axpy(1, residual, y, T * h);
    return;
  }
  if (!half()) {
    dev_.copy(residual, y, T * h);
    dev_.gemm(false, true, T, h, in, 1, x, w, 1, y);
    if (b != nullptr) dev_.add_bias(y, b, T, h);
    return;
  }
  linear(x, w, b, tmp_.f(), h, in);
  dev_.copy(residual, y, T * h);
  dev_.axpy(1, tmp_.f(), y, T * h);
}

void DenseModel::input_grad(const float* dy, const float* w, float* dx, std::int64_t out,
                            std::int64_t in, bool accumulate) {
  if (!half() || !accumulate) {
    dev_.gemm(false, false, tokens_, in, out, 1, dy, w, accumulate ? 1 : 0, dx);
    round(dx, tokens_ * in);
    return;
  }
  dev_.gemm(false, false, tokens_, in, out, 1, dy, w, 0, tmp_.f());
  round(tmp_.f(), tokens_ * in);
  dev_.axpy(1, tmp_.f(), dx, tokens_ * in);
}

void DenseModel::weight_grad(const float* dy, const float* x, float* dw, float* db,
                             std::int64_t out, std::int64_t in) {
  if (!half()) {
    dev_.gemm(true, false, out, in, tokens_, 1, dy, x, 1, dw);
    if (db != nullptr) dev_.bias_grad(dy, db, tokens_, out);
    return;
  }
  float* g = grad16_.f();
  dev_.gemm(true, false, out, in, tokens_, 1, dy, x, 0, g);
  round(g, out * in);
  dev_.axpy(1, g, dw, out * in);
  if (db == nullptr) return;
  dev_.fill(g, 0, out);
  dev_.bias_grad(dy, g, tokens_, out);
  round(g, out);
  dev_.axpy(1, g, db, out);
}

void DenseModel::tp_sum(float* x, std::int64_t n) {
  if (tp_ == nullptr) return;
  tp_->wait(tp_->all_reduce(x, n));
  round(x, n);
}

void DenseModel::row_parallel_residual(const float* x, const float* w, const float* b,
                                       const float* residual, float* y, std::int64_t in,
                                       const Buffer& mask) {
  if (tp_ == nullptr) {
    linear_residual(x, w, b, residual, y, in, mask);
    return;
  }
  const std::int64_t T = tokens_, h = s_.hidden;
  float* proj = tmp_.f();
  linear(x, w, nullptr, proj, h, in);
  tp_sum(proj, T * h);
  if (b != nullptr) {
    dev_.add_bias(proj, b, T, h);
    round(proj, T * h);
  }
  if (!mask.empty()) {
    dev_.apply_dropout(proj, mask.bytes_ptr(), T * h, dropout_scale(s_.hidden_dropout), s_.compute);
  }
  dev_.copy(residual, y, T * h);
  dev_.axpy(1, proj, y, T * h);
}

double DenseModel::vocab_parallel_loss(const std::int32_t* targets, float grad_scale) {
  const std::int64_t T = tokens_, V = s_.vocab;
  dev_.row_max(logits_.f(), top_.f(), T, V);
  tp_->wait(tp_->all_reduce_max(top_.f(), T));
  dev_.cross_entropy_sums(logits_.f(), targets, top_.f(), sums_.f(), T, V, first_id());
  tp_->wait(tp_->all_reduce(sums_.f(), 2 * T));  // both halves in one call
  return dev_.cross_entropy_finish(logits_.f(), targets, top_.f(), sums_.f(), T, V, first_id(),
                                   grad_scale);
}

std::size_t DenseModel::slot(std::int64_t l) const {
  return s_.recompute == Checkpointing::full ? 0 : static_cast<std::size_t>(l);
}

std::size_t DenseModel::probs_slot(std::int64_t l) const {
  return s_.recompute == Checkpointing::none ? static_cast<std::size_t>(l) : 0;
}

AttentionShape DenseModel::shape() const {
  return {s_.batch(tokens_), s_.seq_len, s_.heads, s_.kv_heads, s_.head_dim, s_.compute};
}

void DenseModel::forward_embedding(const float* table, const std::int32_t* ids) {
  dev_.embedding(ids, table, x_[0].f(), tokens_, s_.hidden, first_id(), s_.vocab);
  if (tp_ != nullptr) tp_->wait(tp_->all_reduce(x_[0].f(), tokens_ * s_.hidden));
  if (s_.positions == cost::StackPositions::learned) {
    dev_.add_positions(x_[0].f(), table + s_.vocab * s_.hidden, tokens_, s_.seq_len, s_.hidden);
  }
  if (s_.embedding_dropout > 0) {  // on the fp32 sum, outside autocast's 16-bit ops
    const auto d = draw(0, DropoutSite::embedding, s_.embedding_dropout);
    dev_.dropout_mask(drop_emb_.bytes_ptr(), d);
    dev_.apply_dropout(x_[0].f(), drop_emb_.bytes_ptr(), tokens_ * s_.hidden, d.scale(),
                       cost::ElementType::fp32);
  }
}

namespace {

// A slot's mask, or an empty buffer without dropout.
const Buffer& mask_at(const std::vector<Buffer>& masks, std::size_t i) {
  static const Buffer none;
  return masks.empty() ? none : masks[i];
}

}  // namespace

void DenseModel::forward_block(std::int64_t l, const float* p) {
  const auto o = block_offsets(s_);
  const std::int64_t T = tokens_, h = s_.hidden, f = s_.ffn, q = s_.q_size();
  const auto i = slot(l), xi = static_cast<std::size_t>(l);
  const auto eps = static_cast<float>(s_.norm_eps);
  const float* x = x_[xi].f();
  float* qkv = qkv_[i].f();
  const float* w = gemm_weights(p, o.end);
  auto bias = [&](bool has, std::int64_t at) { return has ? w + at : nullptr; };
  const auto n1 = norm_at(s_, p + o.n1), n2 = norm_at(s_, p + o.n2);
  // Attention: norm, QKV, rotary, causal softmax attention, output projection + residual.
  dev_.norm(x, n1.gamma, n1.beta, ln1_[i].f(), st1_[i].f(), T, h, eps);
  round(ln1_[i].f(), T * h);
  linear(ln1_[i].f(), w + o.wqkv, bias(s_.qkv_bias, o.bqkv), qkv, s_.qkv_size(), h);
  if (s_.positions == cost::StackPositions::rotary) {
    dev_.rotary(qkv, shape(), static_cast<float>(s_.rope_theta), false);
    round(qkv, T * s_.qkv_size());
  }
  if (s_.hidden_dropout > 0) {
    dev_.dropout_mask(drop_attn_out_[i].bytes_ptr(),
                      draw(l, DropoutSite::attention_output, s_.hidden_dropout));
    dev_.dropout_mask(drop_mlp_out_[i].bytes_ptr(),
                      draw(l, DropoutSite::mlp_output, s_.hidden_dropout));
  }
  draw_attention_mask(l);
  dev_.attention(qkv, probs_[probs_slot(l)].f(), attn_[i].f(), shape(), attention_dropout(l),
                 scratch_.f());
  row_parallel_residual(attn_[i].f(), w + o.wo, bias(s_.out_bias, o.bo), x, mid_[i].f(), q,
                        mask_at(drop_attn_out_, i));
  // MLP: norm, up (and gate), activation, down projection + residual.
  const float* ln2 = ln2_[i].f();
  dev_.norm(mid_[i].f(), n2.gamma, n2.beta, ln2_[i].f(), st2_[i].f(), T, h, eps);
  round(ln2_[i].f(), T * h);
  linear(ln2, w + o.wu, bias(s_.mlp_bias, o.bu), up_[i].f(), f, h);
  if (s_.gated) {
    linear(ln2, w + o.wg, bias(s_.mlp_bias, o.bg), gate_[i].f(), f, h);
    dev_.swiglu(gate_[i].f(), up_[i].f(), act_[i].f(), T * f, s_.compute);
  } else {
    dev_.gelu(up_[i].f(), act_[i].f(), T * f);
    round(act_[i].f(), T * f);
  }
  row_parallel_residual(act_[i].f(), w + o.wd, bias(s_.mlp_bias, o.bd), mid_[i].f(), x_[xi + 1].f(),
                        f, mask_at(drop_mlp_out_, i));
}

const float* DenseModel::head_norm(const float* w) const {
  // The tied head is the embedding unit (with the positions) unless it has a stage of its own.
  const bool in_embedding = s_.tied && s_.pp == 1;
  const std::int64_t after = s_.vocab * s_.hidden + (in_embedding ? s_.position_params() : 0);
  return w + after;
}

float* DenseModel::head_input() const {
  return s_.final_norm ? lnf_.f() : x_[static_cast<std::size_t>(s_.layers)].f();
}

double DenseModel::forward_head(const float* w, const std::int32_t* targets, float grad_scale) {
  const auto last = static_cast<std::size_t>(s_.layers);
  const std::int64_t T = tokens_, h = s_.hidden;
  if (s_.final_norm) {
    const auto n = norm_at(s_, head_norm(w));
    dev_.norm(x_[last].f(), n.gamma, n.beta, lnf_.f(), stf_.f(), T, h,
              static_cast<float>(s_.norm_eps));
  }
  // Without a final norm the last block's output is the head's input alone: rounding it in
  // place is the 16-bit copy the head reads.
  round(head_input(), T * h);
  linear(head_input(), gemm_weights(w, s_.vocab * h), nullptr, logits_.f(), s_.vocab, h);
  if (tp_ != nullptr) return vocab_parallel_loss(targets, grad_scale);
  return dev_.softmax_cross_entropy(logits_.f(), targets, T, s_.vocab, grad_scale);
}

void DenseModel::backward_head(const float* w, float* dw) {
  const auto last = static_cast<std::size_t>(s_.layers);
  const std::int64_t T = tokens_, h = s_.hidden;
  // The logits' gradient as the 16-bit logits receive it; the rounded head weights are still
  // those forward_head made.
  round(logits_.f(), T * s_.vocab);
  const float* w16 = half() ? w16_.f() : w;
  float* d_input = s_.final_norm ? dln_.f() : dx_.f();
  input_grad(logits_.f(), w16, d_input, s_.vocab, h, false);
  tp_sum(d_input, T * h);  // each rank's vocabulary slice gives part of it
  weight_grad(logits_.f(), head_input(), dw, nullptr, s_.vocab, h);
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
    draw_attention_mask(l);
    dev_.attention(qkv_[i].f(), probs, attn_[i].f(), shape(), attention_dropout(l), scratch_.f());
  }
  const float* w = gemm_weights(p, o.end);
  auto bias_grad = [&](bool has, std::int64_t at) { return has ? dp + at : nullptr; };
  const auto n1 = norm_at(s_, p + o.n1), n2 = norm_at(s_, p + o.n2);
  const auto g1 = norm_grads_at(s_, dp + o.n1), g2 = norm_grads_at(s_, dp + o.n2);
  const float* ln2 = ln2_[i].f();
  // MLP down projection (its output's gradient as the 16-bit output receives it); dmid starts
  // as the residual gradient.
  const float* dy = dropped_grad(dx_.f(), mask_at(drop_mlp_out_, i));
  input_grad(dy, w + o.wd, dact_.f(), h, f, false);
  weight_grad(dy, act_[i].f(), dp + o.wd, bias_grad(s_.mlp_bias, o.bd), h, f);
  dev_.copy(dx_.f(), dmid_.f(), T * h);
  // Activation, then the up (and gate) projections into the second norm's output gradient.
  if (s_.gated) {
    dev_.swiglu_backward(gate_[i].f(), up_[i].f(), dact_.f(), dgate_.f(), dup_.f(), T * f,
                         s_.compute);
    input_grad(dgate_.f(), w + o.wg, dln_.f(), f, h, false);
    weight_grad(dgate_.f(), ln2, dp + o.wg, bias_grad(s_.mlp_bias, o.bg), f, h);
  } else {
    dev_.gelu_backward(up_[i].f(), dact_.f(), dup_.f(), T * f);
    round(dup_.f(), T * f);
  }
  input_grad(dup_.f(), w + o.wu, dln_.f(), f, h, s_.gated);
  weight_grad(dup_.f(), ln2, dp + o.wu, bias_grad(s_.mlp_bias, o.bu), f, h);
  tp_sum(dln_.f(), T * h);  // column-parallel: each rank's MLP columns give part of it
  dev_.norm_backward(mid_[i].f(), n2.gamma, st2_[i].f(), dln_.f(), dmid_.f(), g2.gamma, g2.beta, T,
                     h);
  // Attention output projection, attention, rotary back, QKV projection, first norm.
  const float* dmid = dropped_grad(dmid_.f(), mask_at(drop_attn_out_, i));
  input_grad(dmid, w + o.wo, dattn_.f(), h, q, false);
  weight_grad(dmid, attn_[i].f(), dp + o.wo, bias_grad(s_.out_bias, o.bo), h, q);
  dev_.attention_backward(qkv_[i].f(), attn_[i].f(), dattn_.f(), probs, dqkv_.f(), shape(),
                          attention_dropout(l), scratch_.f());
  if (s_.positions == cost::StackPositions::rotary) {
    dev_.rotary(dqkv_.f(), shape(), static_cast<float>(s_.rope_theta), true);
    round(dqkv_.f(), T * s_.qkv_size());
  }
  input_grad(dqkv_.f(), w + o.wqkv, dln_.f(), s_.qkv_size(), h, false);
  weight_grad(dqkv_.f(), ln1_[i].f(), dp + o.wqkv, bias_grad(s_.qkv_bias, o.bqkv), s_.qkv_size(),
              h);
  tp_sum(dln_.f(), T * h);  // column-parallel: each rank's heads give part of it
  dev_.copy(dmid_.f(), dx_.f(), T * h);
  dev_.norm_backward(x_[xi].f(), n1.gamma, st1_[i].f(), dln_.f(), dx_.f(), g1.gamma, g1.beta, T, h);
}

void DenseModel::backward_embedding(const std::int32_t* ids, float* dtable) {
  if (s_.embedding_dropout > 0) {
    dev_.apply_dropout(dx_.f(), drop_emb_.bytes_ptr(), tokens_ * s_.hidden,
                       dropout_scale(s_.embedding_dropout), cost::ElementType::fp32);
  }
  dev_.embedding_backward(ids, dx_.f(), dtable, tokens_, s_.hidden, first_id(), s_.vocab);
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
