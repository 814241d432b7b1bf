// Deterministic token batches (see batch.hpp).
#include "dtplan/runtime/batch.hpp"

namespace dtplan::runtime {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

TokenBatch make_batch(std::uint64_t seed, std::int64_t step, std::int64_t first_sample,
                      std::int64_t samples, std::int64_t seq_len, std::int64_t vocab) {
  TokenBatch b;
  b.ids.reserve(static_cast<std::size_t>(samples * seq_len));
  b.targets.reserve(b.ids.capacity());
  const auto v = static_cast<std::uint64_t>(vocab);
  for (std::int64_t s = first_sample; s < first_sample + samples; ++s) {
    const std::uint64_t sample_key =
        mix(mix(seed ^ static_cast<std::uint64_t>(step)) + static_cast<std::uint64_t>(s));
    for (std::int64_t j = 0; j < seq_len; ++j) {
      const auto token = mix(sample_key + static_cast<std::uint64_t>(j)) % v;
      b.ids.push_back(static_cast<std::int32_t>(token));
      b.targets.push_back(static_cast<std::int32_t>((7 * token + 3) % v));
    }
  }
  return b;
}

}  // namespace dtplan::runtime
