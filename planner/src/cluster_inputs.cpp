// The planner's cluster inputs by name (see cluster_inputs.hpp).
#include "dtplan/planner/cluster_inputs.hpp"

#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_topology.hpp"
#include "dtplan/model/node_subset.hpp"
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

// The node, or its first hosts when the names use part of it.
NodeTemplate node_of(const std::filesystem::path& data_dir, const ClusterNames& n) {
  auto node = load_node_template(checked(n).topology, data_dir / "topologies");
  if (n.gpus_per_node == 0) return node;
  try {
    return first_hosts(node, n.gpus_per_node);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    throw FieldError("gpus_per_node", e.what());
  }
}

}  // namespace

ClusterInputs::ClusterInputs(const std::filesystem::path& data_dir, const ClusterNames& names)
    : table(InterconnectTable::load(data_dir / "interconnect.json")),
      topology(Topology::build(node_of(data_dir, names), names.nodes, table)),
      gpu(GpuCatalog::load(data_dir / "gpus.json").find(names.gpu)),
      compute(cost::load_compute_constants(data_dir / "compute.json")),
      overheads(cost::load_overheads(data_dir / "overheads.json")) {
  check_gpu_on_topology(gpu, topology);
}

}  // namespace dtplan::planner
