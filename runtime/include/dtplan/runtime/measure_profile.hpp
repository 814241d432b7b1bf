// Microbenchmarks through the runtime's own Device and Communicator, fitted into a hardware
// profile (cost/hardware_profile.hpp): GEMMs over a grid of shapes (fit: per FLOP, per byte,
// per call), element-wise bandwidth, softmax cross-entropy, optimizer updates, and each
// collective over a size sweep (fit: latency + per byte) at this world size. Every rank runs
// the benchmarks at once, as a training job would; the slowest rank's times are kept.
#pragma once

#include <functional>
#include <string>

#include "dtplan/cost/hardware_profile.hpp"
#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/device.hpp"
#include "dtplan/runtime/mpi_group.hpp"

namespace dtplan::runtime {

using ProgressFn = std::function<void(const std::string&)>;

cost::HardwareProfile measure_profile(Device& device, Communicator& comm, const MpiGroup& world,
                                      const ProgressFn& progress);

}  // namespace dtplan::runtime
