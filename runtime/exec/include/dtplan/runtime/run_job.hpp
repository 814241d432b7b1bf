// dtplan-run's job: read a Plan, build the workload it describes (scaled), train it for
// warm-up + measured steps under the plan's strategy on the chosen backend, and gather a
// measurement (phase times, each collective, memory by component, RSS) onto rank 0.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/runtime/mpi_group.hpp"
#include "dtplan/runtime/runtime_run.hpp"

namespace dtplan::runtime {

// A deliberate failure, for testing that the job ends instead of hanging.
struct InjectedFault {
  enum class Kind { kill, hang } kind = Kind::kill;
  int rank = 0;
  std::int64_t step = 0;
};
// "kill:RANK:STEP" or "hang:RANK:STEP"; throws naming --inject-fault otherwise.
InjectedFault parse_fault(const std::string& text);

struct RunOptions {
  std::string plan_path;
  std::string backend = "cpu";  // cpu | cuda
  std::int64_t steps = 3;
  std::int64_t warmup = 1;
  double scale = 1;
  std::string out_path;  // empty: no file
  std::string data_dir;
  float lr = 1e-3f;
  float max_grad_norm = 1.0f;
  std::uint64_t seed = 1234;
  std::int64_t memory_limit_bytes = 0;  // 0: the device's (or host's share of) memory
  double timeout_s = 600;
  std::optional<InjectedFault> fault;
  std::string command_line;  // recorded in the measurement
  bool measure_profile = false;
  bool quick_profile = false;    // fewer microbenchmark shapes and sizes
  std::string dump_dir;          // non-empty: write a replay dump there (replay_dump.hpp)
  std::int64_t tp = 0;           // tensor-parallel ranks; 0: the plan's
  std::int64_t pp = 0;           // pipeline stages; 0: the plan's
  std::int64_t check_ranks = 0;  // --check N: only check the flags and plan for N processes
};

// Runs the job on every rank of `world` (collective). Returns the measurement JSON on rank 0
// (null elsewhere). Throws dtplan::Error with the input and the problem.
nlohmann::json run_job(const RunOptions& options, const MpiGroup& world);

// --check N: what run_job refuses before it starts, for a job of N processes (the steps, the
// backend, the plan and what it asks of the runtime), without a device or a collective; what
// dtplan run asks before starting mpirun. Throws as run_job does.
void check_job(const RunOptions& options);

// --measure-profile: the hardware profile of this backend at this world size (rank 0; null
// elsewhere); progress lines go to stderr on rank 0.
nlohmann::json run_profile(const RunOptions& options, const MpiGroup& world);

}  // namespace dtplan::runtime
