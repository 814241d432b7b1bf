// A bundled model on a cluster of bundled nodes with the bundled constants: what the planner
// tests search over.
#pragma once

#include <filesystem>
#include <string>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/planner/search3d.hpp"
#include "dtplan/planner/unified_plan.hpp"

namespace dtplan::test {

struct Cluster {
  Cluster(const std::string& model, const std::string& node, std::int64_t nodes,
          const std::string& gpu_name)
      : data(resolve_data_dir("")),
        m(load_model(model, data / "models")),
        table(InterconnectTable::load(data / "interconnect.json")),
        topo(Topology::build(load_node_template(node, data / "topologies"), nodes, table)),
        gpu(GpuCatalog::load(data / "gpus.json").find(gpu_name)),
        k(cost::load_compute_constants(data / "compute.json")),
        overheads(cost::load_overheads(data / "overheads.json")) {}
  planner::Result3D search(const planner::Request3D& r) const {
    return planner::search_3d(m, topo, table, gpu, r, k, overheads);
  }
  planner::UnifiedPlan plan(const planner::LayoutRequest& r) const {
    return planner::plan_layouts(m, topo, table, gpu, r, k, overheads);
  }
  std::filesystem::path data;
  ModelDesc m;
  InterconnectTable table;
  Topology topo;
  GpuSpec gpu;
  cost::ComputeConstants k;
  cost::OverheadConstants overheads;
};

}  // namespace dtplan::test
