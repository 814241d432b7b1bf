// Block tensor offsets (block_layout.hpp).
#include "dtplan/runtime/block_layout.hpp"

namespace dtplan::runtime {

BlockOffsets block_offsets(const cost::DenseStack& s) {
  const std::int64_t h = s.hidden, f = s.ffn;
  BlockOffsets o;
  std::int64_t at = 0;
  auto take = [&at](std::int64_t n) {
    const auto here = at;
    at += n;
    return here;
  };
  auto bias = [](bool has, std::int64_t n) { return has ? n : 0; };
  o.n1 = take(s.norm_params());
  o.wqkv = take(s.qkv_size() * h);
  o.bqkv = take(bias(s.qkv_bias, s.qkv_size()));
  o.wo = take(h * s.q_size());
  o.bo = take(bias(s.out_bias, h));
  o.n2 = take(s.norm_params());
  if (s.gated) {
    o.wg = take(f * h);
    o.bg = take(bias(s.mlp_bias, f));
  }
  o.wu = take(f * h);
  o.bu = take(bias(s.mlp_bias, f));
  o.wd = take(h * f);
  o.bd = take(bias(s.mlp_bias, h));
  o.end = at;
  return o;
}

}  // namespace dtplan::runtime
