// A tensor-parallel rank's share of each unit, piece by piece (tensor_parallel.hpp).
#include "dtplan/runtime/tensor_parallel.hpp"

#include <algorithm>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/block_layout.hpp"

namespace dtplan::runtime {
namespace {

class Pieces {
 public:
  explicit Pieces(std::int64_t rank) : rank_(rank) {}

  // `n` elements whole on every rank.
  void replicated(std::int64_t local_at, std::int64_t whole_at, std::int64_t n) {
    if (n > 0) out_.push_back({local_at, whole_at, 1, n, n, 0, true});
  }
  // This rank's `n` consecutive elements of a tensor split in equal runs (rows of a
  // column-parallel matrix, a vocabulary slice).
  void rows(std::int64_t local_at, std::int64_t whole_at, std::int64_t n) {
    if (n > 0) out_.push_back({local_at, whole_at + rank_ * n, 1, n, n, 0, false});
  }
  // This rank's `cols` of each of `rows` rows of `whole_cols` (a row-parallel matrix).
  void columns(std::int64_t local_at, std::int64_t whole_at, std::int64_t rows, std::int64_t cols,
               std::int64_t whole_cols) {
    out_.push_back({local_at, whole_at, rows, cols, whole_cols, rank_ * cols, false});
  }
  std::vector<TensorPiece> take() { return std::move(out_); }

 private:
  std::int64_t rank_;
  std::vector<TensorPiece> out_;
};

// The fused QKV weight (per = h) or bias (per = 1): this rank's query heads, then its key and
// value heads.
void qkv_pieces(Pieces& p, const cost::DenseStack& share, std::int64_t local_at,
                std::int64_t whole_at, std::int64_t per) {
  const std::int64_t q = share.q_size(), kv = share.kv_size(), tp = share.tp;
  p.rows(local_at, whole_at, q * per);
  p.rows(local_at + q * per, whole_at + q * tp * per, kv * per);
  p.rows(local_at + (q + kv) * per, whole_at + (q + kv) * tp * per, kv * per);
}

void block_pieces(Pieces& p, const cost::DenseStack& share) {
  const auto whole = cost::whole_of(share);
  const auto l = block_offsets(share), w = block_offsets(whole);
  const std::int64_t h = share.hidden, f = share.ffn;
  p.replicated(l.n1, w.n1, l.wqkv - l.n1);
  qkv_pieces(p, share, l.wqkv, w.wqkv, h);
  if (share.qkv_bias) qkv_pieces(p, share, l.bqkv, w.bqkv, 1);
  p.columns(l.wo, w.wo, h, share.q_size(), whole.q_size());
  p.replicated(l.bo, w.bo, l.n2 - l.bo);
  p.replicated(l.n2, w.n2, share.norm_params());
  if (share.gated) {
    p.rows(l.wg, w.wg, f * h);
    p.rows(l.bg, w.bg, l.wu - l.bg);
  }
  p.rows(l.wu, w.wu, f * h);
  p.rows(l.bu, w.bu, l.wd - l.bu);
  p.columns(l.wd, w.wd, h, f, whole.ffn);
  p.replicated(l.bd, w.bd, l.end - l.bd);
}

}  // namespace

std::vector<TensorPiece> tensor_pieces(const cost::DenseStack& share, std::int64_t unit,
                                       std::int64_t rank) {
  const auto units = cost::units_of(share);
  if (unit < 0 || unit >= static_cast<std::int64_t>(units.size()) || rank < 0 || rank >= share.tp) {
    throw Error("tensor pieces: unit " + std::to_string(unit) + " of " +
                std::to_string(units.size()) + ", rank " + std::to_string(rank) + " of " +
                std::to_string(share.tp));
  }
  Pieces p(rank);
  const std::int64_t params = units[static_cast<std::size_t>(unit)].params;
  if (cost::unit_kind(share, unit) == cost::UnitKind::block) {
    block_pieces(p, share);
    return p.take();
  }
  // The embedding (with learned positions, and the final norm when tied) or the untied head
  // (with the final norm): the vocabulary rows, then what follows them whole.
  const std::int64_t table = share.vocab * share.hidden;
  p.rows(0, 0, table);
  p.replicated(table, table * share.tp, params - table);
  return p.take();
}

std::vector<float> cut_share(const std::vector<TensorPiece>& pieces, const float* whole) {
  std::int64_t n = 0;
  for (const auto& q : pieces)
    n = std::max(n, q.local_at + q.elements());
  std::vector<float> share(static_cast<std::size_t>(n));
  for (const auto& q : pieces) {
    for (std::int64_t i = 0; i < q.rows; ++i) {
      const float* from = whole + q.whole_at + i * q.whole_cols + q.col_at;
      std::copy(from, from + q.cols, share.begin() + q.local_at + i * q.cols);
    }
  }
  return share;
}

void place_share(const std::vector<TensorPiece>& pieces, const float* share, float* whole) {
  for (const auto& q : pieces) {
    for (std::int64_t i = 0; i < q.rows; ++i) {
      const float* from = share + q.local_at + i * q.cols;
      std::copy(from, from + q.cols, whole + q.whole_at + i * q.whole_cols + q.col_at);
    }
  }
}

}  // namespace dtplan::runtime
