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

}  // namespace dtplan::test
