// The autotuning loop (see autotune_search.hpp).
#include "dtplan/runtime/autotune_search.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace dtplan::runtime {
namespace {

struct Search {
  const std::vector<TuneCandidate>& cands;
  cost::HardwareProfile profile;
  TuneSettings set;
  std::vector<TrialRecord> trials;
  std::set<std::string> tried;
  // Resumed trials that failed: run again, but their count and time stay spent.
  std::size_t failed_before = 0;
  double failed_before_s = 0;

  void refit() {
    auto samples = profile.step_samples;
    for (const auto& t : trials) {
      if (t.measured_s) samples.push_back(t.sample);
    }
    if (!samples.empty()) profile.correction = cost::fit_step_correction(samples);
  }

  // Untried candidates with their predictions now, fastest first.
  std::vector<std::pair<std::size_t, double>> ranked() const {
    std::vector<std::pair<std::size_t, double>> out;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (tried.count(cands[i].key)) continue;
      out.push_back({i, cost::predict_runtime_step(cands[i].run, profile).step_s});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
    return out;
  }

  // The model's own error, on the side that matters: how much faster than predicted a trial
  // ran (predictions made before each trial), at least the calibration fit's rms and the
  // floor. Slower-than-predicted trials do not widen it -- noise on a shared machine only
  // ever slows a run, and a slower candidate cannot beat the best.
  double band() const {
    double b = std::max(set.min_band, profile.correction.rms_relative_error);
    for (const auto& t : trials) {
      if (t.measured_s) b = std::max(b, (t.predicted_s - *t.measured_s) / t.predicted_s);
    }
    return b;
  }

  double spent_s() const {
    double s = failed_before_s;
    for (const auto& t : trials)
      s += t.wall_s;
    return s;
  }

  // Start-up and teardown of a trial beyond its steps, from the trials so far (1 s before).
  double overhead_s() const {
    double sum = 0;
    int n = 0;
    for (const auto& t : trials) {
      if (!t.measured_s) continue;
      sum += std::max(0.0, t.wall_s - set.runs_per_trial * *t.measured_s);
      ++n;
    }
    return n ? sum / n : 1.0;
  }
};

}  // namespace

const TrialRecord* best_trial(const std::vector<TrialRecord>& trials) {
  const TrialRecord* best = nullptr;
  for (const auto& t : trials) {
    if (t.measured_s && (!best || *t.measured_s < *best->measured_s)) best = &t;
  }
  return best;
}

TuneOutcome tune(const std::vector<TuneCandidate>& candidates, cost::HardwareProfile profile,
                 const std::vector<TrialRecord>& previous, const TuneSettings& settings,
                 const TrialRunner& run, const TrialDoneFn& done, const TuneProgressFn& progress) {
  // Resumed trials that failed run again.
  std::vector<TrialRecord> measured;
  std::size_t failed = 0;
  double failed_s = 0;
  for (const auto& t : previous) {
    if (t.measured_s) {
      measured.push_back(t);
    } else {
      ++failed;
      failed_s += t.wall_s;
    }
  }
  Search s{candidates, std::move(profile), settings, measured, {}, failed, failed_s};
  for (const auto& t : measured)
    s.tried.insert(t.key);
  s.refit();
  const std::size_t limit =
      settings.max_trials > 0
          ? std::min<std::size_t>(candidates.size(), static_cast<std::size_t>(settings.max_trials))
          : candidates.size();
  TuneOutcome out;
  for (;;) {
    const auto order = s.ranked();
    const auto* best = best_trial(s.trials);
    if (order.empty()) {
      out.stop_reason = "every candidate was tried";
      break;
    }
    if (s.trials.size() + s.failed_before >= limit) {
      out.stop_reason = "--max-trials " + std::to_string(settings.max_trials) + " reached";
      break;
    }
    const double band = s.band();
    if (!settings.exhaustive && best && order.front().second * (1 - band) >= *best->measured_s) {
      out.stop_reason = "no untried candidate can beat the measured best by the model's error band";
      break;
    }
    const auto& next = candidates[order.front().first];
    const double est = settings.runs_per_trial * order.front().second + s.overhead_s();
    if (settings.time_budget_s > 0 && s.spent_s() + est > settings.time_budget_s) {
      out.stop_reason = "--time-budget: the next trial would not finish in time";
      break;
    }
    double eta = 0;
    for (std::size_t i = 0; i < order.size() && s.trials.size() + s.failed_before + i < limit; ++i)
      eta += settings.runs_per_trial * order[i].second + s.overhead_s();
    progress({s.trials.size(), limit, next.key, eta,
              best ? std::optional<double>(*best->measured_s) : std::nullopt});
    auto record = run(next, order.front().second);
    record.key = next.key;
    record.predicted_s = order.front().second;
    s.trials.push_back(record);
    s.tried.insert(next.key);
    done(s.trials.back());
    s.refit();
  }
  out.band = s.band();
  out.untried = s.ranked();
  out.correction = s.profile.correction;
  out.trials = std::move(s.trials);
  return out;
}

}  // namespace dtplan::runtime
