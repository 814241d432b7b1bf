// A tensor-parallel rank's share of each unit (tensor_parallel.hpp), checked on the tiny Llama
// kind (hidden 16: 4 heads of 4 over 2 key/value heads, MLP 20, RMSNorm, all biases, untied)
// split over 2 ranks, against offsets worked out by hand.
#include <catch2/catch.hpp>
#include <numeric>

#include "dtplan/runtime/tensor_parallel.hpp"
#include "tiny_stack.hpp"

using namespace dtplan;
using namespace dtplan::runtime;

namespace {

// The whole unit filled with its own indices, so that a share shows where each value came from.
std::vector<float> indices(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

std::int64_t sum_elements(const std::vector<TensorPiece>& pieces, bool replicated_only) {
  std::int64_t n = 0;
  for (const auto& p : pieces)
    n += replicated_only && !p.replicated ? 0 : p.elements();
  return n;
}

}  // namespace

TEST_CASE("tensor parallel: a block's share, by hand") {
  const auto whole = test::tiny_stack(true, false);
  const auto share = cost::tensor_parallel_share(whole, 2);
  // Per rank: norm 16, QKV (8 + 4 + 4 rows) x 16 = 256 and its bias 16, output 16 x 8 = 128 and
  // its bias 16 (whole), norm 16, gate and up 10 x 16 = 160 each with biases 10, down
  // 16 x 10 = 160 and its bias 16 (whole): 964. The whole block: 1,864 = 2 x 964 - 64, the 64
  // being the two norms and the two row-parallel biases both ranks hold.
  REQUIRE(cost::units_of(share)[1].params == 964);
  REQUIRE(cost::units_of(whole)[1].params == 1864);
  for (std::int64_t rank : {0, 1}) {
    const auto pieces = tensor_pieces(share, 1, rank);
    CHECK(sum_elements(pieces, false) == 964);
    CHECK(sum_elements(pieces, true) == 64);
  }
  const auto values = indices(1864);
  const auto r1 = cut_share(tensor_pieces(share, 1, 1), values.data());
  REQUIRE(r1.size() == 964u);
  // Rank 1's first query row is whole row 8 of the QKV (at 16): element 16 + 8 x 16.
  CHECK(r1[16] == 16 + 8 * 16);
  // Its key rows (after its 8 query rows, local 16 + 8 x 16) are whole row 16 + 4 (key head 1).
  CHECK(r1[16 + 8 * 16] == 16 + 20 * 16);
  // Its value rows: whole row 16 + 8 + 4.
  CHECK(r1[16 + 12 * 16] == 16 + 28 * 16);
  // The output projection (local at 16 + 256 + 16 = 288; whole at 16 + 512 + 32 = 560): row 0
  // of rank 1 starts at whole column 8, row 1 at 560 + 16 + 8.
  CHECK(r1[288] == 560 + 8);
  CHECK(r1[288 + 8] == 560 + 16 + 8);
  // The output bias is whole: local 416 .. 431 = whole 816 .. 831.
  CHECK(r1[416] == 816);
  CHECK(r1[431] == 831);
}

TEST_CASE("tensor parallel: every rank's share puts the whole unit back together") {
  for (bool gated : {true, false}) {
    for (bool tied : {true, false}) {
      const auto whole = test::tiny_stack(gated, tied);
      const auto share = cost::tensor_parallel_share(whole, 2);
      const auto whole_units = cost::units_of(cost::whole_of(share));
      for (std::size_t u = 0; u < whole_units.size(); ++u) {
        INFO((gated ? "gated" : "GELU") << (tied ? " tied" : " untied") << " unit " << u);
        const auto values = indices(whole_units[u].params);
        std::vector<float> back(values.size(), -1.0f);
        for (std::int64_t rank : {0, 1}) {
          const auto pieces = tensor_pieces(share, static_cast<std::int64_t>(u), rank);
          const auto mine = cut_share(pieces, values.data());
          CHECK(static_cast<std::int64_t>(mine.size()) == cost::units_of(share)[u].params);
          place_share(pieces, mine.data(), back.data());
        }
        CHECK(back == values);
      }
    }
  }
}

TEST_CASE("tensor parallel: the embedding's vocabulary slices, padded to even") {
  // vocab 37 pads to 38: 19 rows of 12 a rank, then the 8 learned positions and the final norm
  // (24: LayerNorm's scale and shift) whole.
  const auto share = cost::tensor_parallel_share(test::tiny_stack(false, true), 2);
  REQUIRE(share.vocab == 19);
  const auto pieces = tensor_pieces(share, 0, 1);
  REQUIRE(pieces.size() == 2u);
  CHECK(pieces[0].whole_at == 19 * 12);
  CHECK(pieces[0].elements() == 19 * 12);
  CHECK(pieces[1].replicated);
  CHECK(pieces[1].whole_at == 38 * 12);
  CHECK(pieces[1].elements() == 8 * 12 + 24);
  CHECK_THROWS_WITH(tensor_pieces(share, 0, 2), Catch::Contains("rank 2 of 2"));
}
