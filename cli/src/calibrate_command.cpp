// `dtplan calibrate`: learn this machine (runtime/calibrate.hpp does the work) and write the
// profile that --profile reads everywhere.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/runtime/calibrate.hpp"
#include "dtplan/runtime/interrupt.hpp"
#include "format.hpp"
#include "progress.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

struct CalibrateOptions {
  runtime::CalibrateRequest request;
  std::string out;
  bool force = false;  // replace a good profile with a noisy one
};

std::string fmt(const char* f, double v) {
  // Profiles are range-checked when read; a non-finite number here is a formula's bug.
  if (!std::isfinite(v)) throw NonFiniteInReport(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
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
  runtime::check_request(o.request);
  // The profile is written after minutes of measuring: a path that cannot take it is
  // refused before measuring starts.
  check_output_path(o.out, "--out");
  const runtime::InterruptScope interrupts;  // Ctrl-C stops the runs: no profile is written
  ProgressBar bar(ctx.err, ProgressBar::stderr_is_terminal());
  auto cal = runtime::calibrate(o.request, [&](const runtime::WorkProgress& p) {
    bar.update(p.done, p.total, p.what, p.eta_s);
  });
  bar.finish();
  for (const auto& warning : cal.warnings)
    ctx.err << "dtplan calibrate: warning: " << warning << "\n";
  if (!o.force) runtime::check_replaceable(o.out, cal.profile, cal.work_dir);
  write_file_atomically(o.out, cost::to_json(cal.profile).dump(2) + "\n", "--out");
  print_summary(ctx.out, cal.profile);
  ctx.out << "\nwrote " << o.out << " (use it with --profile " << o.out << "); runs are in "
          << cal.work_dir.string() << "\n";
  return 0;
}

}  // namespace

Command register_calibrate_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "calibrate", "Measure this machine through the runtime and fit a hardware profile");
  auto o = std::make_shared<CalibrateOptions>();
  sub->add_option("--backend", o->request.backend, "cpu (MPI, Eigen) or cuda (NCCL, cuBLAS)")
      ->capture_default_str();
  sub->add_option("--np", o->request.np, "ranks (one per device)")->capture_default_str();
  sub->add_option("--out", o->out, "profile JSON to write")->required();
  sub->add_flag("--quick", o->request.quick, "fewer shapes and sizes (seconds; for tests)");
  sub->add_flag("--no-steps", o->request.no_steps, "microbenchmarks only: no step correction");
  sub->add_option("--work-dir", o->request.work_dir,
                  "keep the runs here (default: a temporary folder)");
  sub->add_option("--data-dir", o->request.data_dir, "dtplan data directory");
  sub->add_flag("--force", o->force, "replace a good --out profile even with a noisy one");
  sub->add_option("--max-spread", o->request.max_spread,
                  "repeat spread (coefficient of variation, median over the microbenchmarks) "
                  "beyond which the profile is noisy")
      ->capture_default_str();
  return {"calibrate", [o](const RunContext& ctx) { return run_calibrate(*o, ctx); }};
}

}  // namespace dtplan::cli
