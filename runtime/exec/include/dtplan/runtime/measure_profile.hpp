// Microbenchmarks through the runtime's own Device and Communicator, fitted into a hardware
// profile (cost/hardware_profile.hpp, fits in cost/calibration.hpp): GEMMs over a grid of
// shapes and the three forms a Linear uses (fit: per FLOP, per byte, per call); element-wise
// bandwidth, MLP activations, softmax cross-entropy and optimizer updates at sizes from
// cache-resident to DRAM (rate curves, on random data); each collective over a size sweep
// (fit: latency + per byte) for every communicator size 2, 4, 8, ... up to the world size,
// timed on the first ranks while the others wait (a job of that size runs alone). Every rank runs
// the benchmarks at once, as a training job would; the slowest rank's times are kept.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dtplan/cost/hardware_profile.hpp"
#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/device.hpp"
#include "dtplan/runtime/mpi_group.hpp"

namespace dtplan::runtime {

// Progress: the stage's index (1-based), the number of stages, what it measures.
using ProgressFn = std::function<void(int, int, const std::string&)>;
using CommFactory = std::function<std::unique_ptr<Communicator>(const MpiGroup&)>;

struct ProfileOptions {
  bool quick = false;  // fewer shapes and sizes (tests)
};

cost::HardwareProfile measure_profile(Device& device, const CommFactory& make_comm,
                                      const MpiGroup& world, const ProfileOptions& options,
                                      const ProgressFn& progress);

}  // namespace dtplan::runtime
