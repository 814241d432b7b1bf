// `dtplan run`: starts `mpirun -np N dtplan-run ...` on this machine for the user. Multi-node
// runs call mpirun with a hostfile directly (README); dtplan does not launch processes itself.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/runtime/launcher.hpp"

namespace dtplan::cli {
namespace {

struct RunCommandOptions {
  std::string plan;
  std::int64_t np = 0;
  std::vector<std::string> forwarded;  // passed to dtplan-run unchanged
};

// The data directory dtplan-run will use: its --data-dir flag, if forwarded.
std::string forwarded_data_dir(const std::vector<std::string>& forwarded) {
  for (std::size_t i = 0; i + 1 < forwarded.size(); ++i)
    if (forwarded[i] == "--data-dir") return forwarded[i + 1];
  return "";
}

// What dtplan-run would refuse after mpirun has started every rank is refused here, once:
// a plan that does not read, a model it cannot execute.
void check_runnable(const RunCommandOptions& o) {
  const auto plan = plan_from_json(o.plan);
  const auto model =
      load_model(plan.model, resolve_data_dir(forwarded_data_dir(o.forwarded)) / "models");
  if (model.transformer && model.transformer->moe.active()) {
    throw Error("plan " + o.plan + ": model " + model.name +
                " is a mixture of experts; dtplan-run executes dense blocks only (estimate "
                "and plan it instead)");
  }
}

int run_run(const RunCommandOptions& o, const RunContext& ctx) {
  if (o.np < 1) throw Error("--np " + std::to_string(o.np) + ": must be >= 1");
  check_runnable(o);
  std::vector<std::string> run_args{"--plan", o.plan};
  run_args.insert(run_args.end(), o.forwarded.begin(), o.forwarded.end());
  auto args = runtime::mpirun_argv(o.np, run_args);
  std::string shown;
  for (const auto& a : args)
    shown += (shown.empty() ? "" : " ") + a;
  ctx.err << "dtplan run: " << shown << "\n";
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // One rank runs dtplan-run itself (an MPI singleton), more go through mpirun.
  execvp(argv.front(), argv.data());
  throw Error("dtplan run: cannot start " + args.front() +
              (o.np > 1 ? " (install openmpi-bin): " : ": ") + std::string(std::strerror(errno)));
}

}  // namespace

Command register_run_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "run", "Execute a plan on this machine: mpirun -np N dtplan-run --plan P [dtplan-run flags]");
  auto o = std::make_shared<RunCommandOptions>();
  sub->add_option("--plan", o->plan, "the plan (dtplan plan --save-plan)")->required();
  sub->add_option("--np", o->np, "processes (one per device)")->required();
  sub->allow_extras();
  sub->final_callback([o, sub] { o->forwarded = sub->remaining(); });
  return {"run", [o](const RunContext& ctx) { return run_run(*o, ctx); }};
}

}  // namespace dtplan::cli
