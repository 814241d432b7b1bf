// Routing on the topology graph and the time of concurrent flows over shared links.
//
// A route between two devices is the path of widest bottleneck (by achieved bandwidth),
// and among those the one with fewest hops. A route passes through another GPU only from
// NVLink to NVLink (NCCL's PATH_NVB), and stays inside the node unless the endpoints are on
// different nodes. Collectives' rings and trees cross between nodes through the NICs of one
// rail on both sides, as NCCL's inter-node channels do (route_via_rail); point-to-point
// traffic leaves through the sender's nearest NIC and arrives through the receiver's (among
// equally near NICs, the one whose index matches the GPU's local index).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "dtplan/model/topology.hpp"

namespace dtplan::cost {

// A directed edge by its Link::index (Router::edge gives the graph's edge): 4 bytes where an
// EdgeId takes 24, and a route of a 16,384-GPU cluster's rings is cached 10^5 times.
using EdgeIndex = std::uint32_t;

struct Route {
  std::vector<EdgeIndex> edges;
  double bottleneck_Bps = 0;                 // smallest achieved bandwidth on the path
  LinkKind slowest_kind = LinkKind::nvlink;  // for latency: network > pcie/socket > nvlink
};

// A route read with its edge indices shifted: a route inside node k > 0 is node 0's route, each
// edge index plus `shift` (2 x the node's links x k), so one copy of a node's routes serves
// every node alike.
struct ShiftedRoute {
  const Route* route = nullptr;
  EdgeIndex shift = 0;
  template <class F>
  void for_each_edge(F&& f) const {
    for (const auto k : route->edges)
      f(static_cast<EdgeIndex>(k + shift));
  }
};

// A route read from its parts, nothing joined or stored for the pair: between nodes, each end's
// way to or from its NIC (node 0's, shifted), the NICs' network ports and the switches' way
// between them. A pattern of many flows across 2,048 nodes, each used once, reads these rather
// than caching 10^5 joined routes.
struct RouteParts {
  std::array<ShiftedRoute, 5> parts{};
  std::size_t count = 0;
  double bottleneck_Bps = 1e30;              // as Route's, over every part
  LinkKind slowest_kind = LinkKind::nvlink;  // as Route's: the first of the highest rank
  template <class F>
  void for_each_edge(F&& f) const {
    for (std::size_t i = 0; i < count; ++i)
      parts[i].for_each_edge(f);
  }
};

// Latency rank of a link kind: a hop costs the latency of its slowest kind.
int latency_rank(LinkKind k);

class Router {
 public:
  explicit Router(const Topology& t);
  // Cached; throws if no route exists (disconnected devices).
  const Route& route(Vertex src, Vertex dst);
  // route(), read as node 0's route shifted where both ends sit in node k > 0 laid out as node
  // 0 is: a 2,048-node ring plan then caches a node's routes once, not once per node.
  ShiftedRoute route_shifted(Vertex src, Vertex dst);
  // Between GPUs on different nodes through NIC `rail` of both nodes.
  const Route& route_via_rail(Vertex src_gpu, Vertex dst_gpu, std::int64_t rail);
  // The same route read from its parts, none stored for the pair.
  RouteParts via_rail_parts(Vertex src_gpu, Vertex dst_gpu, std::int64_t rail);
  // The rail a GPU's traffic to other nodes uses by default.
  std::int64_t preferred_rail(Vertex gpu);
  // Whether GPU `gpu` (any node) reaches NIC `rail` of its own node: every NIC of a PCIe
  // server, only its own tray's on an NVL72 rack. Cached by the GPU's place in the node.
  bool reaches_rail(Vertex gpu, std::int64_t rail);
  const Topology& topology() const { return t_; }
  // The directed edge of each Link::index, and its achieved bandwidth (bytes/s).
  EdgeId edge(std::size_t index) const { return edges_[index]; }
  const Link& link(EdgeIndex index) const { return t_.graph()[edges_[index]]; }
  const std::vector<double>& capacities_Bps() const { return capacity_Bps_; }
  // Graph searches run so far (one per route not found in the cache nor shifted from node 0):
  // what routing a cluster costs, independent of the machine's speed.
  std::int64_t searches() const { return searches_; }

 private:
  bool may_enter(EdgeId e, Vertex src, Vertex dst) const;
  bool relays_to(EdgeId e, Vertex dst) const;
  Route through_nics(Vertex src, Vertex out, Vertex in, Vertex dst);
  RouteParts parts_through_nics(Vertex src, Vertex out, Vertex in, Vertex dst);
  void add_part(RouteParts& p, ShiftedRoute part) const;
  void add_edge(RouteParts& p, EdgeId e) const;
  double widest_bottleneck(Vertex src, Vertex dst);
  Route fewest_hops(Vertex src, Vertex dst, double min_Bps);

  Route direct(Vertex src, Vertex dst);
  // Every node is the same template laid out in the same order (node k's devices and links
  // follow node 0's at a fixed stride), so a route inside node k is node 0's route shifted.
  std::optional<Route> shifted_from_node0(Vertex src, Vertex dst);
  // Whether node `host`'s devices and links follow node 0's at the fixed strides, and node 0's
  // links are the first (checked once per node).
  bool laid_out_as_node0(std::size_t host);

  // A pair of vertices (and a rail) as one hash key.
  struct KeyHash {
    std::size_t operator()(const std::pair<Vertex, Vertex>& k) const;
    std::size_t operator()(const std::tuple<Vertex, Vertex, std::int64_t>& k) const;
  };

  const Topology& t_;
  Route unit_;  // edge index 0 alone: one edge read as a part is unit_ shifted by its index
  std::unordered_map<std::pair<Vertex, Vertex>, Route, KeyHash> cache_;
  std::unordered_map<std::tuple<Vertex, Vertex, std::int64_t>, Route, KeyHash> rail_cache_;
  std::vector<std::int64_t> preferred_rail_;  // by vertex; -2 until computed
  std::vector<signed char> reaches_rail_;     // local GPU x rail; -1 until computed
  std::vector<signed char> alike_;            // by node: -1 until laid_out_as_node0 checks
  std::vector<EdgeId> edges_;                 // by Link::index
  std::vector<double> capacity_Bps_;          // by Link::index
  std::size_t devices_per_node_ = 0;          // vertex stride between nodes
  std::size_t links_per_node_ = 0;            // physical-link stride between nodes
  // Scratch arrays reused across searches; `stamp_` marks entries valid for this search.
  std::vector<std::uint32_t> stamp_;
  std::vector<double> best_;
  std::vector<EdgeId> parent_;
  std::uint32_t generation_ = 0;
  std::int64_t searches_ = 0;
};

// A directed edge with the bytes that cross it.
struct LinkLoad {
  EdgeId edge;
  double bytes = 0;
};

// The busiest link of a set of flows, by time (bytes / achieved bandwidth).
struct Bottleneck {
  std::string from;
  std::string to;
  std::string kind;          // link kind: nvlink, pcie, socket, network
  std::string link_class;    // e.g. pcie4
  double bandwidth_Bps = 0;  // nominal, this direction
  double achieved_Bps = 0;   // bandwidth x efficiency
  double bytes = 0;          // bytes that cross it
  double time_s = 0;
};

struct Flow {
  Vertex src;
  Vertex dst;
  double bytes;
  std::int64_t rail = -1;  // between nodes: through this rail's NICs; -1: each side's own
};

// Concurrent flows: each link moves the sum of the bytes routed over it; the flows finish
// when the busiest link does (the bandwidth part of a collective's time).
struct FlowTime {
  double time_s = 0;
  LinkKind slowest_kind = LinkKind::nvlink;  // of any flow's route
  Bottleneck bottleneck;
};

FlowTime time_flows(Router& router, const std::vector<Flow>& flows);

// time_flows one flow at a time, the flows not held: the trees of 2,048 nodes' eight channels
// are 1.8 x 10^5 flows each way, 6 MB as a vector, where the bytes per link are 1.2 MB.
class FlowLoad {
 public:
  explicit FlowLoad(Router& router);
  void add(const Flow& f);
  FlowTime time() const;

 private:
  Router& router_;
  std::vector<double> bytes_;  // by EdgeIndex
  LinkKind slowest_kind_ = LinkKind::nvlink;
};

Bottleneck describe_bottleneck(const Topology& t, EdgeId e, double bytes);

}  // namespace dtplan::cost
