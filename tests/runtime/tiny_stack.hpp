// A transformer-shaped dense stack small enough to train in milliseconds, for runtime tests.
#pragma once

#include "dtplan/cost/dense_stack.hpp"

namespace dtplan::test {

// vocab 37, 4 heads over 2 KV heads of 3 (hidden 12), MLP 20, 2 layers, 8 tokens per sample.
inline cost::DenseStack tiny_stack(bool gated, bool tied) {
  cost::DenseStack s;
  s.vocab = 37;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 3;
  s.hidden = 12;
  s.ffn = 20;
  s.layers = 2;
  s.seq_len = 8;
  s.gated = gated;
  s.bias = true;
  s.tied = tied;
  return s;
}

}  // namespace dtplan::test
