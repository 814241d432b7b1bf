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
#include <tuple>
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

// One algorithm's traffic for one collective over the first n GPUs, per byte of message: the
// seconds the busiest link needs (before the protocol's bandwidth fraction), that link, and
// the sequential hops by link kind that set the latency.
struct CommPattern {
  double seconds_per_byte = 0;
  Bottleneck bottleneck;  // bytes: per byte of message
  std::array<double, 4> hops_by_kind{};
  std::int64_t channels = 0;
  bool nvlink_only = false;  // LL128 is offered only over NVLink, as NCCL does
};

// What every collective model of one topology can share: the routes (they depend only on
// the graph) and the ring plan over the first n GPUs, for each n asked. A planner that
// models many group sizes on a cluster of thousands of nodes routes each hop once.
class CommContext {
 public:
  explicit CommContext(const Topology& t) : router_(t) {}
  Router& router() { return router_; }
  const Topology& topology() const { return router_.topology(); }
  // Rings over GPUs 0 .. gpus-1, planned on first use.
  const RingPlan& rings(std::int64_t gpus);
  // Patterns by (GPUs, collective, algorithm); Algorithm::automatic keys the replica
  // all-reduce of hybrid sharding.
  using PatternKey = std::tuple<std::int64_t, Collective, Algorithm>;
  std::map<PatternKey, CommPattern>& patterns() { return patterns_; }
  // Patterns also depend on the interconnect table (NVLS efficiency): one table per context.
  void bind(const InterconnectTable& table);

 private:
  Router router_;
  std::map<std::int64_t, RingPlan> rings_;
  std::optional<NodeChannels> node_channels_;  // planned with the first multi-node count
  std::map<PatternKey, CommPattern> patterns_;
  const InterconnectTable* table_ = nullptr;
};

// The most GPUs an all-to-all is priced over: it is routed pair by pair (n (n - 1) flows).
inline constexpr std::int64_t kMaxAllToAllGpus = 1024;

// Collectives among the first `gpus` GPUs of a topology. Uses the routes and ring plans of
// its context (its own when none is given), computed once; estimates are cheap after that.
class CommModel {
 public:
  CommModel(const Topology& t, const InterconnectTable& table, std::int64_t gpus,
            std::shared_ptr<CommContext> context = nullptr);

  // Throws if the algorithm does not apply (tree for all-to-all, nvls without an NVSwitch
  // with in-switch reduction, hierarchical within one node, ps for all-to-all).
  CollectiveEstimate estimate(Collective c, Bytes size, Algorithm a = Algorithm::automatic);
  std::vector<Algorithm> applicable(Collective c) const;
  // All-reduce among the GPUs of equal local rank across nodes, all local ranks at once
  // (hybrid sharding's replica groups): a ring per local rank through its rail.
  CollectiveEstimate replica_all_reduce(Bytes size);
  // The same for an all-reduce, all-gather or reduce-scatter of `size` bytes per group: the
  // groups of one GPU per node that a strided layout group (tensor-parallel ranks in between)
  // makes, each through its own rail. Throws for other collectives.
  CollectiveEstimate replica_estimate(Collective c, Bytes size);

  const RingPlan& rings();
  const Topology& topology() const { return t_; }
  std::int64_t gpus() const { return n_; }
  std::int64_t nodes() const;

 private:
  using Pattern = CommPattern;
  const Pattern& pattern(Collective c, Algorithm a);
  Pattern along_rings(double per_byte, double steps);
  Pattern ring_pattern(Collective c);
  Pattern tree_pattern();
  Pattern nvls_pattern();
  Pattern hierarchical_pattern();
  Pattern ps_pattern(Collective c);
  Pattern replica_pattern(Collective c);
  Pattern all_to_all_pattern();
  CollectiveEstimate evaluate(Collective c, Bytes size, Algorithm a);
  double ring_plateau_factor(const ProtocolCost& pc, Collective c, CommAlgorithm algo, double bytes,
                             std::int64_t channels) const;

  const Topology& t_;
  const InterconnectTable& table_;
  std::int64_t n_;
  std::shared_ptr<CommContext> context_;
  Router& router_;
  std::string nvlink_class_;  // the NVLink class between the GPUs, empty without NVLink
};

}  // namespace dtplan::cost
