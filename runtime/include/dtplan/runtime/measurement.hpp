// A measurement file: what dtplan-run ran (the plan, the executed workload and settings, the
// hardware and library versions, the scale) and what it measured (per step phase times, each
// collective with its size, peak memory by component and RSS per rank). Written by
// dtplan-run --out, read by dtplan validate and the GUI.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/plan.hpp"

namespace dtplan::runtime {

// --scale and a measurement's "scale": head dimension, MLP width and vocabulary x scale.
inline constexpr NumberRange kModelScale = NumberRange::positive(1.0);

struct StepRow {
  std::int64_t step = 0;
  double time_s = 0, forward_s = 0, backward_s = 0, comm_wait_s = 0, optimizer_s = 0;
  double loss = 0, grad_norm = 0, loss_scale = 1;
  bool skipped = false;
};

// One kind of collective per step: all operations of the same kind, size and phase.
struct CollectiveSummary {
  std::string kind;   // all_reduce, reduce_scatter, ...
  std::string phase;  // forward, backward, gradient sync, optimizer
  std::int64_t bytes = 0;
  std::int64_t count_per_step = 0;
  double time_s = 0;  // median time of one operation over the measured steps
};

struct RankMemory {
  int rank = 0;
  std::int64_t peak_bytes = 0;                     // allocated by the runtime, at its peak
  std::map<std::string, std::int64_t> components;  // the peak's split by component
  std::int64_t peak_rss_bytes = 0;                 // CPU backend: the process's VmHWM
};

struct Executed {
  Strategy strategy = Strategy::ddp;
  Optimizer optimizer = Optimizer::adamw;
  std::string compute_precision = "fp32";
  bool loss_scaling = false;
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  bool no_sync = true;  // as executed (ZeRO-2/3 and DP synchronise every micro-step)
  std::int64_t bucket_cap_bytes = 0;
  std::int64_t buckets = 0;
  double lr = 0, max_grad_norm = 0;
  std::int64_t seed = 0;
};

struct Measurement {
  std::string version;  // dtplan's
  std::string created;  // UTC
  std::string command;
  std::string plan_file;
  Plan plan;
  std::string backend;  // cpu | cuda
  std::int64_t world_size = 1;
  std::string host;
  std::string device;  // Device::description()
  std::string cpu;
  std::int64_t cores = 0;
  std::int64_t host_memory_bytes = 0;
  std::int64_t device_capacity_bytes = 0;
  // CPU backend: the lowest of the ranks' CPU time over wall time during the measured steps
  // (a rank alone on a core stays near 1: MPI's waits spin or yield to nothing); none when not
  // recorded (the CUDA backend, files before 2026-11-29).
  std::optional<double> cpu_share;
  std::map<std::string, std::string> versions;  // mpi, eigen, cuda...
  double scale = 1;
  cost::DenseStack workload;
  Executed executed;
  std::int64_t warmup = 0;
  std::vector<StepRow> steps;  // measured steps (warm-up excluded), slowest rank's times
  std::vector<CollectiveSummary> collectives;
  std::vector<RankMemory> memory;
  std::vector<std::string> notes;

  // Medians over the measured steps.
  StepRow median() const;
  std::int64_t global_batch() const;
  double samples_per_s() const;
  double tokens_per_s() const;
};

nlohmann::json to_json(const Measurement& m);
// What a measurement executed, as the cost model's RuntimeRun (to predict it).
cost::RuntimeRun runtime_run_of(const Measurement& m);
Measurement measurement_from_json(const std::filesystem::path& path);

// When profile `p` was measured on other hardware, or with another build of the CPU kernels,
// than `m` ran on, a note saying so (time predictions from it measure that difference too);
// failing that, when `p` has no attention fit and `m` ran the causal workload (the profile was
// made for the older one); none when they match. A profile's hardware is the device's
// description, then its ranks.
std::optional<std::string> profile_mismatch(const Measurement& m, const cost::HardwareProfile& p);

}  // namespace dtplan::runtime
