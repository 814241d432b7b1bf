// Starting dtplan-run under mpirun from the dtplan command: the argument vector (with the flags
// Open MPI needs as root or oversubscribed), and a child process whose output is read line by
// line (progress lines feed the caller's progress bar; the last lines explain a failure).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dtplan::runtime {

// The dtplan-run to start: $DTPLAN_RUN when set, else the one beside the running executable
// (build/bin/); throws when it is missing.
std::string dtplan_run_path();

// mpirun -np N [--oversubscribe] [--allow-run-as-root] dtplan-run ARGS...; for one rank,
// dtplan-run ARGS... alone (an MPI singleton).
std::vector<std::string> mpirun_argv(std::int64_t np, const std::vector<std::string>& run_args);

struct ChildResult {
  int exit_code = 0;              // 128 + signal when killed by one
  std::vector<std::string> tail;  // its last output lines (stdout and stderr together)
  double wall_s = 0;
};

// Runs argv[0] (found on PATH) with stdout and stderr piped to `on_line`, waits for it.
// Throws dtplan::Error when it cannot be started.
ChildResult run_child(const std::vector<std::string>& argv,
                      const std::function<void(const std::string&)>& on_line);

// "[i/n]" in a dtplan-run progress line: (i, n), or (0, 0) when the line has none.
std::pair<int, int> progress_of(const std::string& line);

}  // namespace dtplan::runtime
