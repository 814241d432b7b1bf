// Whether a GPU model can sit in a node topology: the topology's links carry the traffic, so
// a GPU with less NVLink than the topology gives it (an H800 on a DGX H100 preset, an MI300X on
// NVSwitch) would be priced at links it does not have.
#pragma once

#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/topology.hpp"

namespace dtplan {

// The most NVLink bandwidth, per direction, any GPU of `t` has to its peers or switch.
double nvlink_Bps_per_gpu(const Topology& t);
// The same for AMD's xGMI GPU links (GPU-fabric link classes whose names begin "xgmi").
double xgmi_Bps_per_gpu(const Topology& t);

// Throws dtplan::Error naming the GPU, the topology and both bandwidths when the topology
// gives each GPU more NVLink, or more xGMI, than the GPU has, or when the GPU's host link
// (PCIe, or NVLink-C2C on a Grace superchip) is not the board's.
void check_gpu_on_topology(const GpuSpec& gpu, const Topology& t);

}  // namespace dtplan
