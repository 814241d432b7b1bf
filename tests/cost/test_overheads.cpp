// Tests for cost/src/overheads.cpp: the constants table and its overrides.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Contains;

namespace {
OverheadConstants defaults() {
  return load_overheads(std::filesystem::path(DTPLAN_DATA_DIR) / "overheads.json");
}
}  // namespace

TEST_CASE("NCCL buffer size per connection follows NCCL's protocol constants") {
  // NCCL src/include/device.h: SIMPLE = NCCL_BUFFSIZE default 4 MiB;
  // LL128 = NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x NCCL_STEPS 8 x 8 B;
  // LL = NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x 16 B.
  const std::int64_t simple = 4 * 1048576;
  const std::int64_t ll128 = 120LL * 640 * 8 * 8;
  const std::int64_t ll = 8LL * 512 * 8 * 16;
  const auto k = defaults();
  CHECK(k.nccl_buffer_bytes_per_connection == simple + ll128 + ll);
  CHECK(k.nccl_bytes_per_communicator() == 16 * 2 * (simple + ll128 + ll));
}

TEST_CASE("defaults are the documented values") {
  const auto k = defaults();
  CHECK(k.cuda_context_bytes == 512LL * 1048576);
  CHECK(k.allocator_slack_fraction == Approx(0.05));
  CHECK(k.zero_reduce_bucket_elements == 500'000'000);  // DeepSpeed reduce_bucket_size default
  CHECK(k.adam8bit_block_elements == 256);              // bitsandbytes Optimizer8bit blocksize
}

TEST_CASE("overrides change one constant and reject bad input") {
  auto k = defaults();
  apply_override(k, "cuda_context_bytes=1073741824");
  CHECK(k.cuda_context_bytes == 1073741824);
  apply_override(k, "allocator_slack_fraction=0");
  CHECK(k.allocator_slack_fraction == 0.0);
  CHECK_THROWS_WITH(
      apply_override(k, "cuda_context=5"),
      Contains("unknown overhead constant 'cuda_context'") && Contains("cuda_context_bytes"));
  CHECK_THROWS_WITH(apply_override(k, "nccl_channels=abc"), Contains("'abc' is not a number"));
  CHECK_THROWS_WITH(apply_override(k, "nccl_channels"), Contains("expected KEY=VALUE"));
  CHECK_THROWS_WITH(apply_override(k, "nccl_channels=-1"), Contains("must be an integer >= 0"));
  CHECK_THROWS_WITH(apply_override(k, "allocator_slack_fraction=1.5"), Contains("[0, 1)"));
}
