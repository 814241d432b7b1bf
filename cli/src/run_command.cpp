// `dtplan run`: starts `mpirun -np N dtplan-run ...` on this machine for the user. Multi-node
// runs call mpirun with a hostfile directly (README); dtplan does not launch processes itself.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "dtplan/cost/runtime_run.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/runtime/launcher.hpp"
#include "dtplan/runtime/runtime_run.hpp"

namespace dtplan::cli {
namespace {

struct RunCommandOptions {
  std::string plan;
  std::int64_t np = 0;
  std::vector<std::string> forwarded;  // passed to dtplan-run unchanged
};

// A dtplan-run flag's value as forwarded ("--tp 2" or "--tp=2"), if it is.
std::optional<std::string> forwarded_value(const std::vector<std::string>& forwarded,
                                           const std::string& flag) {
  for (std::size_t i = 0; i < forwarded.size(); ++i) {
    if (forwarded[i] == flag && i + 1 < forwarded.size()) return forwarded[i + 1];
    if (forwarded[i].rfind(flag + "=", 0) == 0) return forwarded[i].substr(flag.size() + 1);
  }
  return std::nullopt;
}

// The data directory dtplan-run will use: its --data-dir flag, if forwarded.
std::string forwarded_data_dir(const std::vector<std::string>& forwarded) {
  return forwarded_value(forwarded, "--data-dir").value_or("");
}

// A forwarded --tp or --pp: a whole number >= 1, or absent.
std::optional<std::int64_t> forwarded_ranks(const std::vector<std::string>& forwarded,
                                            const std::string& flag) {
  const auto text = forwarded_value(forwarded, flag);
  if (!text) return std::nullopt;
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
  if (ec != std::errc() || end != text->data() + text->size() || n < 1) {
    throw Error(flag + " " + *text + ": expected a whole number of ranks >= 1");
  }
  return n;
}

// A forwarded --scale, if it reads as a positive number (dtplan-run names a bad one itself);
// else dtplan-run's default, 1.
double forwarded_scale(const std::vector<std::string>& forwarded) {
  const auto text = forwarded_value(forwarded, "--scale");
  if (!text) return 1.0;
  try {
    std::size_t used = 0;
    const double scale = std::stod(*text, &used);
    return used == text->size() && scale > 0 && scale <= 1 ? scale : 1.0;
  } catch (const std::exception&) {
    return 1.0;
  }
}

// What dtplan-run would refuse after mpirun has started every rank is refused here, once:
// a plan that does not read, a model it cannot execute, a split its blocks do not take.
void check_runnable(const RunCommandOptions& o) {
  auto plan = plan_from_json(o.plan);
  const auto model =
      load_model(plan.model, resolve_data_dir(forwarded_data_dir(o.forwarded)) / "models");
  if (model.transformer && model.transformer->moe.active()) {
    throw Error("plan " + o.plan + ": model " + model.name +
                " is a mixture of experts; dtplan-run executes dense blocks only (estimate "
                "and plan it instead)");
  }
  // The split as dtplan-run will take it: the plan's, or the forwarded flags'.
  if (const auto tp = forwarded_ranks(o.forwarded, "--tp")) plan.tp = *tp;
  if (const auto pp = forwarded_ranks(o.forwarded, "--pp")) plan.pp = *pp;
  if (const auto problem = runtime::rank_count_problem(plan, o.np)) {
    throw Error("plan " + o.plan + ": " + *problem);
  }
  try {
    (void)cost::runtime_run_of(plan, model, forwarded_scale(o.forwarded));
  } catch (const Error& e) {
    throw Error("plan " + o.plan + ": " + e.what());
  }
}

// dtplan-run's own check of the forwarded flags and the plan (dtplan-run --check), one process
// before mpirun starts N: a refusal is said once, without N copies and Open MPI's abort report.
// Returns its exit code (0: go ahead).
int dtplan_run_check(const RunCommandOptions& o, const std::vector<std::string>& run_args,
                     const RunContext& ctx) {
  std::vector<std::string> argv{runtime::dtplan_run_path(), "--check", std::to_string(o.np)};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  const auto r = runtime::run_child(argv, [](const std::string&) {});
  if (r.exit_code != 0) {
    for (const auto& line : r.tail)
      ctx.err << line << "\n";
  }
  return r.exit_code;
}

int run_run(const RunCommandOptions& o, const RunContext& ctx) {
  if (o.np < 1) throw Error("--np " + std::to_string(o.np) + ": must be >= 1");
  check_runnable(o);
  std::vector<std::string> run_args{"--plan", o.plan};
  run_args.insert(run_args.end(), o.forwarded.begin(), o.forwarded.end());
  // One rank is dtplan-run itself, whose refusals are already said once.
  if (o.np > 1) {
    if (const int code = dtplan_run_check(o, run_args, ctx); code != 0) return code;
  }
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
