// Subcommand registry: each command adds itself to the app and returns the function that runs
// it once parsing has succeeded. Adding a command is one new file and one line in app.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace dtplan {
class Topology;
}

namespace dtplan::cli {

struct RunContext {
  std::ostream& out;
  std::ostream& err;
  const std::vector<std::string>& args;  // the command line, recorded in JSON reports
};

using CommandRunner = std::function<int(const RunContext&)>;

struct Command {
  std::string name;
  CommandRunner run;
};

// "dtplan topo: NAME (origin), N nodes, M GPUs" and the description.
void out_header(std::ostream& out, const Topology& t);

Command register_memory_command(CLI::App& app);
Command register_models_command(CLI::App& app);
Command register_gpus_command(CLI::App& app);
Command register_topo_command(CLI::App& app);
Command register_comm_command(CLI::App& app);
Command register_estimate_command(CLI::App& app);
Command register_plan_command(CLI::App& app);
Command register_validate_command(CLI::App& app);
Command register_run_command(CLI::App& app);
Command register_calibrate_command(CLI::App& app);
Command register_accuracy_command(CLI::App& app);
Command register_autotune_command(CLI::App& app);

}  // namespace dtplan::cli
