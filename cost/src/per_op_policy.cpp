#include "per_op_policy.hpp"

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

std::int64_t split(std::int64_t x, std::int64_t t) {
  return (x + t - 1) / t;
}

}  // namespace

std::vector<BlockMm> per_op_block_mms(const TransformerSpec& t, std::int64_t tp) {
  if (tp < 1) throw Error("per-op checkpointing: tensor-parallel size below 1");
  std::vector<BlockMm> mms;
  const auto column = [&](std::int64_t in, std::int64_t out) {
    mms.push_back({in, split(out, tp)});
  };
  const auto row = [&](std::int64_t in, std::int64_t out) { mms.push_back({split(in, tp), out}); };
  const std::int64_t h = t.hidden_size;
  if (t.mla.active()) {
    const std::int64_t up = t.num_heads * (t.head_dim - t.mla.qk_rope_head_dim + t.v_dim());
    if (t.mla.q_lora_rank > 0) {
      mms.push_back({h, t.mla.q_lora_rank});
      column(t.mla.q_lora_rank, t.q_size());
    } else {
      column(h, t.q_size());
    }
    mms.push_back({h, t.mla.kv_lora_rank + t.mla.qk_rope_head_dim});
    column(t.mla.kv_lora_rank, up);
  } else {
    column(h, t.q_size());
    column(h, t.kv_size());
    column(h, t.v_size());
  }
  row(t.o_size(), h);
  const std::int64_t f = t.moe.active() ? t.moe.shared_ffn_size : t.ffn_size;
  if (f > 0) {
    column(h, f);
    if (is_gated(t.mlp)) column(h, f);
    row(f, h);
  }
  for (std::size_t i = 1; i < mms.size(); i += 2)
    mms[i].recomputed = true;
  return mms;
}

}  // namespace dtplan::cost
