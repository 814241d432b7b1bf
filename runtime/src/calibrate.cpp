// Calibration workflow (see calibrate.hpp).
#include "dtplan/runtime/calibrate.hpp"

#include <cmath>
#include <cstdio>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/launcher.hpp"
#include "dtplan/runtime/trial_sets.hpp"

namespace dtplan::runtime {
namespace {

cost::HardwareProfile measure(const CalibrateRequest& r, const std::filesystem::path& raw,
                              const ProgressFn& progress, int total) {
  std::vector<std::string> args{"--measure-profile", "--backend", r.backend, "--out", raw.string()};
  if (r.quick) args.push_back("--quick");
  if (!r.data_dir.empty()) args.insert(args.end(), {"--data-dir", r.data_dir});
  const auto result = run_child(mpirun_argv(r.np, args), [&](const std::string& line) {
    const auto [i, n] = progress_of(line);
    const auto what = line.find("measuring");
    if (n > 0)
      progress(
          {double(i - 1), double(total), what == std::string::npos ? line : line.substr(what), -1});
  });
  if (result.exit_code != 0 || !std::filesystem::exists(raw)) {
    std::string tail;
    for (const auto& l : result.tail)
      tail += "\n  " + l;
    throw Error("calibration: the microbenchmarks failed (exit " +
                std::to_string(result.exit_code) + "); dtplan-run's last lines:" + tail);
  }
  return cost::load_profile(raw);
}

void fit_steps(const CalibrateRequest& r, const std::filesystem::path& work,
               cost::HardwareProfile& p, const ProgressFn& progress, int done, int total) {
  TrialSettings s;
  s.np = r.np;
  s.backend = r.backend;
  s.work_dir = work;
  s.data_dir = r.data_dir;
  const auto set = calibration_set(r.backend);
  double spent = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    const double eta = i == 0 ? -1 : spent / double(i) * double(set.size() - i);
    progress({double(done) + double(i), double(total), "calibration step: " + set[i].label(), eta});
    const auto m = run_trial(set[i], "calibrate-" + std::to_string(i), s, [](const auto&) {});
    spent += m.median().time_s * double(s.steps + s.warmup) + 0.5;
    p.step_samples.push_back(step_sample_of(set[i].label(), m, p));
  }
  p.correction = cost::fit_step_correction(p.step_samples);
}

std::vector<std::string> judge(const CalibrateRequest& r, cost::HardwareProfile& p) {
  cost::QualityLimits limits;
  limits.max_median_spread = r.max_spread;
  p.quality = cost::judge_quality(p.quality.value_or(cost::ProfileQuality{}), p, limits);
  return p.quality->reasons;
}

std::string fmt(const char* f, double v) {
  // Profiles are range-checked when read; a non-finite number here is a formula's bug.
  if (!std::isfinite(v)) throw Error("calibration: a non-finite figure in the profile summary");
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

void check_request(const CalibrateRequest& r) {
  if (r.backend != "cpu" && r.backend != "cuda") {
    throw FieldError("backend", r.backend + ": expected cpu or cuda");
  }
  if (r.np < 1 || r.np > 4096) throw FieldError("np", std::to_string(r.np) + ": 1 to 4096 ranks");
  if (!(r.max_spread >= 0 && std::isfinite(r.max_spread))) {
    throw FieldError("max_spread", "a fraction, 0 or more (0.1 is 10%)");
  }
}

int calibration_stages(const CalibrateRequest& r) {
  int micro_stages = 3;  // GEMMs, rates, and the full communicator
  for (std::int64_t g = 2; g < r.np; g *= 2)
    ++micro_stages;
  return micro_stages + (r.no_steps ? 0 : int(calibration_set(r.backend).size()));
}

Calibration calibrate(const CalibrateRequest& r, const ProgressFn& progress) {
  check_request(r);
  Calibration out;
  out.work_dir = work_dir_of(r.work_dir, "calibrate");
  const int total = calibration_stages(r);
  const int micro_stages = total - (r.no_steps ? 0 : int(calibration_set(r.backend).size()));
  out.profile = measure(r, out.work_dir / "microbenchmarks.json", progress, total);
  if (!r.no_steps) fit_steps(r, out.work_dir, out.profile, progress, micro_stages, total);
  progress({double(total), double(total), "done", 0});
  out.warnings = judge(r, out.profile);
  if (out.profile.quality->noisy) {
    out.warnings.push_back(
        "the profile is marked noisy (its \"quality\" section); calibrate again when the machine "
        "is quiet");
  }
  return out;
}

std::string profile_summary(const cost::HardwareProfile& p) {
  std::string s =
      "created " + p.created + ", GEMM fit error " + fmt("%.1f%%", p.gemm_rms_relative_error * 100);
  if (p.attention) {
    s += ", attention fit error " + fmt("%.1f%%", p.attention->rms_relative_error * 100);
  }
  const auto& k = p.correction;
  if (k.samples > 0) {
    s += ", step correction x" + fmt("%.2f", k.compute_scale) + " compute, x" +
         fmt("%.2f", k.collective_scale) + " collectives, x" + fmt("%.2f", k.optimizer_scale) +
         " optimizer";
  }
  if (p.quality) s += ", repeat spread " + fmt("%.1f%%", p.quality->median_spread * 100);
  return s;
}

void check_replaceable(const std::filesystem::path& path, const cost::HardwareProfile& fresh,
                       const std::filesystem::path& work_dir) {
  if (!fresh.quality || !fresh.quality->noisy || !std::filesystem::exists(path)) return;
  cost::HardwareProfile old;
  try {
    old = cost::load_profile(path);
  } catch (const Error&) {
    return;
  }
  if (old.quality && old.quality->noisy) return;
  std::string why;
  for (const auto& reason : fresh.quality->reasons)
    why += (why.empty() ? "" : "; ") + reason;
  throw FieldError("out", path.string() + ": not replaced: it holds a profile not marked noisy (" +
                              profile_summary(old) + "), and this calibration is noisy (" + why +
                              "). Pass {force} to replace it, or write to another {out}; this "
                              "run's measurements are in " +
                              work_dir.string());
}

}  // namespace dtplan::runtime
