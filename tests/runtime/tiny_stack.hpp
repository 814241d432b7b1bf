// A transformer-shaped dense stack small enough to train in milliseconds, for runtime tests.
#pragma once

#include "dtplan/cost/dense_stack.hpp"

namespace dtplan::test {

// vocab 37, 4 heads over 2 KV heads, MLP 20, 2 layers, 8 tokens per sample, all biases.
// GELU: GPT-2's kind (LayerNorm, 8 learned positions), heads of 3 (hidden 12). Gated: Llama's
// kind (SwiGLU, RMSNorm, rotary positions with base 10,000), heads of 4 (hidden 16).
inline cost::DenseStack tiny_stack(bool gated, bool tied) {
  cost::DenseStack s;
  s.vocab = 37;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = gated ? 4 : 3;
  s.hidden = s.heads * s.head_dim;
  s.ffn = 20;
  s.layers = 2;
  s.seq_len = 8;
  s.gated = gated;
  s.tied = tied;
  if (gated) {
    s.norm = cost::StackNorm::rmsnorm;
    s.positions = cost::StackPositions::rotary;
    s.rope_theta = 10000;
  } else {
    s.norm = cost::StackNorm::layernorm;
    s.positions = cost::StackPositions::learned;
    s.max_positions = 8;
  }
  return s;
}

}  // namespace dtplan::test
