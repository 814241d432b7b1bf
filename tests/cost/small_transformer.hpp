// The small GPT-style model the layout tests derive figures by hand for.
#pragma once

#include "dtplan/model/model_desc.hpp"

namespace dtplan::test {

// h 1024, 16 heads of 64, MLP 4096, 8 layers, vocabulary 32000, learned positions (2048),
// biases, LayerNorm, tied embeddings.
inline TransformerSpec small_transformer() {
  TransformerSpec t;
  t.model_type = "gpt2";
  t.vocab_size = 32000;
  t.hidden_size = 1024;
  t.num_layers = 8;
  t.num_heads = t.num_kv_heads = 16;
  t.head_dim = 64;
  t.ffn_size = 4096;
  t.max_positions = 2048;
  return t;
}

// One GPT-2 block of GPT-2 small's widths (h 768, 12 heads of 64, MLP 3072, 1024 positions):
// learned positions, LayerNorm, biases, GELU, no dropout.
inline TransformerSpec gpt2_style_block(std::int64_t vocab) {
  TransformerSpec t;
  t.model_type = "gpt2";
  t.vocab_size = vocab;
  t.hidden_size = 768;
  t.num_layers = 1;
  t.num_heads = t.num_kv_heads = 12;
  t.head_dim = 64;
  t.ffn_size = 3072;
  t.max_positions = 1024;
  return t;
}

// One Llama-style block: RMSNorm, rotary positions, SwiGLU, no biases, untied, 1024 positions.
inline TransformerSpec llama_style_block(std::int64_t hidden, std::int64_t heads,
                                         std::int64_t kv_heads, std::int64_t head_dim,
                                         std::int64_t ffn, std::int64_t vocab) {
  TransformerSpec s;
  s.model_type = "llama";
  s.vocab_size = vocab;
  s.hidden_size = hidden;
  s.num_layers = 1;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.ffn_size = ffn;
  s.max_positions = 1024;
  s.mlp = MlpKind::swiglu;
  s.norm = NormKind::rmsnorm;
  s.positions = PositionKind::rotary;
  s.qkv_bias = s.attn_out_bias = s.mlp_bias = false;
  s.tied_embeddings = false;
  return s;
}

}  // namespace dtplan::test
