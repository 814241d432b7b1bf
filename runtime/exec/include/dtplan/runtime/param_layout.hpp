// Where every parameter lives. Parameters form one flat fp32 vector in forward order, cut into
// units (the embedding, each block, the untied head) -- what ZeRO-3 gathers at once and what
// gradient buckets are made of. Each unit is padded to a multiple of the world size so that
// rank r owns the r-th equal slice of every unit (as FSDP's flat parameters do):
//
//   flat:   | embedding      | block 0        | block 1        | ...
//   rank 0:  [slice 0]        [slice 0]        [slice 0]
//   rank 1:          [slice 1]        [slice 1]        [slice 1]
//
// A rank's shard is its slices of all units, concatenated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"

namespace dtplan::runtime {

struct UnitLayout {
  std::string name;
  std::int64_t params = 0;        // real parameters
  std::int64_t padded = 0;        // params rounded up to a multiple of the world size
  std::int64_t flat_offset = 0;   // in the flat (unsharded) vector
  std::int64_t slice = 0;         // padded / world size
  std::int64_t shard_offset = 0;  // of this unit's slice in a rank's shard
};

// A DDP bucket: consecutive units in the order backward completes them (a contiguous range of
// the flat vector, since backward runs the units in reverse).
struct Bucket {
  std::int64_t first_unit = 0;  // lowest unit index in the bucket
  std::int64_t last_unit = 0;   // highest; backward completes it first
  std::int64_t flat_offset = 0;
  std::int64_t elements = 0;
};

class ParamLayout {
 public:
  ParamLayout(const cost::DenseStack& stack, int world_size);

  const std::vector<UnitLayout>& units() const { return units_; }
  std::int64_t flat_elements() const { return flat_; }
  std::int64_t shard_elements() const { return shard_; }
  std::int64_t largest_unit() const;
  std::int64_t largest_slice() const;
  int world_size() const { return world_; }

  // Buckets of at least cap_bytes (the last may be smaller), filled in backward order as
  // PyTorch DDP fills them; a unit is never split.
  std::vector<Bucket> buckets(std::int64_t cap_bytes) const;

 private:
  std::vector<UnitLayout> units_;
  std::int64_t flat_ = 0;
  std::int64_t shard_ = 0;
  int world_ = 1;
};

}  // namespace dtplan::runtime
