// Collective algorithms as traffic patterns on the topology, timed per protocol.
//
// Per byte of message (S = 1), with n ranks, g GPUs per node, N nodes:
//   ring        each rank pushes 2(n-1)/n (all-reduce), (n-1)/n (reduce-scatter,
//               all-gather) or 1 (broadcast, reduce) around the rings at B (plan_rings);
//               2(n-1) or n-1 sequential steps
//   tree        per channel, a chain inside each node and two mirrored binary trees over
//               the nodes carrying 1/2 each; the reduction up, then the result down (NCCL
//               times the halves one after the other); 2((g-1) + ceil(log2 N)) steps;
//               across nodes no channel beats NCCL's per-channel cap for the GPU generation
//   nvls        each GPU sends its buffer to the NVSwitch, which reduces, and receives the
//               result: (1 + 1/n) over its switch link; one step
//   hierarchical reduce-scatter in every node, g concurrent all-reduces of 1/g across nodes,
//               all-gather in every node; 2(g-1) + 2(N-1) steps
//   ps          DataParallel: reduce to GPU 0, then broadcast from it, each pipelined along
//               the ring (NCCL reduce and broadcast): 2 / B; 2(n-1) steps
//   all-to-all  every ordered pair exchanges 1/n; n-1 steps
#include "dtplan/cost/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan::cost {

namespace {

constexpr std::array<std::pair<Collective, std::string_view>, 6> kCollectives{{
    {Collective::all_reduce, "allreduce"},
    {Collective::reduce_scatter, "reduce-scatter"},
    {Collective::all_gather, "all-gather"},
    {Collective::broadcast, "broadcast"},
    {Collective::reduce, "reduce"},
    {Collective::all_to_all, "all-to-all"},
}};

constexpr std::array<std::pair<Algorithm, std::string_view>, 7> kAlgorithms{{
    {Algorithm::ring, "ring"},
    {Algorithm::tree, "tree"},
    {Algorithm::nvls, "nvls"},
    {Algorithm::hierarchical, "hierarchical"},
    {Algorithm::ps, "ps"},
    {Algorithm::p2p, "p2p"},
    {Algorithm::automatic, "auto"},
}};

template <class E, std::size_t N>
E parse_named(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view text,
              std::string_view what) {
  std::vector<std::string> names;
  for (const auto& [value, name] : table) {
    if (name == text) return value;
    names.emplace_back(name);
  }
  throw Error(unknown_name_message(what, text, names));
}

}  // namespace

std::string_view name_of(Collective c) {
  for (const auto& [value, name] : kCollectives) {
    if (value == c) return name;
  }
  return "?";
}

std::string_view name_of(Algorithm a) {
  for (const auto& [value, name] : kAlgorithms) {
    if (value == a) return name;
  }
  return "?";
}

Collective parse_collective(std::string_view text) {
  if (text == "all-reduce" || text == "all_reduce") return Collective::all_reduce;
  if (text == "reducescatter" || text == "reduce_scatter") return Collective::reduce_scatter;
  if (text == "allgather" || text == "all_gather") return Collective::all_gather;
  if (text == "alltoall" || text == "all_to_all") return Collective::all_to_all;
  return parse_named(kCollectives, text, "collective");
}

Algorithm parse_algorithm(std::string_view text) {
  return parse_named(kAlgorithms, text, "algorithm");
}

double bus_factor(Collective c, std::int64_t n) {
  const double nd = static_cast<double>(n);
  switch (c) {
    case Collective::all_reduce:
      return 2.0 * (nd - 1.0) / nd;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
      return (nd - 1.0) / nd;
    case Collective::broadcast:
    case Collective::reduce:
      return 1.0;
  }
  return 1.0;
}

const RingPlan& CommContext::rings(std::int64_t gpus) {
  if (const auto it = rings_.find(gpus); it != rings_.end()) return it->second;
  std::vector<std::int64_t> ranks(static_cast<std::size_t>(gpus));
  std::iota(ranks.begin(), ranks.end(), std::int64_t{0});
  const auto& t = router_.topology();
  if (gpus <= t.gpus_per_node() || gpus % t.gpus_per_node() != 0)  // plan_rings says why not
    return rings_[gpus] = plan_rings(router_, ranks);
  // Over whole nodes every count starts from the same node rings and two-node channels.
  if (!node_channels_) node_channels_ = plan_node_channels(router_);
  return rings_[gpus] = plan_rings(router_, ranks, *node_channels_);
}

void CommContext::bind(const InterconnectTable& table) {
  if (table_ && table_ != &table) {
    throw Error("internal: a collective context shared by two interconnect tables");
  }
  table_ = &table;
}

CommModel::CommModel(const Topology& t, const InterconnectTable& table, std::int64_t gpus,
                     std::shared_ptr<CommContext> context)
    : t_(t),
      table_(table),
      n_(gpus),
      context_(context ? std::move(context) : std::make_shared<CommContext>(t)),
      router_(context_->router()) {
  if (&context_->topology() != &t) {
    throw Error("internal: a collective model given the context of another topology");
  }
  context_->bind(table);
  if (gpus < 1 || gpus > t.gpu_count()) {
    throw FieldError("gpus", std::to_string(gpus) + ", but the topology has " +
                                 std::to_string(t.gpu_count()) + " GPUs (" +
                                 std::to_string(t.nodes()) + " node(s) of " +
                                 std::to_string(t.gpus_per_node()) + ")");
  }
  for (const auto& link : t.node().links) {
    if (table.find(link.link_class).kind == LinkKind::nvlink) {
      nvlink_class_ = link.link_class;
      break;
    }
  }
  if (gpus > t.gpus_per_node() && gpus % t.gpus_per_node() != 0) {
    throw FieldError("gpus", std::to_string(gpus) +
                                 " spans nodes: across nodes use whole nodes (a multiple of " +
                                 std::to_string(t.gpus_per_node()) + ")");
  }
}

std::int64_t CommModel::nodes() const {
  return ceil_div(n_, t_.gpus_per_node());
}

const RingPlan& CommModel::rings() {
  return context_->rings(n_);
}

std::vector<Algorithm> CommModel::applicable(Collective c) const {
  if (c == Collective::all_to_all) return {Algorithm::p2p};
  std::vector<Algorithm> out{Algorithm::ring};
  if (c == Collective::all_reduce) {
    out.push_back(Algorithm::tree);
    if (nodes() > 1) out.push_back(Algorithm::hierarchical);
    // NVLS: one node whose GPUs all hang off an NVSwitch that reduces in the switch.
    const auto& g = t_.graph();
    bool nvls = nodes() == 1 && n_ > 1;
    for (std::int64_t r = 0; r < n_ && nvls; ++r) {
      bool found = false;
      for (const auto e : boost::make_iterator_range(boost::out_edges(t_.gpu(r), g))) {
        found |= g[boost::target(e, g)].kind == DeviceKind::nvswitch && g[e].in_switch_reduction;
      }
      nvls = found;
    }
    if (nvls) out.push_back(Algorithm::nvls);
  }
  if (c == Collective::all_reduce || c == Collective::broadcast || c == Collective::reduce) {
    out.push_back(Algorithm::ps);
  }
  return out;
}

const CommModel::Pattern& CommModel::pattern(Collective c, Algorithm a) {
  auto& patterns = context_->patterns();
  const auto key = std::make_tuple(n_, c, a);
  if (const auto it = patterns.find(key); it != patterns.end()) return it->second;
  Pattern p;
  if (c == Collective::all_to_all) {
    p = all_to_all_pattern();
  } else {
    switch (a) {
      case Algorithm::ring:
        p = ring_pattern(c);
        break;
      case Algorithm::tree:
        p = tree_pattern();
        break;
      case Algorithm::nvls:
        p = nvls_pattern();
        break;
      case Algorithm::hierarchical:
        p = hierarchical_pattern();
        break;
      case Algorithm::ps:
        p = ps_pattern(c);
        break;
      case Algorithm::p2p:
        p = all_to_all_pattern();
        break;
      case Algorithm::automatic:
        throw Error("internal: no pattern for auto");
    }
  }
  return patterns[key] = p;
}

CollectiveEstimate CommModel::estimate(Collective c, Bytes size, Algorithm a) {
  if (size.value < 1) throw Error("message size must be at least 1 byte");
  const auto allowed = applicable(c);
  if (a != Algorithm::automatic && std::find(allowed.begin(), allowed.end(), a) == allowed.end()) {
    std::vector<std::string> names;
    names.reserve(allowed.size());
    for (const auto x : allowed)
      names.emplace_back(name_of(x));
    throw FieldError("algorithm", std::string(name_of(a)) + " does not apply to " +
                                      std::string(name_of(c)) + " on " + std::to_string(n_) +
                                      " GPUs of this topology (applicable: " + join(names, ", ") +
                                      ")");
  }
  if (c == Collective::all_to_all && n_ > kMaxAllToAllGpus) {
    throw Error("all-to-all is modelled pair by pair, up to " + std::to_string(kMaxAllToAllGpus) +
                " GPUs; " + std::to_string(n_) + " asked");
  }
  if (a != Algorithm::automatic) return evaluate(c, size, a);
  std::optional<CollectiveEstimate> best;
  for (const auto x : allowed) {
    // NCCL chooses among ring, tree and NVLS; ps and hierarchical are for comparison.
    if (x == Algorithm::ps || x == Algorithm::hierarchical) continue;
    auto e = evaluate(c, size, x);
    if (!best || e.time_s < best->time_s) best = e;
  }
  return *best;
}

CollectiveEstimate CommModel::replica_all_reduce(Bytes size) {
  return replica_estimate(Collective::all_reduce, size);
}

CollectiveEstimate CommModel::replica_estimate(Collective c, Bytes size) {
  if (c != Collective::all_reduce && c != Collective::all_gather &&
      c != Collective::reduce_scatter) {
    throw Error("replica groups run all-reduce, all-gather or reduce-scatter, not " +
                std::string(name_of(c)));
  }
  if (nodes() < 2) {
    CollectiveEstimate e;
    e.collective = c;
    e.size = size;
    return e;  // one node: no replicas to reduce across
  }
  auto& patterns = context_->patterns();
  const auto key = std::make_tuple(n_, c, Algorithm::automatic);
  if (patterns.count(key) == 0) patterns[key] = replica_pattern(c);
  return evaluate(c, size, Algorithm::automatic);
}

namespace {

// NCCL's size correction of a protocol's bandwidth (the tree's treeCorrectionFactor): the
// entry for floor(log2(bytes / 64)), 1 beyond the table.
double size_factor(const ProtocolCost& pc, std::int64_t bytes) {
  std::size_t k = 0;
  for (std::int64_t n = bytes >> 6; n > 1; n >>= 1)
    ++k;
  return k < pc.bandwidth_factor_by_size.size() ? pc.bandwidth_factor_by_size[k] : 1.0;
}

}  // namespace

// NCCL's "plateau effect of ring": an all-reduce ring across nodes with at least 64 bytes per
// channel and rank pays its latency times the generation's factor (1.9 before Ampere, 1.4
// since); 1 otherwise.
double CommModel::ring_plateau_factor(const ProtocolCost& pc, Collective c, CommAlgorithm algo,
                                      double bytes, std::int64_t channels) const {
  if (algo != CommAlgorithm::ring || c != Collective::all_reduce || nodes() < 2) return 1.0;
  const auto factor = pc.multi_node_all_reduce_latency_factor.find(nvlink_class_);
  if (factor == pc.multi_node_all_reduce_latency_factor.end()) return 1.0;
  const double per_channel_rank =
      bytes / static_cast<double>(std::max<std::int64_t>(1, channels) * n_);
  return per_channel_rank >= 64 ? factor->second : 1.0;
}

CollectiveEstimate CommModel::evaluate(Collective c, Bytes size, Algorithm a) {
  CollectiveEstimate e;
  e.collective = c;
  e.algorithm = a;
  e.size = size;
  e.gpus = n_;
  if (n_ == 1) return e;  // nothing to communicate
  const auto& p = pattern(c, a);
  const auto table_algo = a == Algorithm::tree   ? CommAlgorithm::tree
                          : a == Algorithm::nvls ? CommAlgorithm::nvls
                                                 : CommAlgorithm::ring;
  const auto& cost = table_.algorithm(table_algo);
  const double bytes = static_cast<double>(size.value);
  e.time_s = std::numeric_limits<double>::infinity();
  for (const auto proto : kProtocols) {
    const auto& pc = cost.protocols[static_cast<std::size_t>(proto)];
    if (!pc || (proto == Protocol::ll128 && !p.nvlink_only)) continue;
    double latency = pc->base_latency_s;
    // Rings across nodes: no step is quicker than the network proxy's per-step overhead.
    const double floor_s =
        table_algo == CommAlgorithm::ring && nodes() > 1
            ? pc->multi_node_step_s[static_cast<std::size_t>(t_.node().cpu_vendor)]
            : 0.0;
    for (std::size_t k = 0; k < 4; ++k)
      latency += p.hops_by_kind[k] * std::max(pc->hop_latency_s[k], floor_s);
    latency *= ring_plateau_factor(*pc, c, table_algo, bytes, p.channels);
    const double fraction = nodes() == 1 ? pc->bandwidth_fraction_one_node : pc->bandwidth_fraction;
    double transfer_s = bytes * p.seconds_per_byte / fraction;
    // A tree (any protocol) or an LL128 ring across nodes runs no channel faster than NCCL's
    // cap for the GPU generation; its channels are the rings or trees through the NICs.
    if (const auto cap = pc->channel_max_Bps_across_nodes.find(nvlink_class_);
        nodes() > 1 && cap != pc->channel_max_Bps_across_nodes.end()) {
      const double bus_Bps = static_cast<double>(p.channels) * cap->second[nodes() == 2 ? 0 : 1];
      transfer_s = std::max(transfer_s, bytes * bus_factor(c, n_) / bus_Bps);
    }
    transfer_s /= size_factor(*pc, size.value);
    const double time = latency + transfer_s;
    if (time < e.time_s) {
      e.time_s = time;
      e.latency_s = latency;
      e.protocol = proto;
    }
  }
  e.algbw_Bps = bytes / e.time_s;
  e.busbw_Bps = e.algbw_Bps * bus_factor(c, n_);
  e.channels = p.channels;
  e.bottleneck = p.bottleneck;
  e.bottleneck.bytes *= bytes;
  e.bottleneck.time_s = e.bottleneck.bytes / e.bottleneck.achieved_Bps;
  if (a == Algorithm::ring || a == Algorithm::hierarchical) e.ring = rings().rings.front();
  if (a == Algorithm::automatic) e.algorithm = Algorithm::ring;  // replica rings
  return e;
}

}  // namespace dtplan::cost
