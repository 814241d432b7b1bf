// Ring search over the topology graph.
#include "dtplan/cost/rings.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

// The directed edges a ring crosses, with how many of its hops cross each.
struct RingLoad {
  std::vector<std::pair<std::size_t, std::int64_t>> edges;  // (edge index, hops)
  std::int64_t link_hops = 0;  // links crossed in all, to prefer shorter rings on ties
  std::int64_t speeds = 0;     // distinct link bandwidths it crosses: 1 for a uniform ring
};

struct Candidate {
  std::vector<std::int64_t> ring;
  std::int64_t rail = -1;
};

// Hop counts per edge index, zero between uses: a ring of a whole cluster touches a small
// part of the graph, so only the touched entries are visited and reset.
struct HopScratch {
  explicit HopScratch(std::size_t edges) : count(edges, 0) {}
  std::vector<std::int64_t> count;
  std::vector<std::size_t> touched;
};

RingLoad ring_load(Router& router, const Candidate& c, HopScratch& scratch) {
  const auto& ring = c.ring;
  try {
    for (std::size_t i = 0; i < ring.size(); ++i) {
      ring_hop(router, ring[i], ring[(i + 1) % ring.size()], c.rail).for_each_edge([&](auto k) {
        if (scratch.count[k]++ == 0) scratch.touched.push_back(k);
      });
    }
  } catch (...) {
    for (const auto k : scratch.touched)
      scratch.count[k] = 0;  // leave the scratch zero for its next use
    scratch.touched.clear();
    throw;
  }
  std::sort(scratch.touched.begin(), scratch.touched.end());  // by edge index, as before
  RingLoad load;
  load.edges.reserve(scratch.touched.size());
  std::vector<double> speeds;
  const auto& cap = router.capacities_Bps();
  for (const auto k : scratch.touched) {
    const auto h = std::exchange(scratch.count[k], 0);
    load.edges.emplace_back(k, h);
    load.link_hops += h;
    const double bw = cap[k];
    if (std::none_of(speeds.begin(), speeds.end(),
                     [bw](double x) { return std::fabs(x - bw) <= 1e-9 * bw; })) {
      speeds.push_back(bw);
    }
  }
  scratch.touched.clear();
  load.speeds = static_cast<std::int64_t>(speeds.size());
  return load;
}

// The rate a ring gets from the residual capacities, and the edge that limits it.
double rate_of(const RingLoad& load, const std::vector<double>& residual, std::size_t* worst) {
  double rate = std::numeric_limits<double>::infinity();
  for (const auto& [k, hops] : load.edges) {
    const double r = residual[k] / static_cast<double>(hops);
    if (r < rate) {
      rate = r;
      if (worst) *worst = k;
    }
  }
  return rate;
}

double hop_width(Router& router, std::int64_t a, std::int64_t b) {
  const auto& t = router.topology();
  return router.route_shifted(t.gpu(a), t.gpu(b)).route->bottleneck_Bps;
}

double single_ring(Router& router, const std::vector<std::int64_t>& ring) {
  return ring_rate(router, ring, -1);
}

std::vector<std::vector<std::int64_t>> all_orders(const std::vector<std::int64_t>& gpus) {
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> rest(gpus.begin() + 1, gpus.end());
  std::sort(rest.begin(), rest.end());
  do {
    std::vector<std::int64_t> ring{gpus.front()};
    ring.insert(ring.end(), rest.begin(), rest.end());
    out.push_back(ring);
  } while (std::next_permutation(rest.begin(), rest.end()));
  return out;
}

// No ring through `gpus` is wider than the narrowest of their widest hops: a ring leaves
// every GPU once, over a route no wider than its narrowest link, and the ring's rate is at
// most that link's capacity (capacity over the hops crossing it). Bytes per second.
double ring_rate_bound(Router& router, const std::vector<std::int64_t>& gpus) {
  const auto& t = router.topology();
  const auto& cap = router.capacities_Bps();
  double bound = std::numeric_limits<double>::infinity();
  for (const auto a : gpus) {
    double widest = 0.0;
    for (const auto b : gpus) {
      if (a == b) continue;
      double narrowest = std::numeric_limits<double>::infinity();
      router.route_shifted(t.gpu(a), t.gpu(b)).for_each_edge([&](EdgeIndex k) {
        narrowest = std::min(narrowest, cap[k]);
      });
      widest = std::max(widest, narrowest);
    }
    bound = std::min(bound, widest);
  }
  return bound;
}

// Greedy widest-next-hop order from `start`, then 2-opt reversals while the ring widens. A
// ring already at `bound_Bps` (ring_rate_bound) has no wider reversal, so the search stops
// there: the same ring, without the quadratic scan (most of a 72-GPU NVLink domain's plan).
std::vector<std::int64_t> greedy_order(Router& router, const std::vector<std::int64_t>& gpus,
                                       std::size_t start, double bound_Bps) {
  std::vector<std::int64_t> ring{gpus[start]};
  std::vector<bool> used(gpus.size(), false);
  used[start] = true;
  for (std::size_t step = 1; step < gpus.size(); ++step) {
    std::size_t best = gpus.size();
    double width = -1;
    for (std::size_t j = 0; j < gpus.size(); ++j) {
      if (used[j]) continue;
      const double w = hop_width(router, ring.back(), gpus[j]);
      if (w > width) {
        width = w;
        best = j;
      }
    }
    used[best] = true;
    ring.push_back(gpus[best]);
  }
  double current = single_ring(router, ring);
  for (bool improved = true; improved && bound_Bps > current * (1 + 1e-9);) {
    improved = false;
    for (std::size_t i = 1; i + 1 < ring.size() && !improved; ++i) {
      for (std::size_t j = i + 1; j < ring.size() && !improved; ++j) {
        std::reverse(ring.begin() + static_cast<std::ptrdiff_t>(i),
                     ring.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        const double b = single_ring(router, ring);
        if (b > current * (1 + 1e-9)) {
          current = b;
          improved = true;
        } else {
          std::reverse(ring.begin() + static_cast<std::ptrdiff_t>(i),
                       ring.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        }
      }
    }
  }
  return ring;
}

bool fits(const RingLoad& load, const std::vector<double>& residual, double rate) {
  for (const auto& [k, hops] : load.edges) {
    if (residual[k] < rate * static_cast<double>(hops) * (1 - 1e-9)) return false;
  }
  return true;
}

enum class Fit { roomiest, tightest, shortest };

// Packs rings at `rate` while one fits, choosing each time the ring that leaves its tightest
// link the most room (roomiest), the least room (tightest), or the first with fewest link
// hops (shortest). Three cheap greedy orders; the caller keeps whichever packs most.
std::vector<std::size_t> pack(const std::vector<RingLoad>& loads,
                              const std::vector<std::size_t>& order, const std::vector<double>& cap,
                              double rate, Fit fit, std::int64_t max_channels) {
  auto residual = cap;
  std::vector<std::size_t> picked;
  while (static_cast<std::int64_t>(picked.size()) < max_channels) {
    std::size_t pick = loads.size();
    double pick_slack = 0.0;
    for (const auto c : order) {
      if (!fits(loads[c], residual, rate)) continue;
      double slack = std::numeric_limits<double>::infinity();
      for (const auto& [k, hops] : loads[c].edges) {
        slack = std::min(slack, (residual[k] - rate * static_cast<double>(hops)) / cap[k]);
      }
      // Ties go to rings over links of one speed, as NCCL's search keeps a channel on one
      // kind of path: mixing doubled and single NVLinks in a ring strands capacity.
      const bool tie = pick < loads.size() && std::fabs(slack - pick_slack) <= 1e-12;
      const bool better = pick == loads.size() ||
                          (fit == Fit::roomiest && slack > pick_slack + 1e-12) ||
                          (fit == Fit::tightest && slack < pick_slack - 1e-12) ||
                          (tie && fit != Fit::shortest && loads[c].speeds < loads[pick].speeds);
      if (better) {
        pick = c;
        pick_slack = slack;
        if (fit == Fit::shortest) break;
      }
    }
    if (pick == loads.size()) break;
    for (const auto& [k, hops] : loads[pick].edges)
      residual[k] -= rate * static_cast<double>(hops);
    picked.push_back(pick);
  }
  return picked;
}

// A set of links every candidate ring crosses: its capacity, and the fewest hops over it of
// any candidate. No more rings of rate r fit than capacity / (r x fewest hops).
struct Cut {
  double capacity_Bps = 0.0;
  std::int64_t fewest_hops = std::numeric_limits<std::int64_t>::max();
};

// Cut index per edge index, -1 outside the cuts.
using CutOf = std::vector<std::int32_t>;

// The links out of each GPU of the ring (every ring leaves every GPU) and, where the GPUs
// span several nodes, the links out of each node (every ring leaves every node it spans, over
// the network). Only links some candidate crosses count: an NVL72 GPU's C2C and PCIe links
// carry no ring.
void collect_cuts(Router& router, const std::vector<std::int64_t>& gpus,
                  const std::vector<RingLoad>& loads, CutOf& gpu_cut, CutOf& node_cut,
                  std::vector<Cut>& cuts) {
  const auto& t = router.topology();
  const auto& g = t.graph();
  std::vector<char> used(gpu_cut.size(), 0);
  for (const auto& l : loads) {
    for (const auto& [k, hops] : l.edges)
      used[k] = 1;
  }
  // Adds v's links that leave `host` (all of them for host -1) to a new cut.
  const auto add_links = [&](Vertex v, std::int64_t host, CutOf& of) {
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto k = static_cast<std::size_t>(g[e].index);
      if (!used[k] || (host >= 0 && g[boost::target(e, g)].host == host)) continue;
      of[k] = static_cast<std::int32_t>(cuts.size() - 1);
      cuts.back().capacity_Bps += router.capacities_Bps()[k];
    }
  };
  std::vector<std::int64_t> hosts;
  for (const auto r : gpus) {
    cuts.emplace_back();
    add_links(t.gpu(r), -1, gpu_cut);
    hosts.push_back(g[t.gpu(r)].host);
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (hosts.size() < 2) return;
  for (const auto h : hosts) {
    cuts.emplace_back();  // one node's NICs, one cut
    for (std::int64_t rail = 0; rail < t.nics_per_node(); ++rail)
      add_links(t.nic(h, rail), h, node_cut);
  }
}

// The cuts of `gpus`' rings, each with the fewest hops any candidate makes over it.
std::vector<Cut> ring_cuts(Router& router, const std::vector<std::int64_t>& gpus,
                           const std::vector<RingLoad>& loads) {
  const auto edges = router.capacities_Bps().size();
  CutOf gpu_cut(edges, -1), node_cut(edges, -1);
  std::vector<Cut> cuts;
  collect_cuts(router, gpus, loads, gpu_cut, node_cut, cuts);
  std::vector<std::int64_t> hops(cuts.size());
  for (const auto& l : loads) {
    std::fill(hops.begin(), hops.end(), 0);
    for (const auto& [k, n] : l.edges) {
      for (const auto* of : {&gpu_cut, &node_cut}) {
        if ((*of)[k] >= 0) hops[static_cast<std::size_t>((*of)[k])] += n;
      }
    }
    for (std::size_t c = 0; c < cuts.size(); ++c)
      cuts[c].fewest_hops = std::min(cuts[c].fewest_hops, hops[c]);
  }
  return cuts;
}

// At most how many rings of `rate` fit through every cut.
std::int64_t channel_bound(const std::vector<Cut>& cuts, double rate, std::int64_t max_channels) {
  double bound = static_cast<double>(max_channels);
  for (const auto& c : cuts) {
    if (c.fewest_hops <= 0) continue;  // some candidate avoids it: it bounds nothing
    const double per_ring = rate * static_cast<double>(c.fewest_hops);
    bound = std::min(bound, std::floor(c.capacity_Bps / per_ring * (1 + 1e-9)));
  }
  return static_cast<std::int64_t>(bound);
}

// Backtracking over the candidates (repeats allowed) for more rings at `rate` than the greedy
// packs found, until `bound` rings or `budget` fit tests: a full mesh (8 MI300X, each pair one
// xGMI link) holds 7 disjoint directed rings, which greedy packing misses after 6.
class DeepPack {
 public:
  DeepPack(const std::vector<RingLoad>& loads, const std::vector<std::size_t>& order,
           const std::vector<double>& cap, double rate, std::int64_t bound)
      : loads_(loads), order_(order), residual_(cap), rate_(rate), bound_(bound) {}

  std::vector<std::size_t> run(std::vector<std::size_t> best, std::int64_t budget) {
    best_ = std::move(best);
    budget_ = budget;
    visit(0);
    return best_;
  }

 private:
  void visit(std::size_t from) {
    if (chosen_.size() > best_.size()) best_ = chosen_;
    for (std::size_t i = from; i < order_.size(); ++i) {
      if (static_cast<std::int64_t>(best_.size()) >= bound_ || --budget_ < 0) return;
      const auto& load = loads_[order_[i]];
      if (!fits(load, residual_, rate_)) continue;
      apply(load, -1.0);
      chosen_.push_back(order_[i]);
      visit(i);
      chosen_.pop_back();
      apply(load, 1.0);
    }
  }

  void apply(const RingLoad& load, double sign) {
    for (const auto& [k, hops] : load.edges)
      residual_[k] += sign * rate_ * static_cast<double>(hops);
  }

  const std::vector<RingLoad>& loads_;
  const std::vector<std::size_t>& order_;
  std::vector<double> residual_;
  double rate_;
  std::int64_t bound_;
  std::int64_t budget_ = 0;
  std::vector<std::size_t> chosen_;
  std::vector<std::size_t> best_;
};

// Fit tests the backtracking may spend per rate (each walks one ring's links): it runs only
// where the GPUs' ring links could carry more rings than the greedy packings found.
constexpr std::int64_t kDeepPackBudget = 200'000;

// Equal-rate channels, as NCCL splits a buffer evenly across its channels. For each rate r
// that some candidate ring reaches on its own, rings are packed greedily (repeats allowed)
// while one fits in what the links have left at r; B = channels x r, and the best r wins
// (ties: fewer channels). A ring over a slow path only fits at a low rate, so fast rings are
// not mixed with slow ones.
RingPlan choose_channels(Router& router, const std::vector<Candidate>& candidates,
                         const RingOptions& options) {
  const auto& cap = router.capacities_Bps();
  HopScratch scratch(cap.size());
  std::vector<RingLoad> loads;
  loads.reserve(candidates.size());
  for (const auto& c : candidates)
    loads.push_back(ring_load(router, c, scratch));
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&loads](std::size_t x, std::size_t y) {
    return loads[x].link_hops < loads[y].link_hops;
  });
  std::vector<double> rates;
  rates.reserve(loads.size());
  for (const auto& l : loads)
    rates.push_back(rate_of(l, cap, nullptr));
  std::sort(rates.rbegin(), rates.rend());
  rates.erase(std::unique(rates.begin(), rates.end(),
                          [](double x, double y) { return std::fabs(x - y) <= 1e-9 * x; }),
              rates.end());
  RingPlan best;
  best.candidates = static_cast<std::int64_t>(candidates.size());
  const auto cuts = ring_cuts(router, candidates.front().ring, loads);
  for (const double rate : rates) {
    const auto bound = channel_bound(cuts, rate, options.max_channels);
    if (rate <= 0.0 || rate * static_cast<double>(bound) <= best.bandwidth_Bps * (1 + 1e-9)) {
      continue;  // cannot beat the best even with as many channels as the links carry
    }
    std::vector<std::size_t> picked;
    for (const auto fit : {Fit::roomiest, Fit::tightest, Fit::shortest}) {
      auto p = pack(loads, order, cap, rate, fit, options.max_channels);
      if (p.size() > picked.size()) picked = std::move(p);
    }
    if (static_cast<std::int64_t>(picked.size()) < bound) {
      picked = DeepPack(loads, order, cap, rate, bound).run(std::move(picked), kDeepPackBudget);
    }
    const double b = rate * static_cast<double>(picked.size());
    if (b <= best.bandwidth_Bps * (1 + 1e-9)) continue;
    best.bandwidth_Bps = b;
    best.rings.clear();
    best.rails.clear();
    best.rates_Bps.assign(picked.size(), rate);
    for (const auto c : picked) {
      best.rings.push_back(candidates[c].ring);
      best.rails.push_back(candidates[c].rail);
    }
  }
  return best;
}

void describe(Router& router, RingPlan& plan) {
  const auto& first = plan.rings.front();
  const auto rail = plan.rails.front();
  ring_rate(router, first, rail, &plan.bottleneck, &plan.bottleneck_crossings);
  plan.hop_kinds.clear();
  for (std::size_t i = 0; i < first.size(); ++i) {
    plan.hop_kinds.push_back(
        ring_hop(router, first[i], first[(i + 1) % first.size()], rail).route->slowest_kind);
  }
}

RingPlan plan_in_node(Router& router, const std::vector<std::int64_t>& gpus,
                      const RingOptions& options) {
  if (gpus.size() == 1) {
    // No ring: one GPU exchanges nothing. The plan still holds its one "channel" (the GPU,
    // rate 0) so that rings, rates and rails stay the same length for every caller.
    RingPlan plan;
    plan.rings = {gpus};
    plan.rates_Bps = {0.0};
    plan.rails = {-1};
    plan.exhaustive = true;
    return plan;
  }
  std::vector<Candidate> candidates;
  const bool exhaustive = static_cast<std::int64_t>(gpus.size()) <= options.exhaustive_limit;
  if (exhaustive) {
    for (auto& order : all_orders(gpus))
      candidates.push_back({std::move(order), -1});
  } else {
    const double bound_Bps = ring_rate_bound(router, gpus);
    for (std::size_t s = 0; s < gpus.size(); ++s) {
      auto ring = greedy_order(router, gpus, s, bound_Bps);
      candidates.push_back({ring, -1});
      std::reverse(ring.begin() + 1, ring.end());
      candidates.push_back({ring, -1});
    }
  }
  auto plan = choose_channels(router, candidates, options);
  plan.exhaustive = exhaustive;
  return plan;
}

std::vector<std::int64_t> rotated(const std::vector<std::int64_t>& ring, std::size_t start) {
  std::vector<std::int64_t> out(ring.begin() + static_cast<std::ptrdiff_t>(start), ring.end());
  out.insert(out.end(), ring.begin(), ring.begin() + static_cast<std::ptrdiff_t>(start));
  return out;
}

// The chains of every node for one channel: node k's GPUs in the order of `chain` (ranks of
// node 0), shifted to node k.
std::vector<std::int64_t> concatenate(const std::vector<std::int64_t>& chain, std::int64_t nodes,
                                      std::int64_t per_node) {
  std::vector<std::int64_t> ring;
  for (std::int64_t k = 0; k < nodes; ++k) {
    for (const auto r : chain)
      ring.push_back(r + k * per_node);
  }
  return ring;
}

// Across nodes a plan may take a channel per NIC rail, beyond the default maximum.
RingOptions across_options(const Topology& t, const RingOptions& options) {
  auto opts = options;
  opts.max_channels = std::max<std::int64_t>(options.max_channels, t.nics_per_node());
  return opts;
}

// The node's rings, and on two nodes, every rotation of every one of them in both directions
// leaving through every rail its ends reach, with the channels chosen among those.
NodeChannels node_channels(Router& router, const RingOptions& options) {
  const auto& t = router.topology();
  const std::int64_t per_node = t.gpus_per_node();
  std::vector<std::int64_t> local(static_cast<std::size_t>(per_node));
  std::iota(local.begin(), local.end(), std::int64_t{0});
  NodeChannels out;
  out.topology = &t;
  out.options = options;
  out.intra = plan_in_node(router, local, options);
  // Candidate chains: every rotation of every intra-node ring, both directions, every rail.
  std::vector<std::vector<std::int64_t>> chains;
  for (auto ring : out.intra.rings) {
    for (int dir = 0; dir < 2; ++dir) {
      for (std::size_t s = 0; s < ring.size(); ++s)
        chains.push_back(rotated(ring, s));
      std::reverse(ring.begin(), ring.end());
    }
  }
  // Choose channels on two nodes (all nodes are alike), then apply them to all. A chain
  // leaves its node from its last GPU and enters the next at its first, through a NIC both
  // reach (an NVL72 tray's GPUs reach only their own tray's NICs).
  std::vector<Candidate> pair_rings;
  for (std::int64_t rail = 0; rail < t.nics_per_node(); ++rail) {
    for (const auto& c : chains) {
      if (!router.reaches_rail(t.gpu(c.back()), rail) ||
          !router.reaches_rail(t.gpu(c.front()), rail)) {
        continue;
      }
      pair_rings.push_back({concatenate(c, 2, per_node), rail});
    }
  }
  if (pair_rings.empty()) {
    throw Error(t.node().origin +
                ": no ring can leave a node: no two GPUs adjacent in the node's "
                "rings reach a common NIC");
  }
  out.pair = choose_channels(router, pair_rings, across_options(t, options));
  return out;
}

RingPlan plan_across_nodes(Router& router, const std::vector<std::int64_t>& gpus,
                           const NodeChannels& node, const RingOptions& options) {
  const auto& t = router.topology();
  const std::int64_t per_node = t.gpus_per_node();
  const std::int64_t nodes = static_cast<std::int64_t>(gpus.size()) / per_node;
  std::vector<Candidate> full;
  for (std::size_t i = 0; i < node.pair.rings.size(); ++i) {
    const auto& r = node.pair.rings[i];
    const std::vector<std::int64_t> chain(r.begin(), r.begin() + per_node);
    full.push_back({concatenate(chain, nodes, per_node), node.pair.rails[i]});
  }
  // Rates on the whole cluster, in the order chosen on two nodes.
  RingPlan plan = choose_channels(router, full, across_options(t, options));
  plan.candidates += node.intra.candidates + node.pair.candidates;
  plan.exhaustive = node.intra.exhaustive;
  return plan;
}

}  // namespace

ShiftedRoute ring_hop(Router& router, std::int64_t from, std::int64_t to, std::int64_t rail) {
  const auto& t = router.topology();
  const auto a = t.gpu(from);
  const auto b = t.gpu(to);
  if (rail >= 0 && t.graph()[a].host != t.graph()[b].host)
    return {&router.route_via_rail(a, b, rail), 0};
  return router.route_shifted(a, b);
}

double ring_rate(Router& router, const std::vector<std::int64_t>& ring, std::int64_t rail,
                 Bottleneck* bottleneck, std::int64_t* crossings) {
  if (ring.size() < 2) return 0.0;
  const auto& cap = router.capacities_Bps();
  // Reused across calls (the 2-opt search calls this often); ring_load leaves it zero.
  thread_local HopScratch scratch(0);
  if (scratch.count.size() < cap.size()) scratch.count.resize(cap.size(), 0);
  const auto load = ring_load(router, {ring, rail}, scratch);
  std::size_t worst = 0;
  const double rate = rate_of(load, cap, &worst);
  std::int64_t hops = 0;
  std::int64_t both = 0;
  for (const auto& [k, h] : load.edges) {
    hops += k == worst ? h : 0;
    both += (k == worst || k == (worst ^ 1)) ? h : 0;  // the two directions: 2p and 2p + 1
  }
  if (bottleneck) {
    *bottleneck =
        describe_bottleneck(router.topology(), router.edge(worst), static_cast<double>(hops));
  }
  if (crossings) *crossings = both;
  return rate;
}

NodeChannels plan_node_channels(Router& router, const RingOptions& options) {
  return node_channels(router, options);
}

RingPlan plan_rings(Router& router, const std::vector<std::int64_t>& gpus,
                    const RingOptions& options) {
  return plan_rings(router, gpus, NodeChannels{}, options);
}

namespace {

// Rings over whole nodes are laid out node after node from GPU 0 (concatenate): the GPUs must
// be 0 .. n-1 in order, whole nodes.
void check_whole_nodes(const Topology& t, const std::vector<std::int64_t>& gpus) {
  const auto per_node = t.gpus_per_node();
  bool in_order = gpus.front() == 0;
  for (std::size_t i = 1; in_order && i < gpus.size(); ++i)
    in_order = gpus[i] == gpus[i - 1] + 1;
  if (static_cast<std::int64_t>(gpus.size()) % per_node != 0 || !in_order) {
    throw Error(std::to_string(gpus.size()) + " GPUs span nodes of " + std::to_string(per_node) +
                ": use whole nodes, GPUs 0 to n-1 in order (a multiple of " +
                std::to_string(per_node) + ")");
  }
}

void check_node_channels(const Topology& t, const NodeChannels& node, const RingOptions& options) {
  if (node.topology != &t || node.options.max_channels != options.max_channels ||
      node.options.exhaustive_limit != options.exhaustive_limit) {
    throw Error("internal: node channels planned for another topology or under other ring options");
  }
}

}  // namespace

RingPlan plan_rings(Router& router, const std::vector<std::int64_t>& gpus, const NodeChannels& node,
                    const RingOptions& options) {
  if (gpus.empty()) throw Error("a ring needs at least one GPU");
  const auto& t = router.topology();
  const auto host = [&t](std::int64_t r) { return t.graph()[t.gpu(r)].host; };
  const bool one_node = std::all_of(gpus.begin(), gpus.end(),
                                    [&](std::int64_t r) { return host(r) == host(gpus.front()); });
  RingPlan plan;
  if (one_node) {
    plan = plan_in_node(router, gpus, options);
  } else {
    check_whole_nodes(t, gpus);
    if (node.topology) {
      check_node_channels(t, node, options);
      plan = plan_across_nodes(router, gpus, node, options);
    } else {  // none given: planned for this call
      plan = plan_across_nodes(router, gpus, node_channels(router, options), options);
    }
  }
  if (gpus.size() > 1) describe(router, plan);
  return plan;
}

}  // namespace dtplan::cost
