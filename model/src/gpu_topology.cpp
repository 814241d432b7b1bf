// A GPU model against the GPU-to-GPU fabric (NVLink, or AMD's xGMI) its node topology gives it.
#include "dtplan/model/gpu_topology.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"

namespace dtplan {

namespace {

// xGMI GPU links share LinkKind::nvlink (the GPU fabric kind) and are told by their class.
bool is_xgmi(const Link& l) {
  return l.link_class().rfind("xgmi", 0) == 0;
}

double fabric_Bps_per_gpu(const Topology& t, bool xgmi) {
  const auto& g = t.graph();
  double most = 0;
  for (std::int64_t r = 0; r < t.gpu_count(); ++r) {
    double sum = 0;
    for (const auto e : boost::make_iterator_range(boost::out_edges(t.gpu(r), g))) {
      if (g[e].kind == LinkKind::nvlink && is_xgmi(g[e]) == xgmi) sum += g[e].bandwidth_Bps;
    }
    most = std::max(most, sum);
  }
  return most;
}

std::string gbs(double bps) {
  return std::to_string(std::llround(bps / 1e9)) + " GB/s";
}

void check_fabric(const GpuSpec& gpu, const Topology& t, std::string_view fabric, double given,
                  double has) {
  if (given <= has * (1 + 1e-9)) return;
  throw Error("{gpu} " + gpu.name + " has " + (has > 0 ? gbs(has) : "no") + " " +
              std::string(fabric) + " per direction, but {topology} " + t.node().name +
              " gives each GPU " + gbs(given) + " of " + std::string(fabric) +
              ": describe its own board (a topology JSON, or `nvidia-smi topo -m` "
              "output) or choose a GPU that fits the topology");
}

// Whether the topology's GPUs reach their CPU over NVLink-C2C (a Grace superchip board).
bool has_c2c(const Topology& t) {
  const auto& g = t.graph();
  for (const auto e : boost::make_iterator_range(boost::out_edges(t.gpu(0), g))) {
    if (g[e].link_class().rfind("nvlink_c2c", 0) == 0) return true;
  }
  return false;
}

// A Grace superchip GPU (GB200, GB300) exists only on its C2C board, and a PCIe GPU has no C2C.
void check_host_link(const GpuSpec& gpu, const Topology& t) {
  const bool c2c_gpu = gpu.host_link_bytes_per_s_per_direction > 0;
  if (c2c_gpu == has_c2c(t)) return;
  throw Error("{gpu} " + gpu.name +
              (c2c_gpu ? " reaches its host over NVLink-C2C (a Grace superchip), but {topology} " +
                             t.node().name +
                             " puts its GPUs on PCIe: choose a Grace board "
                             "(gb200-nvl72, gb300-nvl72)"
                       : " sits on PCIe, but {topology} " + t.node().name +
                             " is a Grace superchip board (NVLink-C2C): choose a GPU of that "
                             "board (GB200, GB300)"));
}

}  // namespace

double nvlink_Bps_per_gpu(const Topology& t) {
  return fabric_Bps_per_gpu(t, false);
}

double xgmi_Bps_per_gpu(const Topology& t) {
  return fabric_Bps_per_gpu(t, true);
}

void check_gpu_on_topology(const GpuSpec& gpu, const Topology& t) {
  check_fabric(gpu, t, "NVLink", nvlink_Bps_per_gpu(t), gpu.nvlink_bytes_per_s_per_direction);
  check_fabric(gpu, t, "xGMI", xgmi_Bps_per_gpu(t), gpu.xgmi_bytes_per_s_per_direction);
  check_host_link(gpu, t);
}

}  // namespace dtplan
