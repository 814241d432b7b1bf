// A GPU model against the GPU-to-GPU fabric (NVLink, or AMD's xGMI) its node topology gives it.
#include "dtplan/model/gpu_topology.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"

namespace dtplan {

namespace {

// xGMI GPU links share LinkKind::nvlink (the GPU fabric kind) and are told by their class.
bool is_xgmi(const Link& l) {
  return l.link_class.rfind("xgmi", 0) == 0;
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
}

}  // namespace dtplan
