// Collective communication time over the topology, alpha-beta per algorithm and protocol:
//
//   time = base latency + sum of per-hop latencies along the algorithm's steps
//          + bytes the busiest link carries / (its achieved bandwidth x protocol fraction)
//
// The bandwidth term comes from routing the algorithm's traffic on the graph (rings from
// plan_rings, trees and point-to-point patterns as flows); the constants come from
// data/interconnect.json. The fastest protocol (LL, LL128, Simple) is used, and with
// `auto` the fastest algorithm, as NCCL's tuner does. Bandwidths are reported the way
// nccl-tests defines them: algbw = size / time; busbw = algbw x 2(n-1)/n for all-reduce,
// x (n-1)/n for all-gather, reduce-scatter and all-to-all, x 1 for broadcast and reduce.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/cost/rings.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::cost {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all };

// ring, tree (NCCL's double binary tree across nodes, chains inside), nvls (in-switch
// reduction), hierarchical (reduce-scatter in node, all-reduce across, all-gather in node),
// ps (single-process DataParallel: reduce to GPU 0, broadcast back), p2p (all-to-all's
// pairwise sends), auto (the fastest of
// ring, tree and nvls: what NCCL would choose among).
enum class Algorithm { ring, tree, nvls, hierarchical, ps, p2p, automatic };

std::string_view name_of(Collective c);
std::string_view name_of(Algorithm a);
Collective parse_collective(std::string_view text);
Algorithm parse_algorithm(std::string_view text);

// nccl-tests' bus-bandwidth factor for n ranks.
double bus_factor(Collective c, std::int64_t n);

struct CollectiveEstimate {
  Collective collective = Collective::all_reduce;
  Algorithm algorithm = Algorithm::ring;  // the one used (never automatic)
  Protocol protocol = Protocol::simple;
  Bytes size;
  std::int64_t gpus = 0;
  double time_s = 0;
  double latency_s = 0;  // the size-independent part
  double algbw_Bps = 0;
  double busbw_Bps = 0;
  std::vector<std::int64_t> ring;  // the first ring's GPU order (ring algorithms)
  std::int64_t channels = 0;
  Bottleneck bottleneck;  // bytes: the bytes that cross it for this collective
};

// Collectives among the first `gpus` GPUs of a topology. Holds the router and the ring plan,
// computed once; estimates are cheap after that.
class CommModel {
 public:
  CommModel(const Topology& t, const InterconnectTable& table, std::int64_t gpus);

  // Throws if the algorithm does not apply (tree for all-to-all, nvls without an NVSwitch
  // with in-switch reduction, hierarchical within one node, ps for all-to-all).
  CollectiveEstimate estimate(Collective c, Bytes size, Algorithm a = Algorithm::automatic);
  std::vector<Algorithm> applicable(Collective c) const;
  // All-reduce among the GPUs of equal local rank across nodes, all local ranks at once
  // (hybrid sharding's replica groups): a ring per local rank through its rail.
  CollectiveEstimate replica_all_reduce(Bytes size);

  const RingPlan& rings();
  const Topology& topology() const { return t_; }
  std::int64_t gpus() const { return n_; }
  std::int64_t nodes() const;

 private:
  // One algorithm's traffic for one collective, per byte of message: the seconds the
  // busiest link needs (before the protocol's bandwidth fraction), that link, and the
  // sequential hops by link kind that set the latency. Cached per (collective, algorithm).
  struct Pattern {
    double seconds_per_byte = 0;
    Bottleneck bottleneck;  // bytes: per byte of message
    std::array<double, 4> hops_by_kind{};
    std::int64_t channels = 0;
    bool nvlink_only = false;  // LL128 is offered only over NVLink, as NCCL does
  };
  const Pattern& pattern(Collective c, Algorithm a);
  Pattern along_rings(double per_byte, double steps);
  Pattern ring_pattern(Collective c);
  Pattern tree_pattern();
  Pattern nvls_pattern();
  Pattern hierarchical_pattern();
  Pattern ps_pattern(Collective c);
  Pattern replica_pattern();
  Pattern all_to_all_pattern();
  CollectiveEstimate evaluate(Collective c, Bytes size, Algorithm a);

  const Topology& t_;
  const InterconnectTable& table_;
  std::int64_t n_;
  Router router_;
  std::optional<RingPlan> rings_;
  std::map<std::pair<Collective, Algorithm>, Pattern> patterns_;
};

}  // namespace dtplan::cost
