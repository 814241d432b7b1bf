// The cluster and constants a plan is computed on, loaded by name from a data directory: the
// interconnect table, the topology built from a preset or file over a number of nodes, the GPU
// from the catalogue, and the bundled compute and overhead constants. One loader for the front
// ends that plan from names (the GUI's session, autotune); it owns what it loads, and neither
// copies nor moves, because the topology refers to the table.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/interconnect.hpp"
#include "dtplan/model/topology.hpp"

namespace dtplan::planner {

struct ClusterNames {
  std::string topology;  // preset name, JSON file or nvidia-smi topo -m text
  std::int64_t nodes = 1;
  std::string gpu;  // catalogue name
  // GPUs used in each node: its first hosts (node_subset.hpp); 0, or all of them: the node.
  std::int64_t gpus_per_node = 0;
};

class ClusterInputs {
 public:
  // Throws a FieldError naming topology, nodes, gpus_per_node or gpu when one is missing or out
  // of range, or the loaders' errors naming the file and key.
  ClusterInputs(const std::filesystem::path& data_dir, const ClusterNames& names);
  ClusterInputs(const ClusterInputs&) = delete;
  ClusterInputs& operator=(const ClusterInputs&) = delete;

  InterconnectTable table;
  Topology topology;  // refers to table
  GpuSpec gpu;
  cost::ComputeConstants compute;
  cost::OverheadConstants overheads;
};

}  // namespace dtplan::planner
