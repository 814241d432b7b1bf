// dtplan-run: one process per device, started by mpirun. Parses flags, starts MPI, runs the
// job, writes the measurement on rank 0. An error ends the whole job (MPI_Abort) after a
// one-line message, so no rank is left waiting in a collective; a job of one process exits 1
// without the abort, and a command line that does not parse exits 2 (as dtplan does).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/runtime/measurement.hpp"
#include "dtplan/runtime/replay_dump.hpp"
#include "dtplan/runtime/run_job.hpp"

namespace {

using dtplan::runtime::RunOptions;

void add_options(CLI::App& app, RunOptions& o, std::string& fault) {
  app.add_option("--plan", o.plan_path, "plan JSON written by dtplan plan --save-plan");
  app.add_flag("--measure-profile", o.measure_profile,
               "instead of a plan: measure this backend's hardware profile into --out");
  app.add_flag("--quick", o.quick_profile,
               "with --measure-profile: fewer shapes and sizes (seconds, for tests)");
  app.add_option("--backend", o.backend, "cpu (MPI, Eigen) or cuda (NCCL, cuBLAS)")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "measured optimizer steps")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::NumberRange{1, 1e6}));
  app.add_option("--warmup", o.warmup, "steps run before measuring")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::NumberRange::non_negative(1e6)));
  app.add_option("--scale", o.scale,
                 "in (0, 1]: head dimension, MLP width and vocabulary multiplied by it")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::runtime::kModelScale));
  app.add_option("--tp", o.tp,
                 "tensor-parallel ranks per replica, overriding the plan's (CPU backend; "
                 "mpirun -np dp x tp)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--pp", o.pp,
                 "pipeline stages, overriding the plan's (CPU backend; mpirun -np dp x tp x pp)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--out", o.out_path, "measurement JSON to write (rank 0)");
  app.add_option("--data-dir", o.data_dir, "dtplan data directory (presets)");
  app.add_option("--dump", o.dump_dir,
                 "write the weights before and after, every batch and the losses to this "
                 "directory, for tools/torch_replay.py to replay in PyTorch");
  app.add_option("--lr", o.lr, "learning rate")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::kLearningRate));
  app.add_option("--max-grad-norm", o.max_grad_norm, "global gradient-norm clip (0: off)")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::NumberRange::non_negative(1e30)));
  app.add_option("--seed", o.seed, "seed of weights and data")->capture_default_str();
  app.add_option("--memory-limit", o.memory_limit_bytes,
                 "bytes a rank may allocate (0: the device's memory, or the host's share)")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::NumberRange::non_negative(1e18)));
  app.add_option("--timeout", o.timeout_s,
                 "seconds without progress after which the job is ended (0: never)")
      ->capture_default_str()
      ->check(dtplan::number_check(dtplan::kSeconds));
  app.add_option("--inject-fault", fault, "for tests: kill:RANK:STEP or hang:RANK:STEP");
  app.add_option("--check", o.check_ranks,
                 "only check the flags and the plan for a job of N processes, run nothing (what "
                 "dtplan run does before starting mpirun)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
}

void write_file(const std::string& path, const nlohmann::json& j) {
  dtplan::write_file_atomically(path, j.dump(2) + "\n", "--out");
}

// Rank 0's report reached standard output, or the job fails (exit 1) saying why.
int finish_output(int rank) {
  if (rank != 0) return 0;
  const std::string reason = dtplan::standard_output_error();
  if (reason.empty()) return 0;
  std::fprintf(stderr, "dtplan-run: cannot write the standard output: %s\n", reason.c_str());
  return 1;
}

void print_summary(const nlohmann::json& m) {
  const auto& s = m["summary"];
  const auto& w = m["workload"];
  const std::int64_t tp = w.contains("tp") ? w["tp"].get<std::int64_t>() : 1;
  const std::int64_t pp = w.contains("pipeline") ? w["pipeline"]["pp"].get<std::int64_t>() : 1;
  std::string ranks = std::to_string(m["world_size"].get<std::int64_t>() / (tp * pp));
  if (tp > 1) ranks += " x " + std::to_string(tp) + " tensor-parallel";
  if (pp > 1) ranks += " x " + std::to_string(pp) + " pipeline-stage";
  ranks += " ranks";
  std::printf("dtplan-run: %s, %s on %s (%s), scale %g: %lld parameters%s\n",
              m["plan"]["model"].get<std::string>().c_str(),
              m["executed"]["strategy"].get<std::string>().c_str(), ranks.c_str(),
              m["backend"].get<std::string>().c_str(), m["scale"].get<double>(),
              static_cast<long long>(w["params"].get<std::int64_t>()),
              tp * pp > 1 ? " on rank 0" : "");
  std::printf(
      "step %.4f s (forward %.4f, backward %.4f, waiting for gradients %.4f, optimizer "
      "%.4f); %.2f samples/s, %.0f tokens/s; peak %.1f MiB per rank\n",
      s["step_time_s"].get<double>(), s["forward_s"].get<double>(), s["backward_s"].get<double>(),
      s["comm_wait_s"].get<double>(), s["optimizer_s"].get<double>(),
      s["samples_per_s"].get<double>(), s["tokens_per_s"].get<double>(),
      s["max_peak_bytes"].get<double>() / 1048576.0);
  for (const auto& step : m["steps"]) {
    std::printf("  step %lld: %.4f s, loss %.4f\n",
                static_cast<long long>(step["step"].get<std::int64_t>()),
                step["time_s"].get<double>(), step["loss"].get<double>());
  }
}

}  // namespace

int main(int argc, char** argv) {
  dtplan::runtime::MpiSession mpi(&argc, &argv);
  const auto world = dtplan::runtime::MpiGroup::world();
  CLI::App app{"dtplan-run: execute a dtplan plan with MPI (CPU) or NCCL (GPU) and measure it"};
  RunOptions options;
  std::string fault;
  add_options(app, options, fault);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a success; a command line that does not parse exits 2, as dtplan's do.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return world.rank() == 0 ? app.exit(e) : 0;
    }
    if (world.rank() == 0) {
      std::fprintf(stderr, "dtplan-run: error: %s (see dtplan-run --help)\n", e.what());
    }
    return 2;
  }
  try {
    for (int i = 0; i < argc; ++i)
      options.command_line += (i ? " " : "") + std::string(argv[i]);
    if (!fault.empty()) options.fault = dtplan::runtime::parse_fault(fault);
    if (!options.out_path.empty()) dtplan::check_output_path(options.out_path, "--out");
    if (!options.dump_dir.empty()) dtplan::runtime::check_replay_dir(options.dump_dir);
    if (options.check_ranks > 0) {  // the flags parsed; the plan's job, unless profiling
      if (!options.measure_profile) {
        if (options.plan_path.empty()) throw dtplan::Error("--plan FILE is required");
        dtplan::runtime::check_job(options);
      }
      return 0;
    }
    if (options.measure_profile) {
      if (options.out_path.empty()) throw dtplan::Error("--measure-profile needs --out FILE");
      const auto p = dtplan::runtime::run_profile(options, world);
      if (world.rank() == 0) {
        write_file(options.out_path, p);
        std::printf("profile written to %s\n", options.out_path.c_str());
      }
      return finish_output(world.rank());
    }
    if (options.plan_path.empty()) throw dtplan::Error("--plan FILE is required");
    const auto m = dtplan::runtime::run_job(options, world);
    if (world.rank() == 0) {
      if (!options.out_path.empty()) write_file(options.out_path, m);
      print_summary(m);
      if (!options.out_path.empty())
        std::printf("measurement written to %s\n", options.out_path.c_str());
    }
  } catch (const std::exception& e) {
    // A plan's fields by their own names (the plan file's keys).
    const auto message = dtplan::rendered(e, [](const std::string& f) { return f; });
    std::fprintf(stderr, "dtplan-run: rank %d: %s\n", world.rank(), message.c_str());
    std::fflush(stderr);
    // One process has no peers waiting on it: exit without Open MPI's abort report.
    if (world.size() == 1) return 1;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return finish_output(world.rank());
}
