// Accuracy workflow (see accuracy.hpp).
#include "dtplan/runtime/accuracy.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/runtime/trial_sets.hpp"

namespace dtplan::runtime {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

TrialSettings settings_of(const AccuracyRequest& r, const cost::HardwareProfile& p) {
  TrialSettings s;
  s.np = r.np;
  s.backend = r.backend.empty() ? p.backend : r.backend;
  s.steps = r.steps;
  s.data_dir = r.data_dir;
  if (s.backend != p.backend) {
    throw FieldError("backend", s.backend + ": the {profile} was measured on " + p.backend);
  }
  if (r.np < 1) throw FieldError("np", std::to_string(r.np) + ": must be >= 1");
  if (r.steps < 1) throw FieldError("steps", std::to_string(r.steps) + ": must be >= 1");
  if (r.limit < 0) throw FieldError("limit", std::to_string(r.limit) + ": 0 (all) or more");
  return s;
}

}  // namespace

AccuracyReport measure_accuracy(const AccuracyRequest& r, const cost::HardwareProfile& p,
                                const ProgressFn& progress) {
  auto s = settings_of(r, p);
  s.work_dir = work_dir_of(r.work_dir, "accuracy");
  auto set = accuracy_set(s.backend);
  if (r.limit > 0 && r.limit < static_cast<std::int64_t>(set.size())) set.resize(r.limit);
  AccuracyReport out{s.backend, {}, 0, 0, s.work_dir};
  const auto n = double(set.size());
  double spent = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    const double eta = i == 0 ? -1 : spent / double(i) * double(set.size() - i);
    progress({double(i), n, set[i].label(), eta});
    const double predicted = cost::predict_runtime_step(runtime_run_of(set[i], s), p).step_s;
    const auto m = run_trial(set[i], "accuracy-" + std::to_string(i), s, [](const auto&) {});
    spent += m.median().time_s * double(s.steps + s.warmup) + 0.5;
    out.rows.push_back({set[i].label(), predicted, m.median().time_s});
  }
  progress({n, n, "done", 0});
  std::vector<double> errors;
  for (const auto& row : out.rows)
    errors.push_back(std::abs(row.error()));
  if (!errors.empty()) {
    out.median_abs_error = median(errors);
    out.max_abs_error = *std::max_element(errors.begin(), errors.end());
  }
  return out;
}

}  // namespace dtplan::runtime
