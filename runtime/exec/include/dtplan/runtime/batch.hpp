// Synthetic but learnable training data, identical for any world size: sample g of step t has
// tokens hash(seed, t, g, position) mod vocab and targets (7 token + 3) mod vocab, so a rank
// of a data-parallel group and a single process reading the same sample see the same tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace dtplan::runtime {

struct TokenBatch {
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> targets;
};

// Samples [first_sample, first_sample + samples) of step `step`, seq_len tokens each.
TokenBatch make_batch(std::uint64_t seed, std::int64_t step, std::int64_t first_sample,
                      std::int64_t samples, std::int64_t seq_len, std::int64_t vocab);

}  // namespace dtplan::runtime
