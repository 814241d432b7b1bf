// Tests for planner/src/schedule.cpp: steps from a dataset or given, warm-up, wall-clock and
// linear learning-rate scaling, with the arithmetic done by hand.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/planner/schedule.hpp"

using namespace dtplan::planner;

TEST_CASE("from a dataset: ceil(samples x epochs / global batch) optimizer steps") {
  ScheduleRequest r;
  r.dataset_size = 1'000'000;
  r.epochs = 3;
  // 3,000,000 / 512 = 5859.375: 5860 steps, the last one partly a fourth epoch.
  const auto s = make_schedule(r, 512, 4, 2.0);
  CHECK(s.optimizer_steps == 5860);
  CHECK(s.micro_steps == 5860 * 4);
  CHECK(s.samples == 5860 * 512);
  CHECK(s.epochs == Approx(5860.0 * 512 / 1e6));
  CHECK(s.scheduler_steps == 5860);
  CHECK(s.warmup_steps == 176);  // ceil(0.03 x 5860) = ceil(175.8)
  CHECK(s.time_s == Approx(5860 * 2.0));
  CHECK_FALSE(s.scaled_lr);
}

TEST_CASE("given steps, linear LR scaling to the planned batch") {
  ScheduleRequest r;
  r.steps = 1000;
  r.warmup_ratio = 0.1;
  r.base_lr = 3e-4;
  r.base_global_batch = 256;
  const auto s = make_schedule(r, 1024, 2, 0.5);
  CHECK(s.optimizer_steps == 1000);
  CHECK(s.warmup_steps == 100);
  CHECK(s.samples == 1'024'000);
  REQUIRE(s.scaled_lr);
  CHECK(*s.scaled_lr == Approx(1.2e-3));  // 3e-4 x 1024 / 256
}

TEST_CASE("inconsistent schedule requests name the fields") {
  ScheduleRequest r;
  r.steps = 10;
  r.dataset_size = 100;
  r.epochs = 1;
  CHECK_THROWS_WITH(check_schedule_request(r),
                    Catch::Contains("steps: give the number of steps or the dataset_size"));
  r = {};
  r.dataset_size = 100;
  CHECK_THROWS_WITH(check_schedule_request(r), Catch::Contains("epochs: "));
  r = {};
  r.epochs = 2;
  CHECK_THROWS_WITH(check_schedule_request(r), Catch::Contains("epochs: needs dataset_size"));
  r = {};
  r.base_lr = 1e-4;
  CHECK_THROWS_WITH(check_schedule_request(r), Catch::Contains("base_global_batch: "));
  r = {};
  r.warmup_ratio = 1.0;
  CHECK_THROWS_WITH(check_schedule_request(r), Catch::Contains("warmup_ratio: "));
  r = {};
  r.steps = -1;
  CHECK_THROWS_WITH(check_schedule_request(r), Catch::Contains("must be positive"));
}
