// Flat parameter layout, per-rank slices and DDP buckets.
#include "dtplan/runtime/param_layout.hpp"

#include <algorithm>

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {

ParamLayout::ParamLayout(const cost::DenseStack& stack, int world_size) : world_(world_size) {
  if (world_size < 1) throw Error("world size must be >= 1");
  for (const auto& u : cost::units_of(stack)) {
    UnitLayout l;
    l.name = u.name;
    l.params = u.params;
    l.padded = (u.params + world_size - 1) / world_size * world_size;
    l.slice = l.padded / world_size;
    l.flat_offset = flat_;
    l.shard_offset = shard_;
    flat_ += l.padded;
    shard_ += l.slice;
    units_.push_back(l);
  }
}

std::int64_t ParamLayout::largest_unit() const {
  std::int64_t m = 0;
  for (const auto& u : units_)
    m = std::max(m, u.padded);
  return m;
}

std::int64_t ParamLayout::largest_slice() const {
  return largest_unit() / world_;
}

std::vector<Bucket> ParamLayout::buckets(std::int64_t cap_bytes) const {
  if (cap_bytes < 1) throw Error("bucket cap must be at least 1 byte");
  std::vector<Bucket> out;
  const auto n = static_cast<std::int64_t>(units_.size());
  Bucket b{n - 1, n - 1, 0, 0};
  for (std::int64_t u = n - 1; u >= 0; --u) {
    const auto& unit = units_[static_cast<std::size_t>(u)];
    b.first_unit = u;
    b.flat_offset = unit.flat_offset;
    b.elements += unit.padded;
    if (b.elements * 4 >= cap_bytes || u == 0) {
      out.push_back(b);
      b = Bucket{u - 1, u - 1, 0, 0};
    }
  }
  return out;
}

}  // namespace dtplan::runtime
