// The training schedule a plan implies: optimizer steps, micro-steps, what to give the LR
// scheduler (total and warm-up steps), wall-clock time, and the linear learning-rate scaling
// (Goyal et al., "Accurate, Large Minibatch SGD", 2017) when the global batch differs from the
// one a learning rate was tuned for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtplan::planner {

struct ScheduleRequest {
  std::int64_t dataset_size = 0;  // samples
  double epochs = 0;
  std::int64_t steps = 0;         // optimizer steps, instead of dataset and epochs
  double warmup_ratio = 0.03;     // of the optimizer steps
  std::optional<double> base_lr;  // tuned at base_global_batch
  std::int64_t base_global_batch = 0;

  bool given() const { return steps > 0 || dataset_size > 0; }
};

struct Schedule {
  std::int64_t optimizer_steps = 0;
  std::int64_t micro_steps = 0;  // per GPU: optimizer steps x gradient accumulation
  std::int64_t samples = 0;
  double epochs = 0;
  std::int64_t scheduler_steps = 0;  // what an LR scheduler's num_training_steps must be
  std::int64_t warmup_steps = 0;
  double warmup_ratio = 0;  // the request's, which warmup_steps is of scheduler_steps
  double time_s = 0;
  std::optional<double> scaled_lr;
};

// Throws on an inconsistent request (see make_schedule); call before a search.
void check_schedule_request(const ScheduleRequest& r);

// Throws on an inconsistent request (both steps and a dataset, a dataset without epochs,
// non-positive values, a base learning rate without its batch).
Schedule make_schedule(const ScheduleRequest& r, std::int64_t global_batch, std::int64_t grad_accum,
                       double step_time_s);

}  // namespace dtplan::planner
