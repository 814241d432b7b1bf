// The CPU backend's device: host memory and Eigen (single-threaded: one rank per core).
#pragma once

#include <cstdint>
#include <memory>

#include "dtplan/runtime/device.hpp"

namespace dtplan::runtime {

// capacity_bytes = 0: the host's available memory divided by the ranks on this node.
std::unique_ptr<Device> make_cpu_device(std::int64_t capacity_bytes, int ranks_on_node);

}  // namespace dtplan::runtime
