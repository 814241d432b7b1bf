// The workload dtplan-run executes for a transformer plan: the model's dense layers applied
// token by token. Every block keeps the model's GEMMs (fused QKV, attention output, the MLP
// with or without a gate) with their biases; the token embedding is a real lookup and the LM
// head a real GEMM against the (tied or untied) embedding matrix, with a softmax
// cross-entropy loss. Two things are left out and said so in every measurement: the
// attention-score GEMMs (each token attends only to itself, so the block's output is its value
// projection) and the norms (a few thousand parameters). `scale` multiplies the head dimension,
// the MLP width and the vocabulary, so parameters shrink by about scale^2.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/transformer.hpp"

namespace dtplan::cost {

struct DenseStack {
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;  // = heads x head_dim
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;
  std::int64_t layers = 0;
  std::int64_t seq_len = 0;
  bool gated = false;  // SwiGLU: gate, up and down matrices
  bool bias = true;
  bool tied = true;  // the LM head reuses the embedding matrix
  double scale = 1;

  std::int64_t q_size() const { return heads * head_dim; }
  std::int64_t kv_size() const { return kv_heads * head_dim; }
  std::int64_t qkv_size() const { return q_size() + 2 * kv_size(); }
};

// Throws dtplan::Error unless 0 < scale <= 1 and seq_len >= 1.
DenseStack dense_stack_of(const TransformerSpec& spec, double scale, std::int64_t seq_len);

// A unit is what ZeRO-3 gathers at once and what gradients are bucketed by: the embedding,
// each block, and the untied head.
struct DenseUnit {
  std::string name;
  std::int64_t params = 0;
};
std::vector<DenseUnit> units_of(const DenseStack& s);
std::int64_t params_of(const DenseStack& s);

// Forward + backward FLOPs per token: 6 x (every matrix's elements, the head included).
double flops_per_token(const DenseStack& s);
// Elements dtplan-run keeps from forward for backward, per token (fp32): per block the block
// input, the attention output, the MLP input, the MLP pre-activations (two with a gate) and
// the activated MLP output; then the final hidden state and the logits.
std::int64_t stored_elements_per_token(const DenseStack& s);

// Scratch elements per token dtplan-run keeps for one micro-step: the fused QKV output (reused
// for its gradient) and backward's temporaries (two hidden-sized, the MLP gradients, the
// attention-output gradient).
std::int64_t scratch_elements_per_token(const DenseStack& s);

// The GEMMs of one micro-step of `tokens` tokens, forward and backward (each Linear: one
// forward GEMM, two backward GEMMs for the input and weight gradients).
struct Gemm {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t count = 0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
           static_cast<double>(count);
  }
};
std::vector<Gemm> gemms_of(const DenseStack& s, std::int64_t tokens);

nlohmann::json to_json(const DenseStack& s);
// Reads what to_json wrote (inside a measurement file); throws naming the key on errors.
DenseStack dense_stack_from_json(const ObjectReader& r);

}  // namespace dtplan::cost
