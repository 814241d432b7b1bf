// The planner's cluster inputs by name (see cluster_inputs.hpp).
#include "dtplan/planner/cluster_inputs.hpp"

#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_topology.hpp"
#include "dtplan/model/topology_io.hpp"

namespace dtplan::planner {
namespace {

const ClusterNames& checked(const ClusterNames& n) {
  if (n.topology.empty()) {
    throw FieldError("topology",
                     "name a preset (pcie-split-8, dgx-a100, ...), a "
                     "topology JSON file or nvidia-smi topo -m output");
  }
  if (n.nodes < 1 || n.nodes > 4096) {
    throw FieldError("nodes", std::to_string(n.nodes) + " is not from 1 to 4096");
  }
  if (n.gpu.empty()) throw FieldError("gpu", "give the GPU model, e.g. A100-80GB");
  return n;
}

}  // namespace

ClusterInputs::ClusterInputs(const std::filesystem::path& data_dir, const ClusterNames& names)
    : table(InterconnectTable::load(data_dir / "interconnect.json")),
      topology(Topology::build(load_node_template(checked(names).topology, data_dir / "topologies"),
                               names.nodes, table)),
      gpu(GpuCatalog::load(data_dir / "gpus.json").find(names.gpu)),
      compute(cost::load_compute_constants(data_dir / "compute.json")),
      overheads(cost::load_overheads(data_dir / "overheads.json")) {
  check_gpu_on_topology(gpu, topology);
}

}  // namespace dtplan::planner
