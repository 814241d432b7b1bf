// Flat layout, per-rank slices and DDP buckets, against counts derived by hand for the tiny
// stack (tiny_stack.hpp, GELU): token table 37 x 12 = 444, learned positions 8 x 12 = 96, a
// LayerNorm 2 x 12 = 24; a block = two norms 48, QKV 12 x 24 + 24, out 12 x 12 + 12, up
// 12 x 20 + 20, down 20 x 12 + 12 = 1,028. The final norm sits with the head's matrix: in the
// embedding unit when tied (444 + 96 + 24 = 564), in the head unit when not (444 + 24 = 468,
// the embedding 540).
#include <catch2/catch.hpp>

#include "dtplan/runtime/param_layout.hpp"
#include "tiny_stack.hpp"

using namespace dtplan;

TEST_CASE("units are padded to the world size and sliced per rank") {
  const auto s = test::tiny_stack(false, true);
  const runtime::ParamLayout l(s, 3);
  REQUIRE(l.units().size() == 3);  // embedding, block 0, block 1 (tied head)
  CHECK(l.units()[0].params == 564);
  CHECK(l.units()[0].padded == 564);  // 564 = 3 x 188
  CHECK(l.units()[1].params == 1028);
  CHECK(l.units()[1].padded == 1029);  // next multiple of 3
  CHECK(l.units()[1].slice == 343);
  CHECK(l.units()[2].flat_offset == 564 + 1029);
  CHECK(l.units()[2].shard_offset == 188 + 343);
  CHECK(l.flat_elements() == 564 + 2 * 1029);
  CHECK(l.shard_elements() == 188 + 2 * 343);
}

TEST_CASE("DDP buckets fill in backward order without splitting a unit") {
  const auto s = test::tiny_stack(false, false);  // untied: embedding 540, head 468
  const runtime::ParamLayout l(s, 1);
  // Backward order: head 468, block 1 1,028, block 0 1,028, embedding 540. A 1,100-float cap
  // closes a bucket once it holds >= 1,100: {head, block 1}, {block 0, embedding}.
  const auto b = l.buckets(1100 * 4);
  REQUIRE(b.size() == 2);
  CHECK(b[0].elements == 468 + 1028);
  CHECK(b[0].first_unit == 2);
  CHECK(b[0].flat_offset == 540 + 1028);
  CHECK(b[1].elements == 1028 + 540);
  CHECK(b[1].first_unit == 0);
  CHECK(l.buckets(1).size() == 4);  // a tiny cap: one unit per bucket
}
