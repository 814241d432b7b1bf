// Tests for cost/src/pipeline_schedule.cpp: each row of the schedule table by hand, from the
// formulas of the papers it cites (see pipeline_schedule.hpp).
#include <catch2/catch.hpp>

#include "dtplan/cost/pipeline_schedule.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Contains;

namespace {
// F = 1 s, B = 1 s, W = 1 s: the zero-bubble papers' equal-time case.
constexpr StageTimes kEqual{1.0, 1.0, 1.0};
}  // namespace

TEST_CASE("1F1B and GPipe idle (p - 1)(F + B + W), GPipe keeps all m micro-batches") {
  // p = 4, m = 8: 3 x 3 s of bubble, the (p - 1)/m = 3/8 of the 8 x 3 s of work (Narayanan
  // et al. 2021, 2.2.1).
  const auto f = schedule_cost(PipelineSchedule::one_f_one_b, 4, 1, 8, kEqual);
  CHECK(f.bubble_s == Approx(9.0));
  CHECK(f.bubble_s / (8 * 3.0) == Approx(3.0 / 8));
  CHECK(f.in_flight == 4);  // min(p, m)
  CHECK(schedule_cost(PipelineSchedule::one_f_one_b, 4, 1, 2, kEqual).in_flight == 2);
  const auto g = schedule_cost(PipelineSchedule::gpipe, 4, 1, 8, kEqual);
  CHECK(g.bubble_s == Approx(9.0));
  CHECK(g.in_flight == 8);
}

TEST_CASE("interleaved 1F1B divides the bubble by v at v times the sends") {
  // p = 4, v = 2, m = 8: (p - 1)/v x 3 s = 4.5 s; the first stage holds p (1 + (p - 1)/(p v))
  // = 4 x 1.375 = 5.5 micro-batches of a stage (Korthikanti et al. 2022, 4.2.3).
  const auto c = schedule_cost(PipelineSchedule::interleaved, 4, 2, 8, kEqual);
  CHECK(c.bubble_s == Approx(4.5));
  CHECK(c.in_flight == Approx(5.5));
  CHECK(c.p2p_factor == 2);
  CHECK_THROWS_WITH(schedule_cost(PipelineSchedule::interleaved, 4, 2, 6, kEqual),
                    Contains("micro-batches must be a multiple of pp"));
  CHECK_THROWS_WITH(check_schedule(PipelineSchedule::interleaved, 4, 1, 8),
                    Contains("more than one chunk"));
}

TEST_CASE("zero-bubble schedules: ZB-H1 a third of 1F1B, ZB-H2 and ZBV none when F = B = W") {
  // Qi et al. 2024, Table 2, and the sail-sg README's table: bubble rates (p-1)/m, (p-1)/3m, 0
  // and 0; activations 1x, 1x, 2x and 1x of 1F1B; pipeline traffic 2x for ZBV.
  const auto h1 = schedule_cost(PipelineSchedule::zb_h1, 4, 1, 8, kEqual);
  CHECK(h1.bubble_s == Approx(3.0));  // (p - 1)(F + B - W)
  CHECK(h1.in_flight == 4);
  const auto h2 = schedule_cost(PipelineSchedule::zb_h2, 4, 1, 8, kEqual);
  CHECK(h2.bubble_s == 0);
  CHECK(h2.in_flight == 7);  // 2p - 1
  const auto v = schedule_cost(PipelineSchedule::zbv, 4, 2, 8, kEqual);
  CHECK(v.bubble_s == 0);
  CHECK(v.in_flight == 4);
  CHECK(v.p2p_factor == 2);
  // Unequal times: W = 0.5 s leaves (p - 1)(F + B - 2W) = 3 x 1 s for ZB-H2.
  CHECK(schedule_cost(PipelineSchedule::zb_h2, 4, 1, 8, {1.0, 1.0, 0.5}).bubble_s == Approx(3.0));
  CHECK(schedule_cost(PipelineSchedule::zbv, 4, 2, 8, {1.0, 1.0, 0.5}).bubble_s == Approx(1.5));
  CHECK_THROWS_WITH(check_schedule(PipelineSchedule::zb_h2, 4, 1, 6),
                    Contains("at least 2 pp - 1 micro-batches"));
  CHECK_THROWS_WITH(check_schedule(PipelineSchedule::zbv, 4, 4, 8),
                    Contains("exactly two model chunks"));
}

TEST_CASE("schedules by name") {
  for (const auto s : all_schedules())
    CHECK(parse_schedule(name_of(s)) == s);
  CHECK(default_schedule(1) == PipelineSchedule::one_f_one_b);
  CHECK(default_schedule(2) == PipelineSchedule::interleaved);
  CHECK_THROWS_WITH(parse_schedule("dualpipe"),
                    Contains("'dualpipe' is not known") && Contains("zb-h1"));
}
