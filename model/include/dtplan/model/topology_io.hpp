// Reading node topologies: presets in data/topologies/, our JSON format, and the text that
// `nvidia-smi topo -m` prints. --topology accepts any of them.
//
// Our JSON (one node; --nodes replicates it):
//   {"schema_version": 1, "name": "pcie-split-8", "description": "...",
//    "devices": [{"id": "cpu0", "kind": "cpu"}, {"id": "gpu0", "kind": "gpu"}, ...],
//    "links": [{"from": "gpu0", "to": "sw0", "class": "pcie4"},
//              {"from": "gpu0", "to": "nvswitch", "class": "nvlink3", "count": 12}, ...],
//    "network": {"class": "ib_hdr", "nodes_per_leaf": 20, "oversubscription": 1.0}}
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/model/topology.hpp"

namespace dtplan {

class ObjectReader;

// What `nvidia-smi topo -m` does not say, and the classes assumed for it.
struct SmiAssumptions {
  std::string pcie_class = "pcie4";  // GPU/NIC PCIe links and switch uplinks
  std::string socket_class = "upi";  // the link between CPU sockets (SYS)
  std::string nvlink_class;          // empty: nvlink2 for <= 6 links per GPU, nvlink3 for
                                     // <= 12, nvlink4 beyond
  std::string nic_class = "ib_hdr";  // NIC ports, for --nodes > 1
};

NodeTemplate node_from_json(const ObjectReader& r);
NodeTemplate parse_nvidia_smi_topo(std::string_view text, const std::string& origin,
                                   const SmiAssumptions& assume);

// A preset name (data/topologies/NAME.json) or a file: JSON if it starts with '{', else
// nvidia-smi text. Unknown names list the close preset names.
NodeTemplate load_node_template(const std::string& preset_or_path,
                                const std::filesystem::path& topologies_dir,
                                const SmiAssumptions& assume = {});

std::vector<std::string> list_topology_presets(const std::filesystem::path& topologies_dir);

}  // namespace dtplan
