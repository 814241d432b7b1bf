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
//   norms      2 * e*sbh (each norm's input)
//
// With e = 2, f = 4h, k = q = h, dropout and eager scores: 34*sbh + 5*as^2b.
#include "dtplan/cost/activations.hpp"

#include <map>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

std::int64_t element_bytes(Precision p) {
  return bytes_per_element(compute_element(p));
}

std::int64_t mul3(std::int64_t a, std::int64_t b, std::int64_t c) {
  return checked_mul(checked_mul(a, b, "activation bytes"), c, "activation bytes");
}

struct BlockTerms {
  std::int64_t linear = 0;  // everything but the s^2 scores
  std::int64_t scores = 0;  // the s^2 attention terms (eager) or log-sum-exp (flash)
};

BlockTerms block_terms(const TransformerSpec& t, std::int64_t b, std::int64_t s, Precision p,
                       Attention attn) {
  const std::int64_t e = element_bytes(p);
  const std::int64_t sb = checked_mul(s, b, "activation bytes");
  const std::int64_t sbh = mul3(sb, t.hidden_size, 1);
  const std::int64_t sbq = checked_mul(sb, t.q_size(), "activation bytes");
  const std::int64_t kv_width = attn == Attention::hf_eager ? t.q_size() : t.kv_size();
  const std::int64_t sbk = checked_mul(sb, kv_width, "activation bytes");
  const std::int64_t sbf = checked_mul(sb, t.ffn_size, "activation bytes");
  const std::int64_t mask = t.hidden_dropout ? sbh : 0;
  BlockTerms out;
  out.linear = e * sbh + 2 * e * sbq + 2 * e * sbk + mask;  // attention
  if (t.mlp == MlpKind::swiglu) {
    out.linear += e * sbh + checked_mul(4 * e, sbf, "activation bytes") + mask;
  } else {
    out.linear += e * sbh + checked_mul(2 * e, sbf, "activation bytes") + mask;
  }
  out.linear += 2 * e * sbh;  // norms
  const std::int64_t as2b = mul3(checked_mul(t.num_heads, s, "activation bytes"), s, b);
  const std::int64_t dropout = t.attention_dropout ? as2b + checked_mul(e, as2b, "bytes") : 0;
  switch (attn) {
    case Attention::flash:
      out.scores = mul3(4 * t.num_heads, s, b);
      break;
    case Attention::eager:
      out.scores = checked_mul(e, as2b, "activation bytes") + dropout;
      break;
    case Attention::hf_eager: {
      // The fp32 softmax output; then the 16-bit probabilities, or the dropout mask and output.
      const std::int64_t probs = e == 4 ? 0 : checked_mul(e, as2b, "activation bytes");
      out.scores = checked_mul(4, as2b, "activation bytes") + (dropout > 0 ? dropout : probs);
      break;
    }
  }
  return out;
}

ActivationEstimate transformer_activations(const TransformerSpec& t, const TrainingConfig& c) {
  ActivationEstimate est;
  est.modelled = true;
  const std::int64_t s = sequence_length(t, c.seq_len);
  est.seq_len = s;
  const std::int64_t b = c.micro_batch;
  const std::int64_t e = element_bytes(c.precision);
  const std::int64_t sb = checked_mul(s, b, "activation bytes");
  const std::int64_t sbh = checked_mul(sb, t.hidden_size, "activation bytes");
  const auto block = block_terms(t, b, s, c.precision, c.attention);
  const std::int64_t full_block = block.linear + block.scores;
  const std::int64_t L = t.num_layers;

  auto add = [&est](std::string name, std::int64_t bytes) {
    if (bytes > 0) est.terms.push_back({std::move(name), Bytes{bytes}});
  };
  const std::string per = " x " + std::to_string(L) + " layers";
  switch (c.checkpointing) {
    case Checkpointing::none:
      add("transformer blocks" + per, checked_mul(full_block, L, "activation bytes"));
      break;
    case Checkpointing::selective:
      add("transformer blocks without attention scores" + per,
          checked_mul(block.linear, L, "activation bytes"));
      add("attention scores recomputed for one block", block.scores);
      break;
    case Checkpointing::full:
      add("block inputs (checkpoints)" + per, checked_mul(e * sbh, L, "activation bytes"));
      add("one block recomputed during backward", full_block);
      break;
  }
  add("input token ids (int64)", 8 * sb);
  if (t.embedding_dropout) add("embedding dropout mask", sbh);
  if (t.embedding_norm) add("embedding norm input", e * sbh);
  if (t.final_norm) add("final norm input", e * sbh);
  if (t.head == HeadKind::causal_lm || t.head == HeadKind::masked_lm ||
      t.head == HeadKind::pretraining) {
    const std::int64_t sbv = checked_mul(sb, t.vocab_size, "activation bytes");
    if (t.head != HeadKind::causal_lm) {
      add("MLM transform: dense input, GELU input, LayerNorm input", 3 * e * sbh);
    }
    add("LM head input", e * sbh);
    add("logits", checked_mul(e, sbv, "activation bytes"));
    const std::int64_t fp32 = bytes_per_element(ElementType::fp32);
    const std::int64_t upcast = is_mixed(c.precision) ? checked_mul(fp32, sbv, "bytes") : 0;
    const std::int64_t log_softmax = checked_mul(fp32, sbv, "activation bytes");
    add("fp32 logits for the loss", upcast);
    add("log-softmax kept by cross-entropy (fp32)", log_softmax);
    est.model_output = Bytes{checked_mul(e, sbv, "activation bytes")};
    est.loss_bytes = Bytes{upcast + log_softmax};
  } else {
    est.model_output = Bytes{e * sbh};
  }
  if (t.pooler) add("pooler input and output", 2 * e * b * t.hidden_size);
  for (const auto& term : est.terms)
    est.total += term.bytes;
  return est;
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

Bytes layer_activation_bytes(const TransformerSpec& t, std::int64_t b, std::int64_t s, Precision p,
                             Attention attn, bool keep_attention_scores) {
  const auto block = block_terms(t, b, s, p, attn);
  return Bytes{block.linear + (keep_attention_scores ? block.scores : 0)};
}

ActivationEstimate estimate_activations(const ModelDesc& m, const TrainingConfig& c) {
  if (c.micro_batch < 1) throw FieldError("micro_batch", "must be a positive integer");
  if (c.seq_len < 0) throw FieldError("seq_len", "must be a positive integer");
  if (m.transformer) return transformer_activations(*m.transformer, c);
  if (m.layers) return layer_list_activations(*m.layers, c);
  return {};
}

}  // namespace dtplan::cost
