// Ring search over the topology graph.
#include "dtplan/cost/rings.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

// The directed edges a ring crosses, with how many of its hops cross each.
struct RingLoad {
  std::vector<std::pair<std::size_t, std::int64_t>> edges;  // (edge index, hops)
  std::int64_t link_hops = 0;  // links crossed in all, to prefer shorter rings on ties
};

struct Candidate {
  std::vector<std::int64_t> ring;
  std::int64_t rail = -1;
};

RingLoad ring_load(Router& router, const Candidate& c, std::vector<EdgeId>& edge_of) {
  const auto& g = router.topology().graph();
  const auto& ring = c.ring;
  std::map<std::size_t, std::int64_t> hops;
  for (std::size_t i = 0; i < ring.size(); ++i) {
    const auto& r = ring_hop(router, ring[i], ring[(i + 1) % ring.size()], c.rail);
    for (const auto e : r.edges) {
      const auto k = static_cast<std::size_t>(g[e].index);
      ++hops[k];
      edge_of[k] = e;
    }
  }
  RingLoad load{{hops.begin(), hops.end()}, 0};
  for (const auto& [k, h] : load.edges)
    load.link_hops += h;
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

std::vector<double> capacities(Router& router, std::vector<EdgeId>& edge_of) {
  const auto& t = router.topology();
  const auto& g = t.graph();
  std::vector<double> cap(static_cast<std::size_t>(t.directed_edge_count()), 0.0);
  edge_of.assign(cap.size(), EdgeId{});
  for (const auto v : boost::make_iterator_range(boost::vertices(g))) {
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      cap[static_cast<std::size_t>(g[e].index)] = g[e].effective_Bps();
    }
  }
  return cap;
}

double hop_width(Router& router, std::int64_t a, std::int64_t b) {
  const auto& t = router.topology();
  return router.route(t.gpu(a), t.gpu(b)).bottleneck_Bps;
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

// Greedy widest-next-hop order from `start`, then 2-opt reversals while the ring widens.
std::vector<std::int64_t> greedy_order(Router& router, const std::vector<std::int64_t>& gpus,
                                       std::size_t start) {
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
  for (bool improved = true; improved;) {
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

// Water-filling: repeatedly adds the candidate ring with the highest rate on the capacity
// left, while that rate is more than 0.1% of the total so far.
RingPlan choose_channels(Router& router, const std::vector<Candidate>& candidates,
                         const RingOptions& options) {
  RingPlan plan;
  std::vector<EdgeId> edge_of;
  auto residual = capacities(router, edge_of);
  std::vector<RingLoad> loads;
  for (const auto& c : candidates)
    loads.push_back(ring_load(router, c, edge_of));
  plan.candidates = static_cast<std::int64_t>(candidates.size());
  while (static_cast<std::int64_t>(plan.rings.size()) < options.max_channels) {
    std::size_t pick = candidates.size();
    double pick_rate = 1e-3 * plan.bandwidth_Bps;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const double rate = rate_of(loads[c], residual, nullptr);
      const bool tie = pick < candidates.size() && rate > pick_rate * (1 - 1e-9) &&
                       rate < pick_rate * (1 + 1e-9);
      if ((tie && loads[c].link_hops < loads[pick].link_hops) ||
          (!tie && rate > pick_rate * (1 + 1e-12))) {
        pick_rate = rate;
        pick = c;
      }
    }
    if (pick == candidates.size() || pick_rate <= 0.0) break;
    for (const auto& [k, hops] : loads[pick].edges) {
      residual[k] -= pick_rate * static_cast<double>(hops);
    }
    plan.rings.push_back(candidates[pick].ring);
    plan.rails.push_back(candidates[pick].rail);
    plan.rates_Bps.push_back(pick_rate);
    plan.bandwidth_Bps += pick_rate;
  }
  return plan;
}

void describe(Router& router, RingPlan& plan) {
  const auto& first = plan.rings.front();
  const auto rail = plan.rails.front();
  ring_rate(router, first, rail, &plan.bottleneck, &plan.bottleneck_crossings);
  plan.hop_kinds.clear();
  for (std::size_t i = 0; i < first.size(); ++i) {
    plan.hop_kinds.push_back(
        ring_hop(router, first[i], first[(i + 1) % first.size()], rail).slowest_kind);
  }
}

RingPlan plan_in_node(Router& router, const std::vector<std::int64_t>& gpus,
                      const RingOptions& options) {
  if (gpus.size() == 1) {
    RingPlan plan;
    plan.rings = {gpus};
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
    for (std::size_t s = 0; s < gpus.size(); ++s) {
      auto ring = greedy_order(router, gpus, s);
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

RingPlan plan_across_nodes(Router& router, const std::vector<std::int64_t>& gpus,
                           const RingOptions& options) {
  const auto& t = router.topology();
  const std::int64_t per_node = t.gpus_per_node();
  const std::int64_t nodes = static_cast<std::int64_t>(gpus.size()) / per_node;
  std::vector<std::int64_t> local(gpus.begin(), gpus.begin() + per_node);
  const auto intra = plan_in_node(router, local, options);
  // Candidate chains: every rotation of every intra-node ring, both directions, every rail.
  std::vector<std::vector<std::int64_t>> chains;
  for (auto ring : intra.rings) {
    for (int dir = 0; dir < 2; ++dir) {
      for (std::size_t s = 0; s < ring.size(); ++s)
        chains.push_back(rotated(ring, s));
      std::reverse(ring.begin(), ring.end());
    }
  }
  // Choose channels on two nodes (all nodes are alike), then apply them to all.
  std::vector<Candidate> pair_rings;
  for (std::int64_t rail = 0; rail < t.nics_per_node(); ++rail) {
    for (const auto& c : chains)
      pair_rings.push_back({concatenate(c, 2, per_node), rail});
  }
  auto opts = options;
  opts.max_channels = std::max<std::int64_t>(options.max_channels, t.nics_per_node());
  const auto pair_plan = choose_channels(router, pair_rings, opts);
  std::vector<Candidate> full;
  for (std::size_t i = 0; i < pair_plan.rings.size(); ++i) {
    const auto& r = pair_plan.rings[i];
    const std::vector<std::int64_t> chain(r.begin(), r.begin() + per_node);
    full.push_back({concatenate(chain, nodes, per_node), pair_plan.rails[i]});
  }
  // Rates on the whole cluster, in the order chosen on two nodes.
  RingPlan plan = choose_channels(router, full, opts);
  plan.candidates += intra.candidates + pair_plan.candidates;
  plan.exhaustive = intra.exhaustive;
  return plan;
}

}  // namespace

const Route& ring_hop(Router& router, std::int64_t from, std::int64_t to, std::int64_t rail) {
  const auto& t = router.topology();
  const auto a = t.gpu(from);
  const auto b = t.gpu(to);
  if (rail >= 0 && t.graph()[a].host != t.graph()[b].host) return router.route_via_rail(a, b, rail);
  return router.route(a, b);
}

double ring_rate(Router& router, const std::vector<std::int64_t>& ring, std::int64_t rail,
                 Bottleneck* bottleneck, std::int64_t* crossings) {
  if (ring.size() < 2) return 0.0;
  std::vector<EdgeId> edge_of;
  const auto cap = capacities(router, edge_of);
  const auto load = ring_load(router, {ring, rail}, edge_of);
  std::size_t worst = 0;
  const double rate = rate_of(load, cap, &worst);
  std::int64_t hops = 0;
  std::int64_t both = 0;
  for (const auto& [k, h] : load.edges) {
    hops += k == worst ? h : 0;
    both += (k == worst || k == (worst ^ 1)) ? h : 0;  // the two directions: 2p and 2p + 1
  }
  if (bottleneck) {
    *bottleneck = describe_bottleneck(router.topology(), edge_of[worst], static_cast<double>(hops));
  }
  if (crossings) *crossings = both;
  return rate;
}

RingPlan plan_rings(Router& router, const std::vector<std::int64_t>& gpus,
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
    const auto per_node = t.gpus_per_node();
    if (static_cast<std::int64_t>(gpus.size()) % per_node != 0 || gpus.front() != 0) {
      throw Error(std::to_string(gpus.size()) + " GPUs span nodes of " + std::to_string(per_node) +
                  ": use whole nodes (a multiple of " + std::to_string(per_node) + ")");
    }
    plan = plan_across_nodes(router, gpus, options);
  }
  if (gpus.size() > 1) describe(router, plan);
  return plan;
}

}  // namespace dtplan::cost
