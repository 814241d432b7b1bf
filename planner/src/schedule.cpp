// Training schedule arithmetic.
#include "dtplan/planner/schedule.hpp"

#include <cmath>

#include "dtplan/model/error.hpp"

namespace dtplan::planner {

void check_schedule_request(const ScheduleRequest& r) {
  if (r.steps > 0 && r.dataset_size > 0) {
    throw FieldError("steps", "give the number of steps or the {dataset_size}, not both");
  }
  if (r.dataset_size < 0 || r.steps < 0)
    throw FieldError(r.steps < 0 ? "steps" : "dataset_size", "must be positive");
  if (r.dataset_size > 0 && !(r.epochs > 0)) {
    throw FieldError("epochs", "a positive number is needed with {dataset_size}");
  }
  if (r.dataset_size == 0 && r.epochs != 0) throw FieldError("epochs", "needs {dataset_size}");
  if (r.dataset_size > 1'000'000'000'000'000 || r.epochs > 1e6 || r.steps > 1'000'000'000'000) {
    throw FieldError(r.steps > 1'000'000'000'000 ? "steps"
                     : r.epochs > 1e6            ? "epochs"
                                                 : "dataset_size",
                     "beyond the supported range (1e15 samples, 1e6 epochs, 1e12 steps)");
  }
  if (!(r.warmup_ratio >= 0.0 && r.warmup_ratio < 1.0)) {
    throw FieldError("warmup_ratio", "a fraction in [0, 1)");
  }
  if (r.base_lr && !(*r.base_lr > 0)) throw FieldError("base_lr", "must be positive");
  if (r.base_lr && r.base_global_batch < 1)
    throw FieldError("base_global_batch", "needed with {base_lr}");
  if (!r.base_lr && r.base_global_batch != 0)
    throw FieldError("base_lr", "needed with {base_global_batch}");
}

Schedule make_schedule(const ScheduleRequest& r, std::int64_t global_batch, std::int64_t grad_accum,
                       double step_time_s) {
  check_schedule_request(r);
  Schedule s;
  if (r.steps > 0) {
    s.optimizer_steps = r.steps;
  } else if (r.dataset_size > 0) {
    const double samples = static_cast<double>(r.dataset_size) * r.epochs;
    s.optimizer_steps =
        static_cast<std::int64_t>(std::ceil(samples / static_cast<double>(global_batch)));
  }
  s.samples = s.optimizer_steps * global_batch;
  s.epochs = r.dataset_size > 0
                 ? static_cast<double>(s.samples) / static_cast<double>(r.dataset_size)
                 : 0.0;
  s.micro_steps = s.optimizer_steps * grad_accum;
  s.scheduler_steps = s.optimizer_steps;
  s.warmup_ratio = r.warmup_ratio;
  s.warmup_steps =
      static_cast<std::int64_t>(std::ceil(r.warmup_ratio * static_cast<double>(s.optimizer_steps)));
  s.time_s = step_time_s * static_cast<double>(s.optimizer_steps);
  if (r.base_lr) {
    s.scaled_lr =
        *r.base_lr * static_cast<double>(global_batch) / static_cast<double>(r.base_global_batch);
  }
  return s;
}

}  // namespace dtplan::planner
