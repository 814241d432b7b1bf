// A cluster as a Boost.Graph graph: GPUs, PCIe switches, CPU sockets, NVSwitches, NICs and
// network switches as vertices; every physical link as two directed edges (one per
// direction) carrying bandwidth per direction and the fraction of it transfers achieve.
//
// A topology is described by one node (NodeTemplate: from a preset, our JSON, or the text
// of `nvidia-smi topo -m`) replicated over `nodes` hosts and joined by a rail-optimised
// fat tree: NIC r of every node attaches to the leaf switch of rail r for its group of
// nodes; the spine layer is one aggregated vertex whose links to each leaf carry the
// leaf's downlink capacity divided by the oversubscription.
//
//      node 0                 node 1
//   gpu0 .. gpu7           gpu0 .. gpu7
//    |  PCIe  |             |       |
//   nic0 .. nic7           nic0 .. nic7
//    |       \_____________/|       |
//   leaf(rail 0) ...       leaf(rail 7)
//          \___ spine (aggregated) ___/
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/model/interconnect.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan {

enum class DeviceKind { gpu, pcie_switch, cpu, nvswitch, nic, network_switch };

std::string_view name_of(DeviceKind k);
std::optional<DeviceKind> parse_device_kind(std::string_view text);

struct DeviceSpec {
  std::string id;  // unique within the node, e.g. "gpu3", "cpu0", "sw1"
  DeviceKind kind = DeviceKind::gpu;
  std::string where;  // input location for error messages
};

struct LinkSpec {
  std::string from;
  std::string to;
  std::string link_class;
  std::int64_t count = 1;               // parallel links (NVLink lanes bonded together)
  std::optional<double> bandwidth_Bps;  // per direction, overrides class x count
  std::string where;
};

struct NetworkSpec {
  std::string link_class;            // the NIC ports' class, e.g. "ib_ndr"
  std::int64_t nodes_per_leaf = 32;  // nodes whose rail-r NICs share one leaf switch
  double oversubscription = 1.0;     // leaf downlink capacity : uplink capacity
  // A third tier: nodes per pod (a multiple of nodes_per_leaf; 0: one pod, no third tier),
  // whose aggregated spine reaches the other pods through a core at pod_oversubscription
  // (the pod's node-facing capacity : its core uplink), e.g. 1:7 between the 3,072-GPU pods of
  // Meta's Llama 3 cluster.
  std::int64_t nodes_per_pod = 0;
  double pod_oversubscription = 1.0;
};

struct NodeTemplate {
  std::string name;
  std::string description;
  std::string origin;               // the file or preset it came from
  std::vector<DeviceSpec> devices;  // GPUs are numbered in the order they appear
  std::vector<LinkSpec> links;
  std::optional<NetworkSpec> network;
  std::vector<std::string> assumptions;     // what a reader had to assume (nvidia-smi input)
  std::optional<Bytes> host_memory;         // host RAM per node ("host_memory_GiB"), if stated
  CpuVendor cpu_vendor = CpuVendor::other;  // "cpu_vendor"; other when not stated
  // GPUs per host (one OS and one launcher) where a node is larger than a host: an NVL72
  // rack is one node (one NVLink domain) of 18 hosts of 4 GPUs. 0: the node is one host.
  std::int64_t gpus_per_host = 0;

  std::int64_t gpu_count() const;
  std::int64_t nic_count() const;
  // gpus_per_host when stated, else gpu_count(): what one launcher (torchrun) runs.
  std::int64_t launch_gpus_per_host() const;
  // The stated host memory per node, else kDefaultHostMemory.
  Bytes host_memory_or_default() const;
};

// Host RAM per node assumed when an input does not state it: a two-socket PCIe server with
// 8 DDR channels per socket and one 32 GiB DIMM per channel (docs/memory-model.md).
inline constexpr Bytes kDefaultHostMemory{512LL << 30};

struct Device {
  DeviceKind kind = DeviceKind::gpu;
  std::string name;            // "gpu3" in a single node, "n1/gpu3" across nodes
  std::int64_t host = -1;      // node index; -1 for network switches
  std::int64_t gpu_rank = -1;  // global GPU rank: host * gpus_per_node + local GPU index
  std::int64_t rail = -1;      // NIC index within its node, or the rail of a leaf switch
};

// One direction of a link. Boost stores each edge's Link on the heap, and a 2,048-node cluster
// has 1.5 x 10^5 of them, so the fields are narrow and the class is a number naming an
// interned string (32 bytes where a std::string member made 88).
struct Link {
  double bandwidth_Bps = 0;  // this direction, all `count` links
  double efficiency = 1;
  std::int32_t count = 1;
  std::uint32_t index = 0;  // this direction: 2 x physical_id() (+1 for the reverse)
  std::uint16_t class_id = 0;
  LinkKind kind = LinkKind::pcie;
  bool in_switch_reduction = false;

  double effective_Bps() const { return bandwidth_Bps * efficiency; }
  std::int64_t physical_id() const { return index / 2; }  // shared by the two directions
  // The interconnect class's name ("nvlink4"), interned for the process.
  std::string_view link_class() const;
  void set_link_class(std::string_view name);
};

using TopologyGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, Device, Link>;
using Vertex = TopologyGraph::vertex_descriptor;
using EdgeId = TopologyGraph::edge_descriptor;

class Topology {
 public:
  // Replicates `node` over `nodes` hosts; with more than one node, its NICs join the
  // network described by node.network. Throws on unknown link classes, duplicate devices
  // or links, links to unknown devices, and GPUs with no path between them.
  static Topology build(const NodeTemplate& node, std::int64_t nodes,
                        const InterconnectTable& table);

  const TopologyGraph& graph() const { return *graph_; }
  const NodeTemplate& node() const { return node_; }
  std::int64_t nodes() const { return nodes_; }
  std::int64_t gpus_per_node() const { return gpus_per_node_; }
  std::int64_t gpu_count() const { return static_cast<std::int64_t>(gpus_.size()); }
  Vertex gpu(std::int64_t rank) const;
  std::int64_t nics_per_node() const { return node_.nic_count(); }
  // NIC `rail` of node `host`.
  Vertex nic(std::int64_t host, std::int64_t rail) const;
  std::int64_t physical_link_count() const { return physical_links_; }
  std::int64_t directed_edge_count() const { return 2 * physical_links_; }
  // "n0/gpu0 -> n0/sw0 (pcie4, 31.5 GB/s)"
  std::string describe(EdgeId e) const;

 private:
  // Behind a pointer: Boost 1.74's adjacency_list has no move constructor, and a cluster graph
  // is too large to copy when a Topology is returned.
  std::unique_ptr<TopologyGraph> graph_ = std::make_unique<TopologyGraph>();
  NodeTemplate node_;
  std::int64_t nodes_ = 1;
  std::int64_t gpus_per_node_ = 0;
  std::int64_t physical_links_ = 0;
  std::vector<Vertex> gpus_;
  std::vector<Vertex> nics_;  // host * nics_per_node + rail
  friend class TopologyBuilder;
};

// Graphviz DOT of the topology: vertices by kind, links labelled with class and bandwidth.
std::string to_dot(const Topology& t);

}  // namespace dtplan
