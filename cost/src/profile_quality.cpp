// Judging a profile's noise (see profile_quality.hpp).
#include "dtplan/cost/profile_quality.hpp"

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

namespace dtplan::cost {
namespace {

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v * 100);
  return buf;
}

std::string num(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

double coefficient_of_variation(const std::vector<double>& times_s) {
  if (times_s.size() < 2) return 0;
  const double n = static_cast<double>(times_s.size());
  const double mean = std::accumulate(times_s.begin(), times_s.end(), 0.0) / n;
  if (!(mean > 0)) return 0;
  double sq = 0;
  for (double t : times_s)
    sq += (t - mean) * (t - mean);
  return std::sqrt(sq / n) / mean;
}

ProfileQuality judge_quality(ProfileQuality q, const HardwareProfile& p,
                             const QualityLimits& limits) {
  auto& why = q.reasons;
  why.clear();
  if (q.benchmarks > 0 && q.median_spread > limits.max_median_spread) {
    why.push_back("repeated calls of one microbenchmark differ by " + pct(q.median_spread) +
                  " (median coefficient of variation over " + std::to_string(q.benchmarks) +
                  " benchmarks; limit " + pct(limits.max_median_spread) + ")");
  }
  if (q.cores > 0 && q.load_before / q.cores > limits.max_load_per_core) {
    why.push_back("the machine was busy: load average " + num("%.2f", q.load_before) + " on " +
                  std::to_string(q.cores) + " cores before measuring (limit " +
                  num("%.2f", limits.max_load_per_core) + " per core)");
  }
  if (p.gemm_rms_relative_error > limits.max_gemm_fit_error) {
    why.push_back("the GEMM fit error is " + pct(p.gemm_rms_relative_error) + " rms (limit " +
                  pct(limits.max_gemm_fit_error) + ")");
  }
  for (const auto& c : p.collectives) {
    if (c.rms_relative_error > limits.max_collective_fit_error) {
      why.push_back("the " + c.kind + " fit over " + std::to_string(c.ranks) + " ranks errs by " +
                    pct(c.rms_relative_error) + " rms (limit " +
                    pct(limits.max_collective_fit_error) + ")");
    }
  }
  const auto& k = p.correction;
  if (k.samples > 0) {
    const std::pair<const char*, double> scales[] = {{"compute", k.compute_scale},
                                                     {"collective", k.collective_scale},
                                                     {"optimizer", k.optimizer_scale}};
    for (const auto& [name, scale] : scales) {
      if (scale > limits.max_correction || scale * limits.max_correction < 1) {
        why.push_back(std::string("the ") + name + " step correction is x" + num("%.2f", scale) +
                      " (limit x" + num("%.0f", limits.max_correction) + " either way)");
      }
    }
  }
  q.noisy = !why.empty();
  return q;
}

}  // namespace dtplan::cost
