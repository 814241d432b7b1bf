// A GPU model against the NVLink its node topology gives it.
#include "dtplan/model/gpu_topology.hpp"

#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"

namespace dtplan {

double nvlink_Bps_per_gpu(const Topology& t) {
  const auto& g = t.graph();
  double most = 0;
  for (std::int64_t r = 0; r < t.gpu_count(); ++r) {
    double sum = 0;
    for (const auto e : boost::make_iterator_range(boost::out_edges(t.gpu(r), g))) {
      if (g[e].kind == LinkKind::nvlink) sum += g[e].bandwidth_Bps;
    }
    most = std::max(most, sum);
  }
  return most;
}

void check_gpu_on_topology(const GpuSpec& gpu, const Topology& t) {
  const double given = nvlink_Bps_per_gpu(t);
  const double has = gpu.nvlink_bytes_per_s_per_direction;
  if (given <= has * (1 + 1e-9)) return;
  const auto gbs = [](double bps) { return std::to_string(std::llround(bps / 1e9)) + " GB/s"; };
  throw Error("{gpu} " + gpu.name + " has " + (has > 0 ? gbs(has) : "no") +
              " NVLink per direction, but {topology} " + t.node().name + " gives each GPU " +
              gbs(given) +
              ": describe its own board (a topology JSON, or `nvidia-smi topo -m` "
              "output) or choose a GPU that fits the topology");
}

}  // namespace dtplan
