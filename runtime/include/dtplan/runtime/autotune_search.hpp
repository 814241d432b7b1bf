// Model-based autotuning: the planner's candidates, tried through the runtime in the order the
// calibrated cost model ranks them; after every trial the step correction is refitted on all
// measured steps and the untried candidates re-predicted. The search stops when no untried
// candidate's prediction, made optimistic by the model's own error band (the most a trial ran
// faster than predicted before it, at least the calibration fit's rms error and 2%), beats
// the measured best -- or at --max-trials or the --time-budget (both counted over the whole
// results file, resumed trials included). The trial runner is a parameter, so the search
// is tested with synthetic runners.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/calibration.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/runtime/trials.hpp"

namespace dtplan::runtime {

struct TuneCandidate {
  std::string key;  // what the runtime executes: "zero2 mb 8 x 1 sync"
  RuntimeConfig config;
  cost::RuntimeRun run;  // as the runtime will execute it
};

struct TrialRecord {
  std::string key;
  std::string label;
  double predicted_s = 0;  // before the trial, with the correction fitted so far
  std::optional<double> measured_s;
  std::string failure;  // when the run failed
  cost::StepSample sample;
  double wall_s = 0;
  double samples_per_s = 0;
  std::int64_t peak_bytes = 0;
  std::string measurement;  // its file
  double error() const { return measured_s ? (predicted_s - *measured_s) / *measured_s : 0; }
};

struct TuneSettings {
  std::int64_t max_trials = 0;  // 0: no limit
  double time_budget_s = 0;     // 0: none
  bool exhaustive = false;      // try every candidate (no early stop)
  double runs_per_trial = 4;    // warm-up + measured steps, for time estimates
  double min_band = 0.02;       // the band never goes below this
};

struct TuneProgress {
  std::size_t done = 0, total = 0;
  std::string now;  // what runs next
  double eta_s = -1;
  std::optional<double> best_s;
};

struct TuneOutcome {
  std::vector<TrialRecord> trials;  // in the order run (resumed ones first)
  std::string stop_reason;
  double band = 0;
  // Untried candidates and their final predictions, fastest first.
  std::vector<std::pair<std::size_t, double>> untried;
  cost::StepCorrection correction;
};

using TrialRunner = std::function<TrialRecord(const TuneCandidate&, double predicted_s)>;
using TuneProgressFn = std::function<void(const TuneProgress&)>;
using TrialDoneFn = std::function<void(const TrialRecord&)>;

// `profile` carries the calibration's step samples (they join every refit). `previous`: trials
// read back from a results file (--resume); measured ones are not run again, failed ones are.
TuneOutcome tune(const std::vector<TuneCandidate>& candidates, cost::HardwareProfile profile,
                 const std::vector<TrialRecord>& previous, const TuneSettings& settings,
                 const TrialRunner& run, const TrialDoneFn& done, const TuneProgressFn& progress);

// The best measured trial, if any succeeded.
const TrialRecord* best_trial(const std::vector<TrialRecord>& trials);

}  // namespace dtplan::runtime
