// `dtplan run`: starts `mpirun -np N dtplan-run ...` on this machine for the user. Multi-node
// runs call mpirun with a hostfile directly (README); dtplan does not launch processes itself.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cli {
namespace {

struct RunCommandOptions {
  std::string plan;
  std::int64_t np = 0;
  std::vector<std::string> forwarded;  // passed to dtplan-run unchanged
};

// dtplan-run sits beside the running dtplan executable (build/bin/).
std::string dtplan_run_path() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto beside = self.parent_path() / "dtplan-run";
  if (ec || !std::filesystem::exists(beside)) {
    throw Error("dtplan run: cannot find dtplan-run beside " + self.string());
  }
  return beside.string();
}

int run_run(const RunCommandOptions& o, const RunContext& ctx) {
  if (o.np < 1) throw Error("--np " + std::to_string(o.np) + ": must be >= 1");
  std::vector<std::string> args{"mpirun", "-np", std::to_string(o.np)};
  if (o.np > sysconf(_SC_NPROCESSORS_ONLN)) args.push_back("--oversubscribe");
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  args.insert(args.end(), {dtplan_run_path(), "--plan", o.plan});
  args.insert(args.end(), o.forwarded.begin(), o.forwarded.end());
  std::string shown;
  for (const auto& a : args)
    shown += (shown.empty() ? "" : " ") + a;
  ctx.err << "dtplan run: " << shown << "\n";
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp("mpirun", argv.data());
  throw Error("dtplan run: cannot start mpirun (install openmpi-bin): " +
              std::string(std::strerror(errno)));
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
