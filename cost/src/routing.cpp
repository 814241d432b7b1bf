// Widest-then-shortest routing over the topology graph, and flow timing over shared links.
//
// Two searches per route: a max-min Dijkstra finds the widest achievable bottleneck W, then a
// breadth-first search over links of at least W finds the fewest-hop path. Both touch only
// the vertices a route may use (the endpoints' nodes and, across nodes, the network), and
// reuse stamped scratch arrays so a search costs what it explores, not the graph's size.
#include "dtplan/cost/routing.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

int latency_rank(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink:
      return 0;
    case LinkKind::pcie:
    case LinkKind::socket:
      return 1;
    case LinkKind::network:
      return 2;
  }
  return 2;
}

namespace {
// A route of one link.
Route single(const TopologyGraph& g, EdgeId e) {
  Route r;
  r.edges = {static_cast<EdgeIndex>(g[e].index)};
  r.bottleneck_Bps = g[e].effective_Bps();
  r.slowest_kind = g[e].kind;
  return r;
}
}  // namespace

Router::Router(const Topology& t)
    : t_(t),
      unit_{{0}, 0.0, LinkKind::nvlink},
      stamp_(boost::num_vertices(t.graph()), 0),
      best_(boost::num_vertices(t.graph()), 0.0),
      parent_(boost::num_vertices(t.graph())) {
  const auto& g = t.graph();
  if (t.directed_edge_count() > std::numeric_limits<EdgeIndex>::max()) {
    throw Error(t.node().origin + ": " + std::to_string(t.directed_edge_count()) +
                " directed links, more than a route's 32-bit edge index holds");
  }
  edges_.resize(static_cast<std::size_t>(t.directed_edge_count()));
  capacity_Bps_.assign(edges_.size(), 0.0);
  for (const auto v : boost::make_iterator_range(boost::vertices(g))) {
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto i = static_cast<std::size_t>(g[e].index);
      edges_[i] = e;
      capacity_Bps_[i] = g[e].effective_Bps();
    }
  }
  devices_per_node_ = t.node().devices.size();
  links_per_node_ = t.node().links.size();
}

std::optional<Route> Router::shifted_from_node0(Vertex src, Vertex dst) {
  const auto& g = t_.graph();
  const auto host = g[src].host;
  if (host <= 0 || g[dst].host != host) return std::nullopt;
  // Checked here: route_shifted falls back to route() for a node laid out otherwise.
  if (!laid_out_as_node0(static_cast<std::size_t>(host))) return std::nullopt;
  const auto shifted = route_shifted(src, dst);
  Route r = *shifted.route;
  for (auto& index : r.edges)
    index += shifted.shift;
  return r;
}

bool Router::laid_out_as_node0(std::size_t host) {
  if (alike_.empty()) alike_.assign(static_cast<std::size_t>(t_.nodes()), -1);
  auto& known = alike_.at(host);
  if (known >= 0) return known == 1;
  const auto& g = t_.graph();
  const auto edge_shift = 2 * host * links_per_node_;
  const auto vertex_shift = host * devices_per_node_;
  known = 1;
  for (std::size_t i = 0; i < 2 * links_per_node_ && known == 1; ++i) {
    const auto e = edges_[i];
    const auto a = boost::source(e, g), b = boost::target(e, g);
    if (a >= devices_per_node_ || b >= devices_per_node_ || i + edge_shift >= edges_.size()) {
      known = 0;
      break;
    }
    const auto moved = edges_[i + edge_shift];
    if (boost::source(moved, g) != a + vertex_shift || boost::target(moved, g) != b + vertex_shift)
      known = 0;
  }
  return known == 1;
}

ShiftedRoute Router::route_shifted(Vertex src, Vertex dst) {
  const auto& g = t_.graph();
  const auto host = g[src].host;
  if (host > 0 && g[dst].host == host && laid_out_as_node0(static_cast<std::size_t>(host))) {
    const auto h = static_cast<std::size_t>(host);
    return {&route(src - h * devices_per_node_, dst - h * devices_per_node_),
            static_cast<EdgeIndex>(2 * h * links_per_node_)};
  }
  return {&route(src, dst), 0};
}

std::size_t Router::KeyHash::operator()(const std::pair<Vertex, Vertex>& k) const {
  // Vertex indices fit in 32 bits for any cluster a graph can hold in memory.
  return std::hash<std::uint64_t>{}((static_cast<std::uint64_t>(k.first) << 32) ^ k.second);
}

std::size_t Router::KeyHash::operator()(const std::tuple<Vertex, Vertex, std::int64_t>& k) const {
  const auto pair = (*this)(std::make_pair(std::get<0>(k), std::get<1>(k)));
  return pair ^ (std::hash<std::int64_t>{}(std::get<2>(k)) * 0x9e3779b97f4a7c15ULL);
}

bool Router::may_enter(EdgeId e, Vertex src, Vertex dst) const {
  const auto& g = t_.graph();
  const auto v = boost::target(e, g);
  if (v == dst) return true;
  const auto& d = g[v];
  // A GPU forwards only NVLink to NVLink (NCCL's PATH_NVB), never PCIe traffic.
  if (d.kind == DeviceKind::gpu) return g[e].kind == LinkKind::nvlink;
  const auto a = g[src].host;
  const auto b = g[dst].host;
  if (a == b) return d.host == a && d.kind != DeviceKind::nic;
  if (d.kind == DeviceKind::network_switch) return true;
  return d.host == a || d.host == b;
}

// A relaying GPU forwards over NVLink straight to the destination: NCCL's PATH_NVB has one
// intermediate GPU, never a chain of them.
bool Router::relays_to(EdgeId e, Vertex dst) const {
  const auto& g = t_.graph();
  return g[e].kind == LinkKind::nvlink && boost::target(e, g) == dst;
}

double Router::widest_bottleneck(Vertex src, Vertex dst) {
  const auto& g = t_.graph();
  ++generation_;
  using Item = std::pair<double, Vertex>;
  std::priority_queue<Item> heap;
  stamp_[src] = generation_;
  best_[src] = 1e30;
  heap.push({best_[src], src});
  while (!heap.empty()) {
    const auto [width, v] = heap.top();
    heap.pop();
    if (width < best_[v]) continue;
    if (v == dst) return width;
    const bool relay = v != src && g[v].kind == DeviceKind::gpu;
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto w = boost::target(e, g);
      if ((relay && !relays_to(e, dst)) || !may_enter(e, src, dst)) continue;
      const double through = std::min(width, g[e].effective_Bps());
      // Widths pop in non-increasing order, so no path found later is wider than `width`,
      // and an earlier arrival wider than `width` would have been popped (and returned)
      // before this vertex: reaching dst without narrowing ends the search.
      if (w == dst && through >= width) return through;
      if (stamp_[w] != generation_ || through > best_[w]) {
        stamp_[w] = generation_;
        best_[w] = through;
        heap.push({through, w});
      }
    }
  }
  return 0.0;
}

Route Router::fewest_hops(Vertex src, Vertex dst, double min_Bps) {
  const auto& g = t_.graph();
  ++generation_;
  std::deque<Vertex> queue{src};
  stamp_[src] = generation_;
  while (!queue.empty()) {
    const auto v = queue.front();
    queue.pop_front();
    const bool relay = v != src && g[v].kind == DeviceKind::gpu;
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto w = boost::target(e, g);
      if (stamp_[w] == generation_ || g[e].effective_Bps() < min_Bps ||
          (relay && !relays_to(e, dst)) || !may_enter(e, src, dst)) {
        continue;
      }
      stamp_[w] = generation_;
      parent_[w] = e;
      if (w == dst) break;  // breadth first: found at its fewest hops
      queue.push_back(w);
    }
    if (stamp_[dst] == generation_) break;
  }
  Route r;
  r.bottleneck_Bps = min_Bps;
  for (auto v = dst; v != src; v = boost::source(parent_[v], g)) {
    const auto& link = g[parent_[v]];
    r.edges.push_back(static_cast<EdgeIndex>(link.index));
    if (latency_rank(link.kind) > latency_rank(r.slowest_kind)) r.slowest_kind = link.kind;
  }
  std::reverse(r.edges.begin(), r.edges.end());
  return r;
}

Route Router::direct(Vertex src, Vertex dst) {
  if (src == dst) return {};
  const auto& gr = t_.graph();
  // A direct link between two GPUs (NVLink, NCCL's PATH_NVL) is always the route, even when
  // relaying through other GPUs over wider links would be wider.
  if (gr[src].kind == DeviceKind::gpu && gr[dst].kind == DeviceKind::gpu) {
    for (const auto e : boost::make_iterator_range(boost::out_edges(src, gr))) {
      if (boost::target(e, gr) != dst) continue;
      return single(gr, e);
    }
  }
  ++searches_;
  const double width = widest_bottleneck(src, dst);
  if (width <= 0.0) {
    const auto& g = t_.graph();
    throw Error(t_.node().origin + ": no route from " + g[src].name + " to " + g[dst].name +
                " (routes may pass through a GPU only over NVLink, and through NICs only "
                "between nodes)");
  }
  // Allow for rounding in the comparison of the same bandwidth values.
  return fewest_hops(src, dst, width * (1.0 - 1e-12));
}

namespace {
Route join(const RouteParts& parts) {
  Route r;
  parts.for_each_edge([&r](EdgeIndex k) { r.edges.push_back(k); });
  r.bottleneck_Bps = parts.bottleneck_Bps;
  r.slowest_kind = parts.slowest_kind;
  return r;
}

void add_figures(RouteParts& p, double bottleneck_Bps, LinkKind kind) {
  p.bottleneck_Bps = std::min(p.bottleneck_Bps, bottleneck_Bps);
  if (latency_rank(kind) > latency_rank(p.slowest_kind)) p.slowest_kind = kind;
}
}  // namespace

std::int64_t Router::preferred_rail(Vertex gpu) {
  if (preferred_rail_.empty()) preferred_rail_.assign(stamp_.size(), -2);
  if (preferred_rail_[gpu] != -2) return preferred_rail_[gpu];
  const auto& g = t_.graph();
  const auto host = g[gpu].host;
  // Nodes are alike: a GPU prefers the rail its counterpart in node 0 prefers.
  if (host > 0) {
    return preferred_rail_[gpu] =
               preferred_rail(t_.gpu(g[gpu].gpu_rank - host * t_.gpus_per_node()));
  }
  const auto rails = t_.nics_per_node();
  if (rails == 0) throw Error(g[gpu].name + ": no NIC on its node to reach other nodes");
  const auto local = g[gpu].gpu_rank - host * t_.gpus_per_node();
  const auto matching = local * rails / t_.gpus_per_node();
  std::int64_t best = -1;
  double best_width = -1;
  std::size_t best_hops = 0;
  for (std::int64_t r = 0; r < rails; ++r) {
    // A NIC behind another host's CPU (another tray of an NVL72 rack) is out of reach.
    if (!reaches_rail(gpu, r)) continue;
    const auto& route = this->route(gpu, t_.nic(host, r));
    const bool wider = route.bottleneck_Bps > best_width * (1 + 1e-9);
    const bool same = !wider && route.bottleneck_Bps > best_width * (1 - 1e-9);
    if (wider || (same && (route.edges.size() < best_hops ||
                           (route.edges.size() == best_hops && r == matching)))) {
      best = r;
      best_width = route.bottleneck_Bps;
      best_hops = route.edges.size();
    }
  }
  if (best < 0) {
    throw Error(t_.node().origin + ": " + g[gpu].name + " reaches none of its node's NICs");
  }
  return preferred_rail_[gpu] = best;
}

bool Router::reaches_rail(Vertex gpu, std::int64_t rail) {
  const auto rails = t_.nics_per_node();
  const auto per_node = t_.gpus_per_node();
  if (reaches_rail_.empty()) reaches_rail_.assign(static_cast<std::size_t>(per_node * rails), -1);
  const auto& g = t_.graph();
  const auto local = g[gpu].gpu_rank % per_node;
  auto& known = reaches_rail_[static_cast<std::size_t>(local * rails + rail)];
  if (known < 0) known = widest_bottleneck(t_.gpu(local), t_.nic(0, rail)) > 0.0 ? 1 : 0;
  return known == 1;
}

namespace {
// A NIC's one link into the network, if it has exactly one.
std::optional<EdgeId> network_port(const TopologyGraph& g, Vertex nic) {
  std::optional<EdgeId> port;
  for (const auto e : boost::make_iterator_range(boost::out_edges(nic, g))) {
    if (g[e].kind != LinkKind::network) continue;
    if (port) return std::nullopt;
    port = e;
  }
  return port;
}

std::optional<EdgeId> edge_between(const TopologyGraph& g, Vertex a, Vertex b) {
  for (const auto e : boost::make_iterator_range(boost::out_edges(a, g))) {
    if (boost::target(e, g) == b) return e;
  }
  return std::nullopt;
}
}  // namespace

// Through NIC `out` to NIC `in`. When each NIC has one port the path is port, switch-to-switch
// route, port; the switch-to-switch routes are few and cached, which keeps large clusters
// cheap to route.
RouteParts Router::parts_through_nics(Vertex src, Vertex out, Vertex in, Vertex dst) {
  const auto& g = t_.graph();
  const auto up = network_port(g, out);
  const auto down_rev = network_port(g, in);
  RouteParts p;
  add_part(p, route_shifted(src, out));
  if (!up || !down_rev) {
    add_part(p, {&route(out, in), 0});
  } else {
    add_edge(p, *up);
    add_part(p, {&route(boost::target(*up, g), boost::target(*down_rev, g)), 0});
    add_edge(p, *edge_between(g, boost::target(*down_rev, g), in));
  }
  add_part(p, route_shifted(in, dst));
  return p;
}

void Router::add_part(RouteParts& p, ShiftedRoute part) const {
  p.parts.at(p.count++) = part;
  add_figures(p, part.route->bottleneck_Bps, part.route->slowest_kind);
}

void Router::add_edge(RouteParts& p, EdgeId e) const {
  const auto& link = t_.graph()[e];
  p.parts.at(p.count++) = {&unit_, static_cast<EdgeIndex>(link.index)};
  add_figures(p, link.effective_Bps(), link.kind);
}

Route Router::through_nics(Vertex src, Vertex out, Vertex in, Vertex dst) {
  return join(parts_through_nics(src, out, in, dst));
}

RouteParts Router::via_rail_parts(Vertex src, Vertex dst, std::int64_t rail) {
  const auto& g = t_.graph();
  return parts_through_nics(src, t_.nic(g[src].host, rail), t_.nic(g[dst].host, rail), dst);
}

const Route& Router::route_via_rail(Vertex src, Vertex dst, std::int64_t rail) {
  const auto key = std::make_tuple(src, dst, rail);
  if (const auto it = rail_cache_.find(key); it != rail_cache_.end()) return it->second;
  const auto& g = t_.graph();
  return rail_cache_[key] =
             through_nics(src, t_.nic(g[src].host, rail), t_.nic(g[dst].host, rail), dst);
}

const Route& Router::route(Vertex src, Vertex dst) {
  const auto key = std::make_pair(src, dst);
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  const auto& g = t_.graph();
  const bool gpus = g[src].kind == DeviceKind::gpu && g[dst].kind == DeviceKind::gpu;
  if (gpus && g[src].host != g[dst].host) {
    // Point to point: each side uses its own nearest NIC.
    return cache_[key] = through_nics(src, t_.nic(g[src].host, preferred_rail(src)),
                                      t_.nic(g[dst].host, preferred_rail(dst)), dst);
  }
  if (auto shifted = shifted_from_node0(src, dst)) return cache_[key] = std::move(*shifted);
  return cache_[key] = direct(src, dst);
}

Bottleneck describe_bottleneck(const Topology& t, EdgeId e, double bytes) {
  const auto& g = t.graph();
  const auto& l = g[e];
  Bottleneck b;
  b.from = g[boost::source(e, g)].name;
  b.to = g[boost::target(e, g)].name;
  b.kind = std::string(name_of(l.kind));
  b.link_class = l.link_class();
  b.bandwidth_Bps = l.bandwidth_Bps;
  b.achieved_Bps = l.effective_Bps();
  b.bytes = bytes;
  b.time_s = bytes / l.effective_Bps();
  return b;
}

FlowLoad::FlowLoad(Router& router)
    : router_(router), bytes_(static_cast<std::size_t>(router.topology().directed_edge_count())) {}

void FlowLoad::add(const Flow& f) {
  const auto& g = router_.topology().graph();
  const bool via_rail = f.rail >= 0 && g[f.src].host != g[f.dst].host;
  RouteParts r;
  if (via_rail) {
    r = router_.via_rail_parts(f.src, f.dst, f.rail);
  } else {
    const auto shifted = router_.route_shifted(f.src, f.dst);
    r.parts[r.count++] = shifted;
    r.slowest_kind = shifted.route->slowest_kind;
  }
  if (latency_rank(r.slowest_kind) > latency_rank(slowest_kind_)) slowest_kind_ = r.slowest_kind;
  r.for_each_edge([&](EdgeIndex i) { bytes_[i] += f.bytes; });
}

FlowTime FlowLoad::time() const {
  const auto& g = router_.topology().graph();
  FlowTime out;
  out.slowest_kind = slowest_kind_;
  std::size_t worst = bytes_.size();
  double worst_time = -1.0;
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i] <= 0.0) continue;
    const double time = bytes_[i] / g[router_.edge(i)].effective_Bps();
    if (time > worst_time) {
      worst_time = time;
      worst = i;
    }
  }
  if (worst == bytes_.size()) return out;
  out.time_s = worst_time;
  out.bottleneck = describe_bottleneck(router_.topology(), router_.edge(worst), bytes_[worst]);
  return out;
}

FlowTime time_flows(Router& router, const std::vector<Flow>& flows) {
  FlowLoad load(router);
  for (const auto& f : flows)
    load.add(f);
  return load.time();
}

}  // namespace dtplan::cost
