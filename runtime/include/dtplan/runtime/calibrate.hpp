// Calibration as a library workflow (dtplan calibrate, the GUI's Calibrate dialog): the
// runtime's microbenchmarks (mpirun -np N dtplan-run --measure-profile: GEMMs by shape,
// element-wise rates by size, collectives by size for every communicator size), the
// least-squares fits of the hardware profile, then a few whole training steps (trial_sets.hpp)
// to fit the step correction, and the profile's noise judged (cost/profile_quality.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dtplan/cost/calibration.hpp"
#include "dtplan/cost/profile_quality.hpp"
#include "dtplan/runtime/trials.hpp"

namespace dtplan::runtime {

struct CalibrateRequest {
  std::string backend = "cpu";  // cpu (MPI, Eigen) or cuda (NCCL, cuBLAS)
  std::int64_t np = 2;          // ranks, one per device
  bool quick = false;           // fewer shapes and sizes
  bool no_steps = false;        // microbenchmarks only: no step correction
  std::string work_dir;         // empty: a fresh temporary directory
  std::string data_dir;
  double max_spread = cost::QualityLimits{}.max_median_spread;
};

// Throws FieldError naming the first field out of range.
void check_request(const CalibrateRequest& r);

struct Calibration {
  cost::HardwareProfile profile;      // with its quality judged
  std::filesystem::path work_dir;     // the runs' plans and measurements
  std::vector<std::string> warnings;  // why the profile is noisy, one line each
};

// Progress steps: GEMMs, rates, one per communicator size, then one per calibration step.
int calibration_stages(const CalibrateRequest& r);

// Runs the whole calibration. Throws Error when the microbenchmarks or a step fail (with
// dtplan-run's last lines), Interrupted when a signal (or request_interrupt) stops it.
Calibration calibrate(const CalibrateRequest& r, const ProgressFn& progress);

// "created ..., GEMM fit error 3.1%, attention fit error 8.0%, step correction x1.02 compute,
// ..., repeat spread 2.0%" (the attention part where the profile has one).
std::string profile_summary(const cost::HardwareProfile& p);

// A noisy profile must not replace one at `path` that is not marked noisy (a profile without
// a quality section counts as good; a file that is no profile may be replaced). Throws a
// FieldError on "out" that names {force} and where this run's measurements are.
void check_replaceable(const std::filesystem::path& path, const cost::HardwareProfile& fresh,
                       const std::filesystem::path& work_dir);

}  // namespace dtplan::runtime
