// `dtplan calibrate`: learn this machine. Microbenchmarks through the runtime (mpirun -np N
// dtplan-run --measure-profile: GEMMs by shape, element-wise and activation rates by size,
// collectives by size for every communicator size), least-squares fits of the profile's
// constants, then a few whole training steps (trial_sets.hpp) to fit the step correction.
// Writes the profile that --profile reads everywhere.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "dtplan/cost/calibration.hpp"
#include "dtplan/cost/profile_quality.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "format.hpp"
#include "interrupt.hpp"
#include "launcher.hpp"
#include "progress.hpp"
#include "runtime_trials.hpp"
#include "table.hpp"
#include "trial_sets.hpp"

namespace dtplan::cli {
namespace {

struct CalibrateOptions {
  std::string backend = "cpu";
  std::int64_t np = 2;
  std::string out;
  bool quick = false;
  bool no_steps = false;
  std::string work_dir;
  std::string data_dir;
  bool force = false;  // replace a good profile with a noisy one
  double max_spread = cost::QualityLimits{}.max_median_spread;
};

void check(const CalibrateOptions& o) {
  if (o.backend != "cpu" && o.backend != "cuda") {
    throw Error("--backend " + o.backend + ": expected cpu or cuda");
  }
  if (o.np < 1 || o.np > 4096) throw Error("--np " + std::to_string(o.np) + ": 1 to 4096 ranks");
  // The profile is written after minutes of measuring: a path that cannot take it is
  // refused before measuring starts.
  check_output_path(o.out, "--out");
  if (!(o.max_spread >= 0 && std::isfinite(o.max_spread))) {
    throw Error("--max-spread: a fraction, 0 or more (0.1 is 10%)");
  }
}

cost::HardwareProfile measure(const CalibrateOptions& o, const std::filesystem::path& raw,
                              ProgressBar& bar, int total) {
  std::vector<std::string> args{"--measure-profile", "--backend", o.backend, "--out", raw.string()};
  if (o.quick) args.push_back("--quick");
  if (!o.data_dir.empty()) args.insert(args.end(), {"--data-dir", o.data_dir});
  const auto result = run_child(mpirun_argv(o.np, args), [&](const std::string& line) {
    const auto [i, n] = progress_of(line);
    const auto what = line.find("measuring");
    if (n > 0) bar.update(i - 1, total, what == std::string::npos ? line : line.substr(what), -1);
  });
  if (result.exit_code != 0 || !std::filesystem::exists(raw)) {
    std::string tail;
    for (const auto& l : result.tail)
      tail += "\n  " + l;
    throw Error("dtplan calibrate: the microbenchmarks failed (exit " +
                std::to_string(result.exit_code) + "); dtplan-run's last lines:" + tail);
  }
  return cost::load_profile(raw);
}

void fit_steps(const CalibrateOptions& o, const std::filesystem::path& work,
               cost::HardwareProfile& p, ProgressBar& bar, int done, int total) {
  TrialSettings s;
  s.np = o.np;
  s.backend = o.backend;
  s.work_dir = work;
  s.data_dir = o.data_dir;
  const auto set = calibration_set(o.backend);
  double spent = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    const double eta = i == 0 ? -1 : spent / double(i) * double(set.size() - i);
    bar.update(done + static_cast<int>(i), total, "calibration step: " + set[i].label(), eta);
    const auto m = run_trial(set[i], "calibrate-" + std::to_string(i), s, [](const auto&) {});
    spent += m.median().time_s * double(s.steps + s.warmup) + 0.5;
    p.step_samples.push_back(step_sample_of(set[i].label(), m, p));
  }
  p.correction = cost::fit_step_correction(p.step_samples);
}

void write_profile(const std::string& path, const cost::HardwareProfile& p) {
  write_file_atomically(path, cost::to_json(p).dump(2) + "\n", "--out");
}

std::string fmt(const char* f, double v) {
  // Profiles are range-checked when read; a non-finite number here is a formula's bug.
  if (!std::isfinite(v)) throw NonFiniteInReport(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Judges the profile's noise (cost/profile_quality.hpp) and warns about each reason.
void judge(const CalibrateOptions& o, cost::HardwareProfile& p, std::ostream& err) {
  cost::QualityLimits limits;
  limits.max_median_spread = o.max_spread;
  p.quality = cost::judge_quality(p.quality.value_or(cost::ProfileQuality{}), p, limits);
  for (const auto& reason : p.quality->reasons)
    err << "dtplan calibrate: warning: " << reason << "\n";
  if (p.quality->noisy) {
    err << "dtplan calibrate: warning: the profile is marked noisy (\"quality\" in " << o.out
        << "); calibrate again when the machine is quiet\n";
  }
}

std::string numbers_of(const cost::HardwareProfile& p) {
  std::string s =
      "created " + p.created + ", GEMM fit error " + fmt("%.1f%%", p.gemm_rms_relative_error * 100);
  const auto& k = p.correction;
  if (k.samples > 0) {
    s += ", step correction x" + fmt("%.2f", k.compute_scale) + " compute, x" +
         fmt("%.2f", k.collective_scale) + " collectives, x" + fmt("%.2f", k.optimizer_scale) +
         " optimizer";
  }
  if (p.quality) s += ", repeat spread " + fmt("%.1f%%", p.quality->median_spread * 100);
  return s;
}

// A noisy profile does not replace one that is not marked noisy (an older profile without
// a quality section counts as good) unless --force; a file that is no profile is replaced.
void refuse_noisy_overwrite(const CalibrateOptions& o, const cost::HardwareProfile& p,
                            const std::filesystem::path& work) {
  if (o.force || !p.quality || !p.quality->noisy || !std::filesystem::exists(o.out)) return;
  cost::HardwareProfile old;
  try {
    old = cost::load_profile(o.out);
  } catch (const Error&) {
    return;
  }
  if (old.quality && old.quality->noisy) return;
  std::string why;
  for (const auto& r : p.quality->reasons)
    why += (why.empty() ? "" : "; ") + r;
  throw Error("--out " + o.out + ": not replaced: it holds a profile not marked noisy (" +
              numbers_of(old) + "), and this calibration is noisy (" + why +
              "). Pass --force to replace it, or write to another --out; this run's "
              "measurements are in " +
              work.string());
}

void print_summary(std::ostream& out, const cost::HardwareProfile& p) {
  out << "dtplan calibrate: " << p.hardware << "\n";
  for (const auto& [k, v] : p.versions)
    out << "  " << k << ": " << v << "\n";
  out << "\nGEMM (" << p.gemm_dtype << ", " << p.gemm_samples.size()
      << " timed shapes): " << fmt("%.1f", 1e-9 / p.gemm_s_per_flop) << " GFLOP/s, "
      << fmt("%.1f", p.gemm_s_per_byte > 0 ? 1e-9 / p.gemm_s_per_byte : 0.0)
      << " GB/s operand traffic, " << fmt("%.2f", p.gemm_s_per_call * 1e6)
      << " us per call; fit error " << fmt("%.1f%%", p.gemm_rms_relative_error * 100) << " rms\n";
  out << "element-wise bandwidth by bytes per call:";
  for (const auto& pt : p.elementwise_s_per_byte.points)
    out << "  " << fmt("%.0f KiB", pt.size / 1024) << " " << fmt("%.1f GB/s", 1e-9 / pt.s_per_unit);
  out << "\n\n";
  TextTable t({"collective", "ranks", "latency", "bandwidth", "fit error"});
  for (const auto& c : p.collectives) {
    t.add_row({c.kind, std::to_string(c.ranks), fmt("%.1f us", c.latency_s * 1e6),
               c.s_per_byte > 0 ? fmt("%.2f GB/s", 1e-9 / c.s_per_byte) : "-",
               fmt("%.1f%%", c.rms_relative_error * 100)});
  }
  t.print(out);
  const auto& k = p.correction;
  if (p.quality) {
    const auto& q = *p.quality;
    out << "\nnoise: repeats vary " << fmt("%.1f%%", q.median_spread * 100) << " (median of "
        << q.benchmarks << " benchmarks, worst " << fmt("%.1f%%", q.max_spread * 100)
        << "); load average " << fmt("%.2f", q.load_before) << " before, "
        << fmt("%.2f", q.load_after) << " after, on " << q.cores << " cores"
        << (q.noisy ? " -- NOISY" : "") << "\n";
  }
  if (k.samples > 0) {
    out << "\nstep correction from " << k.samples << " training steps: compute x"
        << fmt("%.3f", k.compute_scale) << ", collectives x" << fmt("%.3f", k.collective_scale)
        << ", optimizer x" << fmt("%.3f", k.optimizer_scale) << "; fitted step error "
        << fmt("%.1f%%", k.rms_relative_error * 100) << " rms\n";
  }
}

int run_calibrate(const CalibrateOptions& o, const RunContext& ctx) {
  check(o);
  const InterruptScope interrupts;  // Ctrl-C stops the runs: no profile is written
  const auto work = work_dir_of(o.work_dir, "calibrate");
  // GEMMs, rates, then one stage per communicator size (2, 4, ... below np, and np).
  int micro_stages = 3;
  for (std::int64_t g = 2; g < o.np; g *= 2)
    ++micro_stages;
  const int total = micro_stages + (o.no_steps ? 0 : int(calibration_set(o.backend).size()));
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  auto p = measure(o, work / "microbenchmarks.json", bar, total);
  if (!o.no_steps) fit_steps(o, work, p, bar, micro_stages, total);
  bar.update(total, total, "done", 0);
  bar.finish();
  judge(o, p, ctx.err);
  refuse_noisy_overwrite(o, p, work);
  write_profile(o.out, p);
  print_summary(ctx.out, p);
  ctx.out << "\nwrote " << o.out << " (use it with --profile " << o.out << "); runs are in "
          << work.string() << "\n";
  return 0;
}

}  // namespace

Command register_calibrate_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "calibrate", "Measure this machine through the runtime and fit a hardware profile");
  auto o = std::make_shared<CalibrateOptions>();
  sub->add_option("--backend", o->backend, "cpu (MPI, Eigen) or cuda (NCCL, cuBLAS)")
      ->capture_default_str();
  sub->add_option("--np", o->np, "ranks (one per device)")->capture_default_str();
  sub->add_option("--out", o->out, "profile JSON to write")->required();
  sub->add_flag("--quick", o->quick, "fewer shapes and sizes (seconds; for tests)");
  sub->add_flag("--no-steps", o->no_steps, "microbenchmarks only: no step correction");
  sub->add_option("--work-dir", o->work_dir, "keep the runs here (default: a temporary folder)");
  sub->add_option("--data-dir", o->data_dir, "dtplan data directory");
  sub->add_flag("--force", o->force, "replace a good --out profile even with a noisy one");
  sub->add_option("--max-spread", o->max_spread,
                  "repeat spread (coefficient of variation, median over the microbenchmarks) "
                  "beyond which the profile is noisy")
      ->capture_default_str();
  return {"calibrate", [o](const RunContext& ctx) { return run_calibrate(*o, ctx); }};
}

}  // namespace dtplan::cli
