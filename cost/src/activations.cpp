// Activation memory of transformers and layer-list models.
//
// One transformer block, element size e (2 for 16-bit compute, 4 for fp32), masks 1 byte,
// q = heads*head_dim, k = kv_heads*head_dim (q under hf-eager, which repeats K and V to every
// query head), f = ffn size, a = heads:
//
//   attention  e*sbh (QKV input) + e*sbq (Q) + 2e*sbk (K, V) + e*sbq (output-proj input)
//              + sbh (dropout mask after the projection, if hidden dropout)
//   scores     flash:    4*asb (fp32 log-sum-exp)
//              eager:    e*as^2b (softmax output) + as^2b + e*as^2b (dropout mask, output)
//              hf-eager: 4*as^2b (fp32 softmax output) + e*as^2b (16-bit probabilities), or
//                        with dropout 4*as^2b + as^2b + e*as^2b
//   mlp gelu   e*sbh (fc1 input) + 2e*sbf (activation input, fc2 input) + sbh (dropout mask)
//   mlp swiglu e*sbh (gate/up input) + 4e*sbf (gate out, SiLU out, up out, product)
//   norms      2 * e*sbh (each norm's input; 4 in Gemma 2/3)
//   soft-caps  eager attention: + e*as^2b (tanh output); final logits: + e*sbv
//   mixture of experts, E experts of width f_e, k per token, shared expert of f_s: the
//              MLP input e*sbh as above, then 4*sbE (fp32 router probabilities)
//              + 2e*ksbh (the k permuted copies of every token, the experts' outputs)
//              + the swiglu/gelu inner terms for ksb rows of f_e and sb rows of f_s
//
// With e = 2, f = 4h, k = q = h, dropout and eager scores: 34*sbh + 5*as^2b.
//
// One GPU of a layout: q, k, f and a are its tensor-parallel rank's (divided by t); the
// QKV, MLP and norm inputs and the dropout masks stay whole unless sequence parallelism
// splits them t ways; s is its context-parallel rank's tokens.
#include "dtplan/cost/activations.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/model/error.hpp"
#include "per_op_policy.hpp"

namespace dtplan::cost {

namespace {

std::int64_t element_bytes(Precision p) {
  return bytes_per_element(compute_element(p));
}

std::int64_t mul3(std::int64_t a, std::int64_t b, std::int64_t c) {
  return checked_mul(checked_mul(a, b, "activation bytes"), c, "activation bytes");
}

// x / t rounded up: a tensor-parallel rank's share of a width or of a token count.
std::int64_t split(std::int64_t x, std::int64_t t) {
  return (x + t - 1) / t;
}

void check_shape(const ActivationShape& a) {
  if (a.micro_batch < 1) throw FieldError("micro_batch", "must be a positive integer");
  if (a.tokens < 1) throw FieldError("seq_len", "must be a positive integer");
  if (a.tp < 1) throw FieldError("tp", "must be a positive integer");
  if (a.layers < 0) throw Error("activations: a negative number of layers");
  if (!(a.in_flight >= 1)) throw Error("activations: fewer than one micro-batch in flight");
  if (!(a.expert_rows_factor > 0 && a.expert_rows_factor <= 64))
    throw FieldError("capacity_factor", "routed rows must be 0 to 64 times the balanced share");
}

// `bytes` for each micro-batch in flight (a fraction under interleaving, rounded down).
std::int64_t kept(std::int64_t bytes, double in_flight) {
  const auto whole = static_cast<std::int64_t>(in_flight);
  if (static_cast<double>(whole) == in_flight) return checked_mul(bytes, whole, "activation bytes");
  return static_cast<std::int64_t>(static_cast<double>(bytes) * in_flight);
}

std::string layers_text(std::int64_t layers, double in_flight) {
  std::string out = " x " + std::to_string(layers) + " layers";
  if (in_flight == 1) return out;
  std::ostringstream n;
  n << in_flight;
  return out + " x " + n.str() + " micro-batches in flight";
}

// Adds a term to the total and, when the shape wants names, to the list of terms.
void add_term(ActivationEstimate& est, const ActivationShape& a, std::string_view name,
              std::int64_t bytes, std::string_view suffix = {}) {
  if (bytes <= 0) return;
  est.total += Bytes{bytes};
  if (a.named) est.terms.push_back({std::string(name).append(suffix), Bytes{bytes}});
}

// `bytes` kept for each micro-batch in flight: added rounded, or left open in `open`.
void add_kept(ActivationEstimate& est, const ActivationShape& a, InFlightActivations* open,
              std::string_view name, std::int64_t bytes, std::string_view suffix = {}) {
  if (!open) {
    add_term(est, a, name, kept(bytes, a.in_flight), suffix);
  } else if (bytes > 0) {
    open->per_micro_batch.at(open->terms++) = bytes;
  }
}

// Full checkpointing of every Nth block of the a.layers (checkpoint_every): those keep their
// inputs, the rest everything (`full` and `inputs` are all blocks' totals, shared out in
// proportion across a mixture's kinds); one block is rebuilt in backward when any is
// checkpointed.
void add_every_nth(std::int64_t full, std::int64_t inputs, std::int64_t largest,
                   const ActivationShape& a, ActivationEstimate& est, InFlightActivations* open) {
  const std::int64_t n = a.checkpoint_every;
  const std::int64_t checkpointed = a.layers / n;
  const std::int64_t layers = std::max<std::int64_t>(1, a.layers);
  const std::int64_t whole = full - checked_mul(full / layers, checkpointed, "activation bytes");
  const auto named = [&](const std::string& what, std::int64_t count) {
    return a.named ? what + layers_text(count, a.in_flight) : std::string();
  };
  add_kept(est, a, open, named("transformer blocks kept whole", a.layers - checkpointed), whole);
  add_kept(est, a, open,
           named("block inputs (checkpoints, 1 block in " + std::to_string(n) + ")", checkpointed),
           checked_mul(inputs / layers, checkpointed, "activation bytes"));
  if (checkpointed > 0) add_term(est, a, "one block recomputed during backward", largest);
}

// The blocks of one kind: `layers` of them (a mixture's dense first blocks are their own
// kind); what recomputation rebuilds is one block, the largest kind's.
struct BlockKind {
  BlockActivations block;
  std::int64_t layers = 0;
};

void add_blocks(const std::vector<BlockKind>& kinds, const ActivationShape& a,
                ActivationEstimate& est, InFlightActivations* open) {
  // Selective recomputation keeps `linear` less what its modules discard, and the scores
  // unless core_attn rebuilds them; one block's discarded tensors exist again in backward.
  const bool per_op = a.selective_policy == SelectivePolicy::per_op;
  const bool scores_rebuilt = per_op ? a.attention != Attention::flash
                                     : a.recompute_modules.has(RecomputeModule::core_attn);
  std::int64_t full = 0, selective = 0, inputs = 0, largest = 0, largest_rebuilt = 0;
  for (const auto& [block, layers] : kinds) {
    const std::int64_t one = block.linear.value + block.scores.value;
    const std::int64_t rebuilt = block.recomputed.value + (scores_rebuilt ? block.scores.value : 0);
    full = checked_add(full, checked_mul(one, layers, "activation bytes"), "activation bytes");
    selective = checked_add(selective, checked_mul(one - rebuilt, layers, "activation bytes"),
                            "activation bytes");
    inputs = checked_add(inputs, checked_mul(block.input.value, layers, "activation bytes"),
                         "activation bytes");
    largest = std::max(largest, one);
    largest_rebuilt = std::max(largest_rebuilt, rebuilt);
  }
  const std::string per = a.named ? layers_text(a.layers, a.in_flight) : std::string();
  const bool attention_only = !per_op && a.recompute_modules.is_default();
  const std::string modules = a.named ? text_of(a.recompute_modules) : std::string();
  const std::string kept_name =
      !a.named         ? std::string()
      : attention_only ? "transformer blocks without attention scores"
      : per_op         ? "transformer blocks: inputs and the outputs per-op checkpointing saves"
                       : "transformer blocks less what " + modules + " rebuild";
  const std::string rebuilt_name = !a.named         ? std::string()
                                   : attention_only ? "attention scores recomputed for one block"
                                   : per_op ? "one block's other tensors rebuilt during backward"
                                            : "one block's " + modules + " rebuilt during backward";
  switch (a.recompute) {
    case Checkpointing::none:
      add_kept(est, a, open, "transformer blocks", full, per);
      break;
    case Checkpointing::selective:
      add_kept(est, a, open, kept_name, selective, per);
      add_term(est, a, rebuilt_name, largest_rebuilt);
      break;
    case Checkpointing::full:
      if (a.checkpoint_every > 1) {
        add_every_nth(full, inputs, largest, a, est, open);
        break;
      }
      add_kept(est, a, open, "block inputs (checkpoints)", inputs, per);
      add_term(est, a, "one block recomputed during backward", largest);
      break;
  }
}

// The first stage's inputs: token ids (every tensor-parallel rank looks all of them up) and
// the embedding's dropout mask and norm input (split by sequence parallelism).
void add_embedding(const TransformerSpec& t, const ActivationShape& a, std::int64_t sb,
                   std::int64_t sbh_rank, ActivationEstimate& est, InFlightActivations* open) {
  const std::int64_t e = element_bytes(a.precision);
  add_kept(est, a, open, "input token ids (int64)", 8 * sb);
  if (t.embedding_dropout > 0) add_kept(est, a, open, "embedding dropout mask", sbh_rank);
  if (t.embedding_norm) add_kept(est, a, open, "embedding norm input", e * sbh_rank);
}

// DeepSeek-V3's multi-token prediction modules on the last stage, for its one micro-batch:
// each keeps a sparse block (no recomputation), the inputs of its two norms, of the 2h -> h
// projection and of its output norm, and its own logits and loss (`head_bytes`).
void add_multi_token_prediction(const TransformerSpec& t, const ActivationShape& a, std::int64_t sb,
                                std::int64_t sbh_rank, std::int64_t head_bytes,
                                ActivationEstimate& est) {
  if (t.mtp_layers == 0) return;
  const std::int64_t e = element_bytes(a.precision);
  ActivationShape one = a;
  one.layers = 1;
  one.dense_layers = 0;
  const auto block = block_activations(t, one);
  const std::int64_t projection =
      checked_mul(e, checked_mul(sb, 2 * t.hidden_size, "bytes"), "bytes");
  const std::int64_t module = block.linear.value + block.scores.value + projection +
                              checked_mul(3 * e, sbh_rank, "bytes") + head_bytes;
  add_term(est, a, "multi-token prediction: its block, projection, norms, logits and loss",
           checked_mul(module, t.mtp_layers, "activation bytes"));
}

// The last stage's final norm, head and loss, for the one micro-batch whose backward follows
// its forward there.
void add_head(const TransformerSpec& t, const ActivationShape& a, std::int64_t sb,
              std::int64_t sbh_rank, ActivationEstimate& est) {
  const std::int64_t e = element_bytes(a.precision);
  if (t.final_norm) add_term(est, a, "final norm input", e * sbh_rank);
  if (t.head != HeadKind::causal_lm && t.head != HeadKind::masked_lm &&
      t.head != HeadKind::pretraining) {
    est.model_output = Bytes{e * checked_mul(sb, t.hidden_size, "activation bytes")};
    if (t.pooler)
      add_term(est, a, "pooler input and output", 2 * e * a.micro_batch * t.hidden_size);
    return;
  }
  const std::int64_t sbv = checked_mul(sb, split(t.vocab_size, a.tp), "activation bytes");
  if (t.head != HeadKind::causal_lm) {
    add_term(est, a, "MLM transform: dense input, GELU input, LayerNorm input", 3 * e * sbh_rank);
  }
  add_term(est, a, "LM head input", e * sbh_rank);
  const std::int64_t logits = checked_mul(e, sbv, "activation bytes");
  add_term(est, a, "logits", logits);
  // Soft-capped logits (Gemma 2): tanh keeps its output, in the logits' precision.
  if (t.final_logit_softcap > 0) add_term(est, a, "soft-capped logits (tanh output)", logits);
  const std::int64_t fp32 = checked_mul(bytes_per_element(ElementType::fp32), sbv, "bytes");
  std::int64_t loss = 0;
  if (a.loss == LossKind::vocab_parallel) {
    add_term(est, a, "fp32 softmax kept by the vocab-parallel cross-entropy", fp32);
    loss = fp32;
  } else if (a.loss == LossKind::loss_parallel) {
    // The logits are freed before backward (torchtitan deletes them), whose peak holds four
    // fp32 copies: the kept log-softmax and three temporaries.
    const std::int64_t temporaries = checked_mul(3, fp32, "bytes") - logits;  // logits <= fp32
    add_term(est, a, "fp32 log-softmax kept by loss_parallel", fp32);
    add_term(est, a,
             "loss_parallel backward: zero gradient, exp of the log-softmax, their sum (fp32), "
             "less the logits freed before it",
             temporaries);
    loss = fp32 + temporaries;
  } else if (a.loss == LossKind::torch_freed) {
    // Forward: the fp32 copy and the log-softmax; backward, the logits freed: the log-softmax,
    // its gradient and the logits' gradient in fp32. Whichever is more.
    const std::int64_t upcast = is_mixed(a.precision) ? fp32 : 0;
    const std::int64_t backward = checked_mul(2, fp32, "bytes") - logits;  // logits <= fp32
    add_term(est, a, "log-softmax kept by cross-entropy (fp32)", fp32);
    add_term(est, a,
             upcast >= backward
                 ? "fp32 logits for the loss"
                 : "cross-entropy backward: the log-softmax's and the logits' fp32 gradients, "
                   "less the logits freed before it",
             std::max(upcast, backward));
    loss = fp32 + std::max(upcast, backward);
  } else {
    const std::int64_t upcast = is_mixed(a.precision) ? fp32 : 0;
    add_term(est, a, "fp32 logits for the loss", upcast);
    add_term(est, a, "log-softmax kept by cross-entropy (fp32)", fp32);
    loss = upcast + fp32;
  }
  est.model_output = Bytes{logits};
  est.loss_bytes = Bytes{loss};
  add_multi_token_prediction(t, a, sb, sbh_rank, logits + loss, est);
  est.logits_and_loss = Bytes{logits + loss};
  if (t.pooler) add_term(est, a, "pooler input and output", 2 * e * a.micro_batch * t.hidden_size);
}

ActivationShape whole_model_shape(const TransformerSpec& t, const TrainingConfig& c) {
  ActivationShape a;
  a.micro_batch = c.micro_batch;
  a.tokens = sequence_length(t, c.seq_len);
  a.precision = c.precision;
  a.attention = attention_as_run(t, c);
  a.recompute = c.checkpointing;
  a.recompute_modules = c.recompute_modules;
  a.selective_policy = c.selective_policy;
  a.fp8_gemms = c.fp8 != Fp8Recipe::none;
  a.checkpoint_every = c.checkpoint_every;
  a.eager = eager_layers(c);
  a.layers = t.num_layers;
  a.dense_layers = t.moe.active() ? t.moe.first_dense_layers : 0;
  return a;
}

// Layer lists: tensor 0 is the input, tensor i+1 the output of layer i; views and in-place
// ops share storage with their input. A storage is counted once however many ops save it.
ActivationEstimate layer_list_activations(const LayerListModel& m, const TrainingConfig& c) {
  ActivationEstimate est;
  est.modelled = true;
  const std::int64_t e = element_bytes(c.precision);
  const std::int64_t b = c.micro_batch;
  std::vector<std::size_t> storage{0};
  std::vector<std::int64_t> storage_bytes{
      checked_mul(element_count(m.input_shape), m.integer_input ? 8 : e, "activation bytes")};
  std::map<std::size_t, bool> saved;
  std::int64_t extra = 0;
  for (const auto& layer : m.layers) {
    const std::size_t in = storage.back();
    std::size_t out = in;
    if (!layer.output_aliases_input) {
      out = storage_bytes.size();
      storage_bytes.push_back(checked_mul(element_count(layer.output_shape), e, "bytes"));
    }
    storage.push_back(out);
    if (layer.saves_input) saved[in] = true;
    if (layer.saves_output) saved[out] = true;
    extra = checked_add(extra, layer.extra_saved_bytes_per_sample, "activation bytes");
  }
  saved[storage.back()] = true;  // the output, kept for the loss
  std::int64_t tensors = 0;
  for (const auto& [id, keep] : saved)
    tensors = checked_add(tensors, storage_bytes[id], "bytes");
  est.terms.push_back({"tensors saved for backward", Bytes{checked_mul(tensors, b, "bytes")}});
  if (extra > 0) {
    est.terms.push_back({"masks, pooling indices, norm statistics",
                         Bytes{checked_mul(extra, b, "activation bytes")}});
  }
  for (const auto& term : est.terms)
    est.total += term.bytes;
  est.model_output = Bytes{checked_mul(storage_bytes[storage.back()], b, "activation bytes")};
  return est;
}

}  // namespace

namespace {

// An MLP's inner tensors for `rows` token rows of width f (on this rank): the up (and gate)
// outputs and the activation's output, 4 tensors with a gate, 2 without.
std::int64_t mlp_inner_bytes(const TransformerSpec& t, std::int64_t e, std::int64_t rows,
                             std::int64_t f) {
  return checked_mul(is_gated(t.mlp) ? 4 * e : 2 * e, checked_mul(rows, f, "activation bytes"),
                     "activation bytes");
}

// A mixture-of-experts MLP keeps, besides its input (counted with the dense terms): the
// router's fp32 probabilities (sb x E, for the softmax's backward), the k permuted copies of
// every token (the experts' inputs), the experts' inner tensors for those k sb rows, the
// experts' outputs (the routing weights' gradient is their dot product with the output's
// gradient), and the shared expert's inner tensors. Expert widths split etp ways; a GPU's
// routed rows are the k copies of the tokens of its expert-tensor-parallel group (balanced
// routing: what expert parallelism sends away it receives back), k sb etp / tp of them; the
// router runs on the rank's own tokens (sb / t under sequence parallelism).
// `activation`: what recomputing the experts' activation (moe_act) discards of it: of a gated
// MLP's four inner tensors the activation's output and the product (the up-projection's
// gate and up outputs stay, its input), of a plain MLP's two the activation's output.
// `shared`: the shared expert's inner tensors.
struct MoeActivations {
  std::int64_t total = 0, activation = 0, shared = 0;
};

MoeActivations moe_activation_bytes(const TransformerSpec& t, const ActivationShape& a,
                                    std::int64_t sb, std::int64_t h) {
  const auto& moe = t.moe;
  const std::int64_t e = element_bytes(a.precision);
  const std::int64_t etp = a.expert_tp > 0 ? a.expert_tp : a.tp;
  const std::int64_t routed_tokens = checked_mul(sb, etp, "activation bytes") / a.tp;
  const std::int64_t router_tokens = a.sequence_parallel ? split(sb, a.tp) : sb;
  const auto rows = static_cast<std::int64_t>(std::ceil(
      static_cast<double>(checked_mul(routed_tokens, moe.experts_per_token, "activation bytes")) *
      a.expert_rows_factor));
  const std::int64_t copies = checked_mul(rows, h, "activation bytes");
  const std::int64_t inner_elements =
      checked_mul(rows, split(moe.expert_ffn_size, etp), "activation bytes");
  MoeActivations out;
  std::int64_t bytes = checked_mul(4, checked_mul(router_tokens, moe.experts, "activation bytes"),
                                   "activation bytes");
  bytes = checked_add(bytes, checked_mul(2 * e, copies, "activation bytes"), "activation bytes");
  bytes = checked_add(bytes, mlp_inner_bytes(t, e, rows, split(moe.expert_ffn_size, etp)),
                      "activation bytes");
  // The down projection's input (the product, or the activation's output) in the element
  // size that Linear saves it in; a gated MLP's activation output beside it.
  const std::int64_t down_input = a.fp8_linear_inputs ? 1 : e;
  out.activation = checked_mul(is_gated(t.mlp) ? e + down_input : down_input, inner_elements,
                               "activation bytes");
  if (moe.shared_ffn_size > 0) {
    const std::int64_t f = split(moe.shared_ffn_size, a.tp);
    out.shared = mlp_inner_bytes(t, e, sb, f);
    if (a.fp8_linear_inputs) out.shared -= checked_mul(e - 1, sb * f, "activation bytes");
    bytes = checked_add(bytes, mlp_inner_bytes(t, e, sb, f), "activation bytes");
  }
  // FP8 grouped Linears save their inputs in FP8: the routed copies (the up projection's) and
  // the activation's output (the down projection's), e - 1 bytes less per element.
  if (a.fp8_linear_inputs) {
    const std::int64_t inputs = checked_add(copies, inner_elements, "activation bytes");
    bytes -= checked_mul(e - 1, inputs, "activation bytes");
  }
  out.total = bytes;
  return out;
}

// The tensors of one block that its selective recomputation modules discard (see
// BlockActivations), as Megatron-LM's TransformerLayer applies them: layernorm only to a norm
// that runs on its own (latent attention's input norm, a mixture's pre-MLP norm; elsewhere
// Transformer Engine fuses the norm into the next Linear and there is nothing to discard),
// mlp only to dense blocks. `norm_output`: the QKV or MLP input as kept (after FP8 and
// sequence parallelism); `heads`: Q, K and V of the rank's heads; `dense_mlp`: a dense
// block's MLP inner tensors as kept.
std::int64_t recomputed_bytes(const TransformerSpec& t, const ActivationShape& a,
                              std::int64_t norm_output, std::int64_t heads, std::int64_t dense_mlp,
                              const MoeActivations& moe) {
  if (a.recompute != Checkpointing::selective) return 0;
  const auto& m = a.recompute_modules;
  const bool sparse = t.moe.active();
  const bool norms = m.has(RecomputeModule::layernorm);
  std::int64_t out = 0;
  if (norms && t.mla.active()) out += norm_output;  // the latent down-projections' input
  if (norms && sparse) out += norm_output;          // the router's and experts' input
  if (t.mla.active() && m.has(RecomputeModule::mla_up_proj)) out += heads;
  if (!sparse && m.has(RecomputeModule::mlp)) out += norm_output + dense_mlp;
  if (sparse && m.has(RecomputeModule::moe)) return out + moe.total;
  if (sparse && m.has(RecomputeModule::moe_act)) out += moe.activation;
  if (sparse && m.has(RecomputeModule::shared_experts)) out += moe.shared;
  return out;
}

// What torchtitan's per-op policy keeps of one block (SelectivePolicy::per_op): its input, the
// outputs of the matrix multiplies it does not recompute (of all of them under FP8, whose
// torch._scaled_mm it saves), the fused attention's output, and under sequence parallelism the
// outputs of the two reduce-scatters.
std::int64_t per_op_kept_bytes(const TransformerSpec& t, const ActivationShape& a, Bytes input) {
  const std::int64_t e = element_bytes(a.precision);
  const std::int64_t sb = checked_mul(a.tokens, a.micro_batch, "activation bytes");
  std::int64_t widths = 0;
  for (const auto& mm : per_op_block_mms(t, a.tp))
    if (!mm.recomputed || a.fp8_gemms) widths += mm.out;
  if (a.attention == Attention::flash) widths += split(t.o_size(), a.tp);
  std::int64_t kept = checked_mul(e, checked_mul(sb, widths, "activation bytes"), "bytes");
  if (a.sequence_parallel) {
    const std::int64_t sbh = checked_mul(sb, t.hidden_size, "activation bytes");
    kept = checked_add(kept, checked_mul(2 * e, split(sbh, a.tp), "bytes"), "activation bytes");
  }
  return checked_add(kept, input.value, "activation bytes");
}

}  // namespace

BlockActivations block_activations(const TransformerSpec& t, const ActivationShape& a) {
  check_shape(a);
  const std::int64_t e = element_bytes(a.precision), tp = a.tp;
  const std::int64_t s = a.tokens, b = a.micro_batch;
  const std::int64_t sb = checked_mul(s, b, "activation bytes");
  const std::int64_t sbh = checked_mul(sb, t.hidden_size, "activation bytes");
  // A tensor-parallel rank's widths: 1/t of the heads (hf-eager repeats K and V to every
  // query head) and of the MLP.
  // Q, the output projection's input (heads x value width), K and V.
  const std::int64_t q = split(t.q_size(), tp), o = split(t.o_size(), tp);
  const bool repeat = a.attention == Attention::hf_eager;
  const std::int64_t k = split(repeat ? t.q_size() : t.kv_size(), tp);
  const std::int64_t v = split(repeat ? t.o_size() : t.v_size(), tp);
  const std::int64_t f = split(t.ffn_size, tp), heads = split(t.num_heads, tp);
  const std::int64_t mask = t.hidden_dropout > 0 ? sbh : 0;
  // Replicated over the tensor-parallel ranks unless sequence parallelism splits them: the
  // inputs of the QKV projection, of the MLP and of the norms (2, or Gemma's 4), the two
  // dropout masks.
  std::int64_t replicated =
      e * sbh + mask + e * sbh + mask + checked_mul(t.norms_per_layer * e, sbh, "activation bytes");
  // Latent attention's down-projections run whole on every tensor-parallel rank: the query
  // latent's norm input and up-projection input, the key/value latent's norm input (with the
  // rotary key) and up-projection input.
  if (t.mla.active()) {
    const std::int64_t latents =
        2 * t.mla.q_lora_rank + 2 * t.mla.kv_lora_rank + t.mla.qk_rope_head_dim;
    replicated = checked_add(replicated, checked_mul(e, checked_mul(sb, latents, "bytes"), "bytes"),
                             "activation bytes");
  }
  // Split t ways: Q and the output projection's input, K and V, the MLP's inner tensors.
  const auto moe =
      t.moe.active() ? moe_activation_bytes(t, a, sb, t.hidden_size) : MoeActivations{};
  const std::int64_t mlp = t.moe.active() ? moe.total : mlp_inner_bytes(t, e, sb, f);
  const std::int64_t inner = e * checked_mul(sb, q + o + k + v, "activation bytes") + mlp;
  // Under FP8 the four Linear inputs kept are 1-byte copies: e - 1 bytes less per element of
  // the QKV and MLP inputs (replicated unless sequence parallel), the output projection's
  // input and the down projection's (dense MLP or shared expert).
  const std::int64_t saved = e - 1;
  const std::int64_t fp8_replicated = a.fp8_linear_inputs ? 2 * saved * sbh : 0;
  std::int64_t fp8_inner = 0;
  if (a.fp8_linear_inputs) {
    const std::int64_t down = t.moe.active() ? split(t.moe.shared_ffn_size, tp) : f;
    fp8_inner = saved * checked_mul(sb, o + down, "activation bytes");
  }
  BlockActivations out;
  out.linear = Bytes{
      inner - fp8_inner +
      (a.sequence_parallel ? split(replicated - fp8_replicated, tp) : replicated - fp8_replicated)};
  out.input = Bytes{a.sequence_parallel ? split(e * sbh, tp) : e * sbh};
  const std::int64_t norm_output = a.fp8_linear_inputs ? sbh : e * sbh;
  const std::int64_t dense_kept =
      mlp - (a.fp8_linear_inputs && !t.moe.active() ? (e - 1) * checked_mul(sb, f, "bytes") : 0);
  out.recomputed =
      Bytes{recomputed_bytes(t, a, a.sequence_parallel ? split(norm_output, tp) : norm_output,
                             e * checked_mul(sb, q + k + v, "activation bytes"), dense_kept, moe)};
  if (a.eager && eager_inventory_covers(t) && tp == 1) {
    // Op by op as eager autograd keeps it; the checkpoint is the residual stream (fp32 under
    // autocast).
    out.linear = Bytes{static_cast<std::int64_t>(
        std::llround(eager_saved_bytes_per_token(t, *a.eager) * static_cast<double>(sb)))};
    out.input = Bytes{
        checked_mul(static_cast<std::int64_t>(a.eager->stream_bytes()), sbh, "activation bytes")};
  }
  if (a.recompute == Checkpointing::selective && a.selective_policy == SelectivePolicy::per_op)
    out.recomputed =
        Bytes{std::max<std::int64_t>(0, out.linear.value - per_op_kept_bytes(t, a, out.input))};
  const std::int64_t as2b = mul3(checked_mul(heads, s, "activation bytes"), s, b);
  const std::int64_t dropout = t.attention_dropout > 0 ? as2b + checked_mul(e, as2b, "bytes") : 0;
  // Eager soft-capping keeps its tanh's output for the backward: one more s x s tensor.
  const std::int64_t capped = t.attn_logit_softcap > 0 ? checked_mul(e, as2b, "bytes") : 0;
  switch (a.attention) {
    case Attention::flash:
      out.scores = Bytes{mul3(4 * heads, s, b)};
      break;
    case Attention::eager:
      out.scores = Bytes{checked_mul(e, as2b, "activation bytes") + dropout + capped};
      break;
    case Attention::hf_eager: {
      // The fp32 softmax output; then the 16-bit probabilities, or the dropout mask and output.
      const std::int64_t probs = e == 4 ? 0 : checked_mul(e, as2b, "activation bytes");
      out.scores = Bytes{checked_mul(4, as2b, "activation bytes") +
                         (dropout > 0 ? dropout : probs) + capped};
      break;
    }
  }
  return out;
}

namespace {

ActivationEstimate stage_terms(const TransformerSpec& t, const ActivationShape& a,
                               InFlightActivations* open) {
  ActivationEstimate est;
  est.modelled = true;
  est.seq_len = a.tokens;
  std::vector<BlockKind> kinds;
  // block_runs splits by position; a stage holding `dense_layers` of the dense first blocks
  // reads as the layers from first_dense_layers - dense_layers on.
  for (const auto& run : block_runs(t, t.moe.first_dense_layers - a.dense_layers, a.layers))
    kinds.push_back({block_activations(run.block, a), run.layers});
  add_blocks(kinds, a, est, open);
  const std::int64_t sb = checked_mul(a.tokens, a.micro_batch, "activation bytes");
  const std::int64_t sbh = checked_mul(sb, t.hidden_size, "activation bytes");
  const std::int64_t sbh_rank = a.sequence_parallel ? split(sbh, a.tp) : sbh;
  if (a.embedding) add_embedding(t, a, sb, sbh_rank, est, open);
  if (a.head) add_head(t, a, sb, sbh_rank, est);
  return est;
}

}  // namespace

ActivationEstimate stage_activations(const TransformerSpec& t, const ActivationShape& a) {
  return stage_terms(t, a, nullptr);
}

InFlightActivations stage_activations_in_flight(const TransformerSpec& t,
                                                const ActivationShape& a) {
  InFlightActivations out;
  out.once = stage_terms(t, a, &out);
  return out;
}

Bytes InFlightActivations::at(double in_flight) const {
  if (!(in_flight >= 1)) throw Error("activations: fewer than one micro-batch in flight");
  Bytes total = once.total;
  for (std::size_t i = 0; i < terms; ++i)
    total += Bytes{kept(per_micro_batch.at(i), in_flight)};
  return total;
}

Bytes layer_activation_bytes(const TransformerSpec& t, std::int64_t b, std::int64_t s, Precision p,
                             Attention attn, bool keep_attention_scores) {
  ActivationShape a;
  a.micro_batch = b;
  a.tokens = s;
  a.precision = p;
  a.attention = attn;
  const auto block = block_activations(t, a);
  return block.linear + (keep_attention_scores ? block.scores : Bytes{0});
}

ActivationEstimate estimate_activations(const ModelDesc& m, const TrainingConfig& c, bool named) {
  if (c.micro_batch < 1) throw FieldError("micro_batch", "must be a positive integer");
  if (c.seq_len < 0) throw FieldError("seq_len", "must be a positive integer");
  if (m.transformer) {
    auto shape = whole_model_shape(*m.transformer, c);
    shape.named = named;
    return stage_activations(*m.transformer, shape);
  }
  if (m.layers) return layer_list_activations(*m.layers, c);
  return {};
}

}  // namespace dtplan::cost
