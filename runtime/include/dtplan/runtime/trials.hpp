// Trials: one configuration run through dtplan-run under mpirun, read back as a measurement,
// and set against the cost model's prediction from a hardware profile. Shared by dtplan
// calibrate (calibration steps), dtplan accuracy (held-out configurations) and dtplan autotune.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "dtplan/cost/calibration.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/runtime/measurement.hpp"

namespace dtplan::runtime {

// One executable configuration: a model preset at a scale, strategy, batch shape.
struct RuntimeConfig {
  std::string model;  // preset name or path
  double scale = 1;
  std::int64_t seq_len = 0;
  Strategy strategy = Strategy::ddp;
  Optimizer optimizer = Optimizer::adamw;
  Precision precision = Precision::bf16;
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  bool no_sync = true;
  Checkpointing checkpointing = Checkpointing::none;  // selective: the attention core
  std::string label() const;  // "gpt2@0.05 ddp mb 4 x 2 no_sync", "..., full recompute"
};

struct TrialSettings {
  std::int64_t np = 2;
  std::string backend = "cpu";
  std::int64_t steps = 3;
  std::int64_t warmup = 1;
  std::filesystem::path work_dir;  // plans and measurements are written here
  std::string data_dir;
  double timeout_s = 300;
};

// The Plan dtplan-run executes for `c` on `np` ranks (model parameters resolved from presets).
Plan plan_of(const RuntimeConfig& c, std::int64_t np, const std::string& data_dir);

// What the runtime will execute for `c`, for predictions before running it.
cost::RuntimeRun runtime_run_of(const RuntimeConfig& c, const TrialSettings& s);

using LineFn = std::function<void(const std::string&)>;

// Where a long workflow (calibrate, accuracy, autotune) stands: `done` of `total` steps, what
// runs now, and the estimated seconds left (< 0: unknown). Front ends draw it (a terminal bar,
// a progress dialog); a callback may throw Interrupted to stop between steps.
struct WorkProgress {
  double done = 0;
  double total = 0;
  std::string what;
  double eta_s = -1;
};
using ProgressFn = std::function<void(const WorkProgress&)>;

// Writes the plan to work_dir/NAME.plan.json, runs dtplan-run, reads work_dir/NAME.json.
// Throws dtplan::Error with the configuration and dtplan-run's last lines when it fails.
runtime::Measurement run_trial(const RuntimeConfig& c, const std::string& name,
                               const TrialSettings& s, const LineFn& on_line);

// A measurement's median step against the profile's uncorrected prediction.
cost::StepSample step_sample_of(const std::string& label, const runtime::Measurement& m,
                                const cost::HardwareProfile& p);

// The hardware profile at `path`; errors are FieldErrors naming the field "profile".
cost::HardwareProfile load_profile_field(const std::string& path);

// A work directory: `given` (created) or a fresh one under the system's temporary directory.
// Errors name the field "work_dir".
std::filesystem::path work_dir_of(const std::string& given, const char* purpose);

}  // namespace dtplan::runtime
