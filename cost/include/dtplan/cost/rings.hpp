// Ring construction: the GPU orders (one per channel) whose ring sends the most bytes per
// second per rank, with every ring hop routed over the topology and link sharing counted.
//
// A ring whose hops cross directed link e (of achieved bandwidth cap_e) load_e times can
// run at rate r = min_e cap_e / load_e: each rank pushes r bytes per second to the next.
// NCCL splits a buffer evenly over its channels, so channels run at one rate r, and
//     B = channels x r   with   r * sum_c load_c(e) <= cap_e  for every link e;
// rings may repeat (two channels over DGX-1's doubled NVLinks) and use different links.
// A ring over GPUs 0-3 | 4-7 split across two sockets crosses the socket link once in each
// direction, and every other ring crosses it too, so there B = the socket link's bandwidth.
//
// Search: all orders (first GPU fixed) for up to 9 GPUs in one node; otherwise greedy
// widest-next-hop orders improved by 2-opt. Across nodes, each channel crosses between
// nodes through the NICs of one rail (NCCL's rings leave and enter a node by the same NIC
// index); candidates are the node's rings, cut at every position, in both directions, on
// every rail, chosen on two nodes and then laid over all of them.
// Across nodes the search is hierarchical: the rings of one node, cut where the ring leaves
// the node (chosen on two nodes), concatenated over all nodes.
#pragma once

#include <cstdint>
#include <vector>

#include "dtplan/cost/routing.hpp"

namespace dtplan::cost {

struct RingOptions {
  std::int64_t max_channels = 32;     // NCCL's MAXCHANNELS
  std::int64_t exhaustive_limit = 9;  // GPUs per node searched exhaustively
};

struct RingPlan {
  std::vector<std::vector<std::int64_t>> rings;  // GPU ranks in ring order, one per channel
  std::vector<double> rates_Bps;                 // each channel's rate
  std::vector<std::int64_t> rails;               // NIC rail between nodes; -1 in one node
  double bandwidth_Bps = 0;                      // B above
  Bottleneck bottleneck;  // the link that limits the first ring; bytes = its hops over it
  std::int64_t bottleneck_crossings = 0;  // the first ring's hops over that link, both ways
  std::vector<LinkKind> hop_kinds;        // slowest link kind of each hop of the first ring
  bool exhaustive = false;
  std::int64_t candidates = 0;  // orders evaluated
};

// Rings over `gpus` (global ranks; all in one node, or whole nodes of equal size). One GPU
// has no ring: one channel holding that GPU, at rate 0, bandwidth 0 and no bottleneck.
RingPlan plan_rings(Router& router, const std::vector<std::int64_t>& gpus,
                    const RingOptions& options = {});

// What every ring plan over whole nodes starts from, whatever their number: the rings inside
// the first node, and the channels chosen on two nodes (all nodes are alike), each leaving its
// node through a NIC rail. Planned for one topology under one set of options.
struct NodeChannels {
  RingPlan intra, pair;
  const Topology* topology = nullptr;
  RingOptions options;
};
NodeChannels plan_node_channels(Router& router, const RingOptions& options = {});
// plan_rings over `gpus` (whole nodes from GPU 0, or one node), with the node channels planned
// once for many GPU counts: the same plan. Throws when `node` was planned for another topology
// or under other options.
RingPlan plan_rings(Router& router, const std::vector<std::int64_t>& gpus, const NodeChannels& node,
                    const RingOptions& options = {});

// The rate of one ring on its own, and the link that limits it.
double ring_rate(Router& router, const std::vector<std::int64_t>& ring, std::int64_t rail = -1,
                 Bottleneck* bottleneck = nullptr, std::int64_t* crossings = nullptr);

// The route of one ring hop: within a node the widest route (shifted from node 0's where the
// node is laid out alike); between nodes through `rail`.
ShiftedRoute ring_hop(Router& router, std::int64_t from, std::int64_t to, std::int64_t rail);

}  // namespace dtplan::cost
