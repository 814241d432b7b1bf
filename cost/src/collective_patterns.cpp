// The traffic of each collective algorithm, per byte of message, routed on the topology.
#include <algorithm>
#include <cmath>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

std::size_t kind_index(LinkKind k) {
  return static_cast<std::size_t>(k);
}

LinkKind slowest(LinkKind a, LinkKind b) {
  return latency_rank(a) >= latency_rank(b) ? a : b;
}

double ring_steps(Collective c, std::int64_t n) {
  return static_cast<double>(c == Collective::all_reduce ? 2 * (n - 1) : n - 1);
}

}  // namespace

// Traffic pipelined along the rings: each rank pushes `per_byte` bytes per message byte to
// the next at B, in `steps` sequential steps spread over the ring's hops.
CommModel::Pattern CommModel::along_rings(double per_byte, double steps) {
  const auto& plan = rings();
  Pattern p;
  p.seconds_per_byte = per_byte / plan.bandwidth_Bps;
  p.channels = static_cast<std::int64_t>(plan.rings.size());
  p.bottleneck = plan.bottleneck;
  // The first ring moves its share of the data over its bottleneck once per crossing.
  p.bottleneck.bytes *= per_byte * plan.rates_Bps.front() / plan.bandwidth_Bps;
  bool nvlink = false;
  bool pcie = false;
  for (const auto k : plan.hop_kinds) {
    p.hops_by_kind[kind_index(k)] += steps / static_cast<double>(plan.hop_kinds.size());
    nvlink |= k == LinkKind::nvlink;
    pcie |= k == LinkKind::pcie || k == LinkKind::socket;
  }
  p.nvlink_only = nvlink && !pcie;
  return p;
}

CommModel::Pattern CommModel::ring_pattern(Collective c) {
  return along_rings(bus_factor(c, n_), ring_steps(c, n_));
}

// NCCL's tree all-reduce: a chain inside each node (in ring order) and two binary trees over
// the nodes' heads, the second mirrored, each carrying half. The reduction flows up, then
// the result flows down: NCCL's tuning counts the two halves as taking a full S/B each
// (algbw = busbw / 2), so the phases are timed one after the other.
CommModel::Pattern CommModel::tree_pattern() {
  const std::int64_t g = std::min(n_, t_.gpus_per_node());
  const std::int64_t nodes_n = nodes();
  const auto& plan = rings();
  const double share = 1.0 / static_cast<double>(plan.rings.size());
  FlowLoad up(router_);
  FlowLoad down(router_);
  LinkKind chain_kind = LinkKind::nvlink;
  // One tree per channel, each over its ring's chain inside the nodes and its rail between
  // them, so the channels spread over every NIC as the rings do.
  for (std::size_t c = 0; c < plan.rings.size(); ++c) {
    const auto& ring = plan.rings[c];
    const std::vector<std::int64_t> chain(ring.begin(), ring.begin() + g);  // node 0's order
    const std::int64_t rail = plan.rails[c];
    for (std::int64_t k = 0; k < nodes_n; ++k) {
      for (std::int64_t i = 0; i + 1 < g; ++i) {
        const auto a = t_.gpu(chain[static_cast<std::size_t>(i)] + k * g);
        const auto b = t_.gpu(chain[static_cast<std::size_t>(i + 1)] + k * g);
        up.add({b, a, share});
        down.add({a, b, share});
        chain_kind = slowest(chain_kind, router_.route_shifted(a, b).route->slowest_kind);
      }
    }
    // Two binary trees over the node heads, the second mirrored, each carrying half.
    auto head = [&](std::int64_t node) { return t_.gpu(chain.front() + node * g); };
    for (std::int64_t k = 1; k < nodes_n; ++k) {
      const std::int64_t parent = (k - 1) / 2;
      const std::int64_t mk = nodes_n - 1 - k;
      const std::int64_t mparent = nodes_n - 1 - parent;
      for (const auto& [child, par] : {std::pair{k, parent}, std::pair{mk, mparent}}) {
        up.add({head(child), head(par), 0.5 * share, rail});
        down.add({head(par), head(child), 0.5 * share, rail});
      }
    }
  }
  const auto tu = up.time();
  const auto td = down.time();
  Pattern p;
  p.seconds_per_byte = tu.time_s + td.time_s;
  p.bottleneck = tu.time_s >= td.time_s ? tu.bottleneck : td.bottleneck;
  p.channels = static_cast<std::int64_t>(plan.rings.size());
  const double depth = nodes_n > 1 ? std::ceil(std::log2(static_cast<double>(nodes_n))) : 0.0;
  p.hops_by_kind[kind_index(chain_kind)] += 2.0 * static_cast<double>(g - 1);
  p.hops_by_kind[kind_index(LinkKind::network)] += 2.0 * depth;
  p.nvlink_only = chain_kind == LinkKind::nvlink;
  return p;
}

CommModel::Pattern CommModel::nvls_pattern() {
  const auto& g = t_.graph();
  Pattern p;
  double width = std::numeric_limits<double>::infinity();
  EdgeId narrowest{};
  for (std::int64_t r = 0; r < n_; ++r) {
    for (const auto e : boost::make_iterator_range(boost::out_edges(t_.gpu(r), g))) {
      if (g[boost::target(e, g)].kind == DeviceKind::nvswitch && g[e].bandwidth_Bps < width) {
        width = g[e].bandwidth_Bps;
        narrowest = e;
      }
    }
  }
  const double efficiency = table_.algorithm(CommAlgorithm::nvls).efficiency_for(nvlink_class_);
  const double per_byte = 1.0 + 1.0 / static_cast<double>(n_);
  p.seconds_per_byte = per_byte / (width * efficiency);
  p.bottleneck = describe_bottleneck(t_, narrowest, per_byte);
  p.bottleneck.achieved_Bps = width * efficiency;
  p.channels = 1;
  p.hops_by_kind[kind_index(LinkKind::nvlink)] = 1.0;
  p.nvlink_only = true;
  return p;
}

CommModel::Pattern CommModel::hierarchical_pattern() {
  const std::int64_t g = t_.gpus_per_node();
  const std::int64_t nodes_n = nodes();
  const auto& intra = context_->rings(g);
  const double gd = static_cast<double>(g);
  const double nd = static_cast<double>(nodes_n);
  const double intra_time = g > 1 ? 2.0 * (gd - 1.0) / gd / intra.bandwidth_Bps : 0.0;
  std::vector<Flow> flows;
  for (std::int64_t j = 0; j < g; ++j) {
    for (std::int64_t k = 0; k < nodes_n; ++k) {
      flows.push_back(
          {t_.gpu(k * g + j), t_.gpu(((k + 1) % nodes_n) * g + j), 2.0 * (nd - 1.0) / (nd * gd)});
    }
  }
  const auto inter = time_flows(router_, flows);
  Pattern p;
  p.seconds_per_byte = intra_time + inter.time_s;
  p.bottleneck = inter.time_s >= intra_time || g == 1 ? inter.bottleneck : intra.bottleneck;
  p.channels = g;
  LinkKind intra_kind = LinkKind::nvlink;
  for (const auto k : intra.hop_kinds)
    intra_kind = slowest(intra_kind, k);
  p.hops_by_kind[kind_index(intra_kind)] += 2.0 * (gd - 1.0);
  p.hops_by_kind[kind_index(LinkKind::network)] += 2.0 * (nd - 1.0);
  p.nvlink_only = intra_kind == LinkKind::nvlink;
  return p;
}

// One ring per local rank j over the nodes, through rail j's NICs, all at once: each hop
// carries 2(N-1)/N of the message.
// A ring per local rank across the nodes: an all-reduce sends 2(n-1)/n of the bytes along
// each ring hop in 2(n-1) steps, an all-gather or reduce-scatter (n-1)/n in n-1 steps.
CommModel::Pattern CommModel::replica_pattern(Collective c) {
  const std::int64_t g = t_.gpus_per_node();
  const std::int64_t nodes_n = nodes();
  const double nd = static_cast<double>(nodes_n);
  const double phases = c == Collective::all_reduce ? 2.0 : 1.0;
  std::vector<Flow> flows;
  for (std::int64_t j = 0; j < g; ++j) {
    for (std::int64_t k = 0; k < nodes_n; ++k) {
      flows.push_back(
          {t_.gpu(k * g + j), t_.gpu(((k + 1) % nodes_n) * g + j), phases * (nd - 1.0) / nd});
    }
  }
  const auto ft = time_flows(router_, flows);
  Pattern p;
  p.seconds_per_byte = ft.time_s;
  p.bottleneck = ft.bottleneck;
  p.channels = g;
  p.hops_by_kind[kind_index(LinkKind::network)] = phases * (nd - 1.0);
  p.nvlink_only = false;
  return p;
}

// torch.nn.DataParallel reduces gradients to GPU 0 (comm.reduce_add, an NCCL reduce) and
// broadcasts weights from it (comm.broadcast_coalesced, an NCCL broadcast): both pipelined
// along the ring, S / B each, n-1 steps each. An all-reduce this way costs 2 S / B against the
// ring all-reduce's 2(n-1)/n S / B.
CommModel::Pattern CommModel::ps_pattern(Collective c) {
  const double phases =
      (c != Collective::broadcast ? 1.0 : 0.0) + (c != Collective::reduce ? 1.0 : 0.0);
  return along_rings(phases, phases * static_cast<double>(n_ - 1));
}

CommModel::Pattern CommModel::all_to_all_pattern() {
  std::vector<Flow> flows;
  LinkKind kind = LinkKind::nvlink;
  const double share = 1.0 / static_cast<double>(n_);
  for (std::int64_t a = 0; a < n_; ++a) {
    for (std::int64_t b = 0; b < n_; ++b) {
      if (a == b) continue;
      flows.push_back({t_.gpu(a), t_.gpu(b), share});
      kind = slowest(kind, router_.route_shifted(t_.gpu(a), t_.gpu(b)).route->slowest_kind);
    }
  }
  const auto ft = time_flows(router_, flows);
  Pattern p;
  p.seconds_per_byte = ft.time_s;
  p.bottleneck = ft.bottleneck;
  p.channels = 1;
  p.hops_by_kind[kind_index(kind)] = static_cast<double>(n_ - 1);
  p.nvlink_only = kind == LinkKind::nvlink;
  return p;
}

}  // namespace dtplan::cost
