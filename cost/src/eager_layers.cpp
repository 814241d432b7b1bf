// Eager PyTorch, op by op: under torch.autocast, and with one type throughout.
//
// Under autocast: The residual stream starts as the fp32
// embedding and stays fp32: autocast runs layer_norm and pow in fp32, and adding a Linear's
// 16-bit output to fp32 promotes to fp32. So every Linear's input is cast to 16 bits on the
// way in (one copy per Linear that reads it; autocast caches only the weights' casts), every
// 16-bit Linear output meets fp32 in a mixed-type kernel, and in backward every such cast has
// a widening or narrowing twin. Counted from the modules of transformers 5.17 (GPT2Block with
// NewGELUActivation, LlamaDecoderLayer with LlamaRMSNorm and apply_rotary_pos_emb) and from
// autograd's derivative of each op; the kernels match, one for one, the kernels a torch.profiler
// trace of GPT-2 and Llama 3.2 1B lists per block (data/measurements/h200-torch-profile).
//
// With one type (fp32 training; bf16 weights under FSDP2's MixedPrecisionPolicy or after
// model.to(bfloat16)) the same modules run without any cast around the Linears: every op reads
// and writes elements of e bytes, and only LlamaRMSNorm leaves the type (it computes in fp32).
//
// Bytes per element: 4 for fp32, 2 for the 16-bit type, 1 for a dropout mask, e for the one
// type. Widths: h the hidden size, f the MLP's intermediate size, q and kv the query and key
// widths.
#include "dtplan/cost/eager_layers.hpp"

#include <string>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {

EagerTraffic& EagerTraffic::operator+=(const EagerTraffic& o) {
  same_type_bytes += o.same_type_bytes;
  widening_bytes += o.widening_bytes;
  mixed_type_bytes += o.mixed_type_bytes;
  kernels += o.kernels;
  return *this;
}

namespace {

EagerTraffic same(double bytes, double kernels) {
  return {bytes, 0, 0, kernels};
}
EagerTraffic widen(double bytes, double kernels) {
  return {0, bytes, 0, kernels};
}
EagerTraffic mixed(double bytes, double kernels) {
  return {0, 0, bytes, kernels};
}

// A norm over w elements of a stream of e-byte elements (the fp32 stream under autocast), and
// its gradient.
EagerBlock norm(NormKind kind, double w, double e) {
  if (kind == NormKind::layernorm) {
    // One fused kernel: read x, write y. Backward: the input gradient (read dy and x, write dx)
    // and the weight and bias gradients (read dy and x).
    return {same(2 * e * w, 1), same(5 * e * w, 2)};
  }
  // LlamaRMSNorm, in fp32: pow(2) 8w, mean 4w, + eps and rsqrt on one value per row,
  // x * rsqrt 8w; then weight * y in the stream's type 2ew. Backward: dy * weight 2ew,
  // (dy * y) 3ew and its sum ew; in fp32 dx1 = g * r 8w, (g * x) 12w and its sum 4w, the
  // rsqrt's and mean's gradients (a row each, then expanded: 4w), the pow's 2x 8w and product
  // 12w, and the sum of the two paths into x 12w.
  EagerBlock b{same(20 * w + 2 * e * w, 6), same(6 * e * w + 60 * w, 12)};
  if (e < 4) {
    // A 16-bit stream is widened on the way in and y narrowed before the weight (6w each); the
    // gradient likewise on the way back.
    b.forward += widen(6 * w, 1);
    b.forward += same(6 * w, 1);
    b.backward += widen(6 * w, 1);
    b.backward += same(6 * w, 1);
  }
  return b;
}

// Autocast's copy of an fp32 input of w elements to 16 bits for one Linear, and in backward the
// 16-bit input gradient widened back to fp32.
EagerBlock input_cast(double w) {
  return {same(6 * w, 1), widen(6 * w, 1)};
}

// `readers` gradients of one tensor of w elements of e bytes summed by autograd.
EagerTraffic fan_in(double readers, double w, double e) {
  return same((readers - 1) * 3 * e * w, readers - 1);
}

// A 16-bit branch output added to the fp32 stream (mixed: read 2 + 4, write 4). Backward: the
// gradient narrowed to 16 bits for the branch, and summed with the stream's other reader.
EagerBlock residual(double h) {
  EagerBlock b{mixed(10 * h, 1), same(6 * h, 1)};
  b.backward += fan_in(2, h, 4);
  return b;
}

// Dropout of w elements of e bytes: read, write, and a one-byte mask; the backward scales by it.
EagerBlock dropout(double w, double e) {
  return {same((2 * e + 1) * w, 1), same((2 * e + 1) * w, 1)};
}

// The MLP's activation on the f-wide 16-bit output of its first Linear(s).
EagerBlock activation(const TransformerSpec& t, double f) {
  if (is_gated(t.mlp)) {
    // act(gate) 4f, times up 6f. Backward: the product's two gradients 6f each, the
    // activation's 6f.
    return {same(10 * f, 2), same(18 * f, 3)};
  }
  if (!t.gelu_as_tensor_ops) return {same(4 * f, 1), same(6 * f, 1)};
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 pow(x, 3)))): pow is on autocast's fp32 list, so x
  // is widened (6f) and pow, the two scalings, tanh and 1 + run in fp32 (8f each); x + t and
  // the last product read x (or 0.5 x, 4f) in 16 bits and fp32 (10f each). Backward: the last
  // product's gradients (12f, narrowed 6f; and 10f mixed), 0.5 x's (4f), tanh's (12f), the
  // two scalings' (8f each), x + t's narrowing (6f), pow's 3 x^2 g (8f, 8f, 12f) and its
  // narrowing (6f), and the three paths into x summed in 16 bits (6f twice).
  EagerBlock b;
  b.forward = same(44 * f, 6);
  b.forward += widen(6 * f, 1);
  b.forward += mixed(20 * f, 2);
  b.backward = same(102 * f, 13);
  b.backward += mixed(10 * f, 1);
  return b;
}

// apply_rotary_pos_emb on w 16-bit elements with fp32 cos and sin: x cos and rotate_half(x)
// sin are mixed-type (6w each), rotate_half a negation of half (2w) and a cat (4w), the sum
// fp32 (12w); then autocast narrows it for attention (6w). Backward: the attention input's
// gradient widened (6w), g cos and g sin (8w each) narrowed (6w each), the negation's
// gradient (2w), and the two 16-bit paths into x summed (6w).
EagerBlock rotary(double w) {
  EagerBlock b{same(24 * w, 4), same(36 * w, 6)};
  b.forward += mixed(12 * w, 2);
  b.backward += widen(6 * w, 1);
  return b;
}

// Qwen3's RMSNorm over each query or key head, on a 16-bit projection of w elements: widened
// (6w), pow, mean and the product in fp32 (20w), narrowed (6w), times the fp32 weight (6w
// mixed). Backward as a block norm's, after the widening of its 16-bit gradient.
EagerBlock head_norm(double w) {
  EagerBlock b{same(26 * w, 6), same(84 * w, 12)};
  b.forward += widen(6 * w, 1);
  b.forward += mixed(6 * w, 1);
  b.backward += widen(6 * w, 1);
  return b;
}

// The weights' casts: autocast copies each fp32 weight and bias of w elements to 16 bits once
// per forward; backward widens its 16-bit gradient for the fp32 .grad, and a bias gradient is
// the sum of the output gradient over the tokens (a reduction reading m outputs of 16 bits).
EagerBlock weight(double elements, double bias_outputs, double m) {
  const double tensors = bias_outputs > 0 ? 2 : 1;
  EagerBlock b{same(6 * (elements + bias_outputs), tensors),
               widen(6 * (elements + bias_outputs), tensors)};
  if (bias_outputs > 0) b.backward += same(2 * m * bias_outputs, 1);
  return b;
}

void add(EagerBlock& total, const EagerBlock& part, double times = 1) {
  EagerTraffic f = part.forward, b = part.backward;
  for (EagerTraffic* t : {&f, &b}) {
    t->same_type_bytes *= times;
    t->widening_bytes *= times;
    t->mixed_type_bytes *= times;
    t->kernels *= times;
  }
  total.forward += f;
  total.backward += b;
}

// Scales per-token traffic to m tokens (kernel counts stay).
EagerBlock tokens(EagerBlock b, double m) {
  for (EagerTraffic* t : {&b.forward, &b.backward}) {
    t->same_type_bytes *= m;
    t->widening_bytes *= m;
    t->mixed_type_bytes *= m;
  }
  return b;
}

// The per-token traffic of the attention half: its norm, the projections' input casts (and the
// fan-in of their gradients), rotary, the head norms, dropout and the residual add.
EagerBlock attention_half(const TransformerSpec& t) {
  const double h = static_cast<double>(t.hidden_size);
  const double q = static_cast<double>(t.q_size()), kv = static_cast<double>(t.kv_size());
  EagerBlock b = norm(t.norm, h, 4);
  const double projections = fuses_qkv(t) ? 1 : 3;
  add(b, input_cast(h), projections);
  b.backward += fan_in(projections, h, 4);
  if (t.qk_norm) {
    add(b, head_norm(q));
    add(b, head_norm(kv));
  }
  if (t.positions == PositionKind::rotary) {
    add(b, rotary(q));
    add(b, rotary(kv));
  }
  if (t.hidden_dropout > 0) add(b, dropout(h, 2));
  add(b, residual(h));
  return b;
}

// The MLP half: its norm, the input casts of the first Linear(s), the activation, the down
// projection's input cast when the activation leaves fp32, dropout and the residual add.
EagerBlock mlp_half(const TransformerSpec& t) {
  const double h = static_cast<double>(t.hidden_size), f = static_cast<double>(t.ffn_size);
  EagerBlock b = norm(t.norm, h, 4);
  // Phi-3 computes gate and up in one Linear (gate_up_proj); Llama-style modules in two.
  const double readers = is_gated(t.mlp) && t.model_type != "phi3" ? 2 : 1;
  add(b, input_cast(h), readers);
  b.backward += fan_in(readers, h, 4);
  add(b, activation(t, f));
  if (!is_gated(t.mlp) && t.gelu_as_tensor_ops) add(b, input_cast(f));
  if (t.hidden_dropout > 0) add(b, dropout(h, 2));
  add(b, residual(h));
  return b;
}

EagerBlock block_weights(const TransformerSpec& t, double m) {
  const double h = static_cast<double>(t.hidden_size), f = static_cast<double>(t.ffn_size);
  const double q = static_cast<double>(t.q_size()), kv = static_cast<double>(t.kv_size());
  const double o = static_cast<double>(t.o_size());
  EagerBlock b;
  const double qkv = q + kv + static_cast<double>(t.v_size());
  if (fuses_qkv(t)) {
    add(b, weight(h * qkv, t.qkv_bias ? qkv : 0, m));
  } else {
    for (double n : {q, kv, static_cast<double>(t.v_size())})
      add(b, weight(h * n, t.qkv_bias ? n : 0, m));
  }
  add(b, weight(o * h, t.attn_out_bias ? h : 0, m));
  const double firsts = is_gated(t.mlp) ? 2 : 1;
  add(b, weight(h * f, t.mlp_bias ? f : 0, m), firsts);
  add(b, weight(f * h, t.mlp_bias ? h : 0, m));
  return b;
}

}  // namespace

std::optional<EagerFlow> eager_layers(const TrainingConfig& c) {
  if (c.layer_kernels == LayerKernels::fused) return std::nullopt;
  if (is_autocast(c.precision)) return EagerFlow{true, 2};
  if (c.layer_kernels != LayerKernels::eager) return std::nullopt;
  if (c.fp8 != Fp8Recipe::none) {
    throw Error("{layer-kernels} eager is not modelled with {fp8_recipe} " +
                std::string(name_of(c.fp8)) +
                ": FP8 Linears run in Transformer Engine's or torchao's fused casts; choose "
                "fused");
  }
  return EagerFlow{false, static_cast<double>(bytes_per_element(compute_element(c.precision)))};
}

Attention attention_as_run(const TransformerSpec& t, const TrainingConfig& c) {
  const bool grouped = t.num_kv_heads > 0 && t.num_kv_heads < t.num_heads;
  if (c.attention == Attention::flash && c.precision == Precision::fp32 && grouped)
    return Attention::eager;
  return c.attention;
}

bool eager_inventory_covers(const TransformerSpec& t) {
  return !t.moe.active() && !t.mla.active();
}

EagerBlock eager_autocast_block(const TransformerSpec& t, double m) {
  EagerBlock b = tokens(attention_half(t), m);
  add(b, tokens(mlp_half(t), m));
  add(b, block_weights(t, m));
  // Norms beyond the two the halves hold (Gemma 2's post-norms), each on the fp32 stream.
  const double extra = static_cast<double>(t.norms_per_layer) - 2;
  if (extra > 0) add(b, tokens(norm(t.norm, static_cast<double>(t.hidden_size), 4), m), extra);
  return b;
}

namespace {

// A norm over w elements of a stream of e-byte elements: LayerNorm keeps its input and a mean
// and rstd per row (8 bytes); LlamaRMSNorm's pow keeps the fp32 x (the input itself, or its
// widened copy), rsqrt its output (4 bytes a row), and the weight's product the normed x in the
// stream's type.
double norm_saved(NormKind kind, double w, double e) {
  return kind == NormKind::layernorm ? e * w + 8 : 4 * w + 4 + e * w;
}

// The MLP's inner tensors for an intermediate size f: SwiGLU keeps the gate's output (silu's
// input), silu's output and the up output (the product's two inputs) and the product (down's
// input), 16 bits each; a one-kernel GELU its input and output; NewGELUActivation the fp32
// copy of x (pow's input), tanh's output, 1 + tanh and 0.5 x (the last product's inputs,
// 4 + 4 + 4 + 2 bytes), and down_proj its own 16-bit copy of the fp32 result.
double mlp_saved(const TransformerSpec& t, double f) {
  if (is_gated(t.mlp)) return 8 * f;
  return t.gelu_as_tensor_ops ? 16 * f : 4 * f;
}

}  // namespace

double eager_autocast_saved_bytes_per_token(const TransformerSpec& t) {
  const double h = static_cast<double>(t.hidden_size), f = static_cast<double>(t.ffn_size);
  const double q = static_cast<double>(t.q_size()), kv = static_cast<double>(t.kv_size());
  const double v = static_cast<double>(t.v_size()), o = static_cast<double>(t.o_size());
  double bytes = static_cast<double>(t.norms_per_layer) * norm_saved(t.norm, h, 4);
  // Each Linear reading the fp32 normed stream keeps its own 16-bit copy.
  const double attention_readers = fuses_qkv(t) ? 1 : 3;
  const double mlp_readers = is_gated(t.mlp) && t.model_type != "phi3" ? 2 : 1;
  bytes += 2 * h * (attention_readers + mlp_readers);
  // Attention keeps Q, K, V and its output in 16 bits. Rotary's products keep only cos and sin
  // (the positions' tables), and their fp32 result is cast back for attention. Qwen3's head
  // norms keep the fp32 copy, the normed fp32 and its 16-bit copy (10 bytes an element).
  bytes += 2 * (q + kv + v) + 2 * o;
  if (t.qk_norm) bytes += 10 * (q + kv);
  if (t.hidden_dropout > 0) bytes += 2 * h;  // two one-byte masks
  return bytes + mlp_saved(t, f);
}

// With one type of e bytes.
namespace {

// A 16-bit branch output added to the stream of the same type; backward, the gradient goes to
// both summands, and the stream's two readers' gradients are summed.
EagerBlock residual_uniform(double h, double e) {
  EagerBlock b{same(3 * e * h, 1), {}};
  b.backward += fan_in(2, h, e);
  return b;
}

// The MLP's activation on f elements. SwiGLU: act(gate) 2ef, times up 3ef; backward the
// product's two gradients and the activation's (3ef each). One GELU kernel: 2ef, backward 3ef.
// NewGELUActivation's eight ops (pow, two scalings, the add, tanh, 1 +, 0.5 x, the product):
// 18ef. Backward: the product's two gradients (3ef each), 0.5 x's (2ef), tanh's (3ef), the two
// scalings' (2ef each), pow's 3 x^2 g (2ef, 2ef, 3ef), and the three paths into x summed
// (3ef twice).
EagerBlock activation_uniform(const TransformerSpec& t, double f, double e) {
  if (is_gated(t.mlp)) return {same(5 * e * f, 2), same(9 * e * f, 3)};
  if (!t.gelu_as_tensor_ops) return {same(2 * e * f, 1), same(3 * e * f, 1)};
  return {same(18 * e * f, 8), same(28 * e * f, 11)};
}

// apply_rotary_pos_emb on w elements with cos and sin of the same type: x cos and
// rotate_half(x) sin (3ew each), the negation of half (ew) and the cat (2ew), the sum (3ew).
// Backward: g cos and g sin (3ew each), the negation's gradient (ew), the two paths into x
// summed (3ew).
EagerBlock rotary_uniform(double w, double e) {
  return {same(12 * e * w, 5), same(10 * e * w, 4)};
}

EagerBlock attention_half_uniform(const TransformerSpec& t, double e) {
  const double h = static_cast<double>(t.hidden_size);
  const double q = static_cast<double>(t.q_size()), kv = static_cast<double>(t.kv_size());
  EagerBlock b = norm(t.norm, h, e);
  b.backward += fan_in(fuses_qkv(t) ? 1 : 3, h, e);  // the projections read one tensor
  if (t.qk_norm) {                                   // Qwen3's head norms are LlamaRMSNorm's code
    add(b, norm(NormKind::rmsnorm, q, e));
    add(b, norm(NormKind::rmsnorm, kv, e));
  }
  if (t.positions == PositionKind::rotary) {
    add(b, rotary_uniform(q, e));
    add(b, rotary_uniform(kv, e));
  }
  if (t.hidden_dropout > 0) add(b, dropout(h, e));
  add(b, residual_uniform(h, e));
  return b;
}

EagerBlock mlp_half_uniform(const TransformerSpec& t, double e) {
  const double h = static_cast<double>(t.hidden_size), f = static_cast<double>(t.ffn_size);
  EagerBlock b = norm(t.norm, h, e);
  const double readers = is_gated(t.mlp) && t.model_type != "phi3" ? 2 : 1;
  b.backward += fan_in(readers, h, e);
  add(b, activation_uniform(t, f, e));
  if (t.hidden_dropout > 0) add(b, dropout(h, e));
  add(b, residual_uniform(h, e));
  return b;
}

// The bias gradients: each the sum of its Linear's output gradient (n wide) over m tokens.
EagerTraffic bias_gradients(const TransformerSpec& t, double m, double e) {
  const double h = static_cast<double>(t.hidden_size), f = static_cast<double>(t.ffn_size);
  EagerTraffic out;
  const auto bias = [&](double n) { out += same(e * m * n, 1); };
  if (t.qkv_bias && fuses_qkv(t)) bias(static_cast<double>(t.q_size() + t.kv_size() + t.v_size()));
  if (t.qkv_bias && !fuses_qkv(t)) {
    for (auto n : {t.q_size(), t.kv_size(), t.v_size()})
      bias(static_cast<double>(n));
  }
  if (t.attn_out_bias) bias(h);
  if (t.mlp_bias) {
    bias(f);
    if (is_gated(t.mlp)) bias(f);
    bias(h);
  }
  return out;
}

}  // namespace

EagerBlock eager_uniform_block(const TransformerSpec& t, double m, double e) {
  EagerBlock b = tokens(attention_half_uniform(t, e), m);
  add(b, tokens(mlp_half_uniform(t, e), m));
  b.backward += bias_gradients(t, m, e);
  const double extra = static_cast<double>(t.norms_per_layer) - 2;
  if (extra > 0) add(b, tokens(norm(t.norm, static_cast<double>(t.hidden_size), e), m), extra);
  return b;
}

double eager_uniform_saved_bytes_per_token(const TransformerSpec& t, double e) {
  const double h = static_cast<double>(t.hidden_size), f = static_cast<double>(t.ffn_size);
  const double q = static_cast<double>(t.q_size()), kv = static_cast<double>(t.kv_size());
  const double v = static_cast<double>(t.v_size()), o = static_cast<double>(t.o_size());
  double bytes = static_cast<double>(t.norms_per_layer) * norm_saved(t.norm, h, e);
  // The attention's and the MLP's input: one tensor each, however many Linears read it.
  bytes += 2 * e * h;
  // Q, K, V and the attention's output. Head norms keep their fp32 input and normed output.
  bytes += e * (q + kv + v + o);
  if (t.qk_norm) bytes += (4 + e) * (q + kv);
  if (t.hidden_dropout > 0) bytes += 2 * h;  // two one-byte masks
  // SwiGLU: the gate's output, silu's, the up output and the product; one GELU kernel its input
  // and output; NewGELUActivation x, tanh's output, 1 + tanh, 0.5 x and the product.
  if (is_gated(t.mlp)) return bytes + 4 * e * f;
  return bytes + (t.gelu_as_tensor_ops ? 5 : 2) * e * f;
}

EagerBlock eager_block(const TransformerSpec& t, double m, const EagerFlow& flow) {
  return flow.autocast ? eager_autocast_block(t, m) : eager_uniform_block(t, m, flow.element_bytes);
}

EagerLaunches eager_block_launches(const TransformerSpec& t, const EagerFlow& flow) {
  const auto ops = eager_block(t, 1, flow);  // kernel counts do not depend on the tokens
  const double projections = fuses_qkv(t) ? 1 : 3;
  const double firsts = is_gated(t.mlp) && t.model_type != "phi3" ? 2 : 1;
  const double linears = projections + 1 + firsts + 1;
  return {ops.forward.kernels + linears + 1, ops.backward.kernels + 2 * linears + 1};
}

double eager_saved_bytes_per_token(const TransformerSpec& t, const EagerFlow& flow) {
  return flow.autocast ? eager_autocast_saved_bytes_per_token(t)
                       : eager_uniform_saved_bytes_per_token(t, flow.element_bytes);
}

}  // namespace dtplan::cost
