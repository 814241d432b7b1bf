// Flat layout, per-rank slices and DDP buckets, against counts derived by hand for the tiny
// stack (tiny_stack.hpp): embedding 37 x 12 = 444; a GELU block = QKV 12 x 24 + 24, out
// 12 x 12 + 12, up 12 x 20 + 20, down 20 x 12 + 12 = 980.
#include <catch2/catch.hpp>

#include "dtplan/runtime/param_layout.hpp"
#include "tiny_stack.hpp"

using namespace dtplan;

TEST_CASE("units are padded to the world size and sliced per rank") {
  const auto s = test::tiny_stack(false, true);
  const runtime::ParamLayout l(s, 3);
  REQUIRE(l.units().size() == 3);  // embedding, block 0, block 1 (tied head)
  CHECK(l.units()[0].params == 444);
  CHECK(l.units()[0].padded == 444);  // 444 = 3 x 148
  CHECK(l.units()[1].params == 980);
  CHECK(l.units()[1].padded == 981);  // next multiple of 3
  CHECK(l.units()[1].slice == 327);
  CHECK(l.units()[2].flat_offset == 444 + 981);
  CHECK(l.units()[2].shard_offset == 148 + 327);
  CHECK(l.flat_elements() == 444 + 2 * 981);
  CHECK(l.shard_elements() == 148 + 2 * 327);
}

TEST_CASE("DDP buckets fill in backward order without splitting a unit") {
  const auto s = test::tiny_stack(false, false);  // + untied head 444
  const runtime::ParamLayout l(s, 1);
  // Backward order: head 444, block 1 980, block 0 980, embedding 444. A 1,000-float cap
  // closes a bucket once it holds >= 1,000: {head, block 1}, {block 0, embedding}.
  const auto b = l.buckets(1000 * 4);
  REQUIRE(b.size() == 2);
  CHECK(b[0].elements == 444 + 980);
  CHECK(b[0].first_unit == 2);
  CHECK(b[0].flat_offset == 444 + 980);
  CHECK(b[1].elements == 980 + 444);
  CHECK(b[1].first_unit == 0);
  CHECK(l.buckets(1).size() == 4);  // a tiny cap: one unit per bucket
}
