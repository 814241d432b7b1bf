// Least-squares fits of a hardware profile's constants (see calibration.hpp).
#include "dtplan/cost/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {
namespace {

// fit_relative over the columns in `keep`; columns whose coefficient comes out negative (noise
// on a term too small to measure) are dropped and the rest refitted. Dropped ones are 0.
std::vector<double> fit_non_negative(const std::vector<std::vector<double>>& x,
                                     const std::vector<double>& y, double& rms) {
  const std::size_t cols = x.front().size();
  std::vector<bool> keep(cols, true);
  for (;;) {
    if (std::find(keep.begin(), keep.end(), true) == keep.end()) {
      rms = 1;
      return std::vector<double>(cols, 0.0);
    }
    std::vector<std::vector<double>> sub;
    for (const auto& row : x) {
      std::vector<double> r;
      for (std::size_t c = 0; c < cols; ++c) {
        if (keep[c]) r.push_back(row[c]);
      }
      sub.push_back(r);
    }
    const auto fit = fit_relative(sub, y);
    std::vector<double> out(cols, 0.0);
    std::size_t i = 0, worst = cols;
    for (std::size_t c = 0; c < cols; ++c) {
      if (!keep[c]) continue;
      out[c] = fit.coefficients[i++];
      if (out[c] < 0 && (worst == cols || out[c] < out[worst])) worst = c;
    }
    if (worst == cols) {
      rms = fit.rms_relative_error;
      return out;
    }
    keep[worst] = false;
  }
}

double step_total(const StepSample& s, const StepCorrection& k) {
  return k.compute_scale * s.compute_s +
         k.collective_scale * (s.collectives_s + s.optimizer_collectives_s) +
         k.optimizer_scale * s.optimizer_s;
}

}  // namespace

AttentionFit fit_attention(const std::vector<AttentionSample>& samples) {
  if (samples.size() < 3) throw Error("attention fit: needs at least 3 timed shapes");
  std::vector<std::vector<double>> x;
  std::vector<double> forward, backward;
  for (const auto& s : samples) {
    if (!(s.forward_s > 0) || !(s.backward_s > 0)) {
      throw Error("attention fit: a non-positive time at seq " + std::to_string(s.seq) +
                  ", head_dim " + std::to_string(s.head_dim));
    }
    const double squares = static_cast<double>(s.seq) * static_cast<double>(s.seq);
    x.push_back({1, squares, squares * static_cast<double>(s.head_dim)});
    forward.push_back(s.forward_s);
    backward.push_back(s.backward_s);
  }
  AttentionFit f;
  double rms_forward = 0, rms_backward = 0;
  f.forward = fit_non_negative(x, forward, rms_forward);
  f.backward = fit_non_negative(x, backward, rms_backward);
  f.rms_relative_error = std::max(rms_forward, rms_backward);
  f.samples = samples;
  return f;
}

void fit_gemm(const std::vector<GemmSample>& samples, HardwareProfile& p) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& s : samples) {
    const double m = static_cast<double>(s.m), n = static_cast<double>(s.n),
                 k = static_cast<double>(s.k);
    x.push_back({2 * m * n * k, 4 * (m * k + k * n + m * n), 1});
    y.push_back(s.time_s);
  }
  if (x.size() < 3) throw Error("GEMM fit: needs at least 3 timed shapes");
  const auto c = fit_non_negative(x, y, p.gemm_rms_relative_error);
  if (!(c[0] > 0)) throw Error("GEMM fit: time does not grow with FLOPs; the timings are noise");
  p.gemm_s_per_flop = c[0];
  p.gemm_s_per_byte = c[1];
  p.gemm_s_per_call = c[2];
  p.gemm_samples = samples;
  // Keep the interpolated residual when it predicts each timed shape from the other shapes
  // (every form of that shape left out) better than the 3-term fit does (3 parameters over dozens
  // of shapes: its own error is close to its leave-one-out error).
  double fit_sq = 0, interp_sq = 0;
  for (const auto& s : samples) {
    const double linear = p.gemm_linear_s(s.m, s.n, s.k);
    const double interp = linear * p.gemm_ratio(s.m, s.n, s.k, true);
    fit_sq += std::pow(linear / s.time_s - 1, 2);
    interp_sq += std::pow(interp / s.time_s - 1, 2);
  }
  p.gemm_interpolate = interp_sq < fit_sq;
  p.gemm_loo_relative_error =
      std::sqrt(std::min(fit_sq, interp_sq) / static_cast<double>(samples.size()));
}

std::vector<CollectiveConstants> fit_collectives(const std::vector<CollectiveSample>& samples) {
  std::map<std::pair<std::string, std::int64_t>, std::vector<const CollectiveSample*>> groups;
  for (const auto& s : samples)
    groups[{s.kind, s.ranks}].push_back(&s);
  std::vector<CollectiveConstants> out;
  for (const auto& [key, group] : groups) {
    if (group.size() < 2) {
      throw Error("collective fit: " + key.first + " over " + std::to_string(key.second) +
                  " ranks needs at least two message sizes");
    }
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    for (const auto* s : group) {
      x.push_back({1, static_cast<double>(s->bytes)});
      y.push_back(s->time_s);
    }
    CollectiveConstants c{key.first, key.second};
    const auto coef = fit_non_negative(x, y, c.rms_relative_error);
    c.latency_s = coef[0];
    c.s_per_byte = coef[1];
    out.push_back(c);
  }
  return out;
}

RateCurve rate_curve(std::vector<std::pair<double, double>> size_and_time, const char* what) {
  if (size_and_time.empty()) throw Error(std::string("rate curve ") + what + ": no samples");
  std::sort(size_and_time.begin(), size_and_time.end());
  RateCurve c;
  for (const auto& [size, time] : size_and_time) {
    if (!(size > 0) || !(time > 0)) {
      throw Error(std::string("rate curve ") + what + ": sizes and times must be positive");
    }
    const double rate = time / size;
    if (!c.points.empty() && c.points.back().size == size) {
      c.points.back().s_per_unit = std::min(c.points.back().s_per_unit, rate);
    } else {
      c.points.push_back({size, rate});
    }
  }
  return c;
}

StepSample step_sample(const std::string& label, const StepParts& predicted,
                       double measured_forward_backward_s, double measured_sync_optimizer_s) {
  return {label,
          predicted.compute_s,
          predicted.collectives_s,
          predicted.optimizer_s,
          predicted.optimizer_collectives_s,
          measured_forward_backward_s,
          measured_sync_optimizer_s};
}

StepCorrection fit_step_correction(const std::vector<StepSample>& samples) {
  if (samples.empty()) throw Error("step correction: no measured steps to fit");
  // Rows: forward+backward = a compute + b collectives; sync+optimizer = c optimizer + b coll.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& s : samples) {
    x.push_back({s.compute_s, s.collectives_s, 0});
    y.push_back(s.measured_compute_s);
    if (s.measured_optimizer_s > 0) {
      x.push_back({0, s.optimizer_collectives_s, s.optimizer_s});
      y.push_back(s.measured_optimizer_s);
    }
  }
  // A part under 2% of every measurement it appears in cannot be fitted: its scale stays 1
  // and its predicted time is taken off the measurement.
  std::vector<double> scale{1, 1, 1};
  std::vector<std::size_t> free;
  for (std::size_t c = 0; c < 3; ++c) {
    double most = 0;
    for (std::size_t r = 0; r < x.size(); ++r)
      most = std::max(most, x[r][c] / y[r]);
    if (most >= 0.02) free.push_back(c);
  }
  std::vector<std::vector<double>> xs;
  std::vector<double> ys;
  for (std::size_t r = 0; r < x.size(); ++r) {
    double fixed = 0;
    std::vector<double> row;
    for (std::size_t c = 0; c < 3; ++c) {
      if (std::find(free.begin(), free.end(), c) == free.end()) {
        fixed += x[r][c];
      } else {
        row.push_back(x[r][c]);
      }
    }
    if (y[r] - fixed <= 0 || row.empty()) continue;
    xs.push_back(row);
    ys.push_back(y[r] - fixed);
  }
  if (!free.empty() && xs.size() >= free.size()) {
    double rms = 0;
    const auto coef = fit_non_negative(xs, ys, rms);
    // A part the fit drops (it came out <= 0: hidden behind another, as DDP's buckets are
    // behind backward) costs nothing in a step; the floor keeps the scale positive.
    const bool fitted = std::any_of(coef.begin(), coef.end(), [](double c) { return c > 0; });
    for (std::size_t i = 0; i < free.size() && fitted; ++i)
      scale[free[i]] = std::max(coef[i], 1e-3);
  }
  StepCorrection k{scale[0], scale[1], scale[2], static_cast<std::int64_t>(samples.size()), 0};
  double sq = 0;
  for (const auto& s : samples) {
    const double measured = s.measured_compute_s + s.measured_optimizer_s;
    sq += std::pow((step_total(s, k) - measured) / measured, 2);
  }
  k.rms_relative_error = std::sqrt(sq / static_cast<double>(samples.size()));
  return k;
}

}  // namespace dtplan::cost
