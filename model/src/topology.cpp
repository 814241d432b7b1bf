// Building the cluster graph from a node template: devices and links per node, the
// rail-optimised network across nodes, and the connectivity checks.
#include "dtplan/model/topology.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "dtplan/model/error.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan {

namespace {

constexpr std::pair<DeviceKind, std::string_view> kDeviceKinds[] = {
    {DeviceKind::gpu, "gpu"}, {DeviceKind::pcie_switch, "pcie_switch"},
    {DeviceKind::cpu, "cpu"}, {DeviceKind::nvswitch, "nvswitch"},
    {DeviceKind::nic, "nic"}, {DeviceKind::network_switch, "network_switch"},
};

std::string gbps(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_s / 1e9);
  return buf;
}

// The link class names of every topology built in the process, by class_id: a deque, so a
// name stays where it is as names are added; the lock lets topologies be built on several
// threads (the GUI's worker beside its own).
struct ClassNames {
  std::mutex lock;
  std::deque<std::string> names{""};  // 0: a Link not yet given a class
};
ClassNames& class_names() {
  static ClassNames names;
  return names;
}

}  // namespace

std::string_view Link::link_class() const {
  auto& c = class_names();
  const std::lock_guard hold(c.lock);
  return c.names.at(class_id);
}

void Link::set_link_class(std::string_view name) {
  auto& c = class_names();
  const std::lock_guard hold(c.lock);
  const auto found = std::find(c.names.begin(), c.names.end(), name);
  if (found != c.names.end()) {
    class_id = static_cast<std::uint16_t>(found - c.names.begin());
    return;
  }
  if (c.names.size() > std::numeric_limits<std::uint16_t>::max()) {
    throw Error("link class " + std::string(name) + ": more than 65,535 classes in one process");
  }
  class_id = static_cast<std::uint16_t>(c.names.size());
  c.names.emplace_back(name);
}

std::string_view name_of(DeviceKind k) {
  for (const auto& [kind, name] : kDeviceKinds) {
    if (kind == k) return name;
  }
  return "?";
}

std::optional<DeviceKind> parse_device_kind(std::string_view text) {
  for (const auto& [kind, name] : kDeviceKinds) {
    if (name == text) return kind;
  }
  return std::nullopt;
}

std::int64_t NodeTemplate::gpu_count() const {
  std::int64_t n = 0;
  for (const auto& d : devices)
    n += d.kind == DeviceKind::gpu ? 1 : 0;
  return n;
}

std::int64_t NodeTemplate::launch_gpus_per_host() const {
  return gpus_per_host > 0 ? gpus_per_host : gpu_count();
}

std::int64_t NodeTemplate::nic_count() const {
  std::int64_t n = 0;
  for (const auto& d : devices)
    n += d.kind == DeviceKind::nic ? 1 : 0;
  return n;
}

Bytes NodeTemplate::host_memory_or_default() const {
  return host_memory.value_or(kDefaultHostMemory);
}

Vertex Topology::gpu(std::int64_t rank) const {
  if (rank < 0 || rank >= gpu_count()) {
    throw Error("GPU rank " + std::to_string(rank) + " out of range (the topology has " +
                std::to_string(gpu_count()) + " GPUs)");
  }
  return gpus_[static_cast<std::size_t>(rank)];
}

Vertex Topology::nic(std::int64_t host, std::int64_t rail) const {
  const auto per = nics_per_node();
  if (host < 0 || host >= nodes_ || rail < 0 || rail >= per) {
    throw Error("no NIC " + std::to_string(rail) + " on node " + std::to_string(host));
  }
  return nics_[static_cast<std::size_t>(host * per + rail)];
}

std::string Topology::describe(EdgeId e) const {
  const auto& g = *graph_;
  const auto& l = g[e];
  return g[boost::source(e, g)].name + " -> " + g[boost::target(e, g)].name + " (" +
         std::string(l.link_class()) + (l.count > 1 ? " x" + std::to_string(l.count) : "") + ", " +
         gbps(l.bandwidth_Bps) + ")";
}

class TopologyBuilder {
 public:
  // Builds into `t` in place: Boost's adjacency_list would otherwise be copied edge by edge.
  TopologyBuilder(Topology& t, const NodeTemplate& node, std::int64_t nodes,
                  const InterconnectTable& table)
      : table_(table), t_(t) {
    t_.node_ = node;
    t_.nodes_ = nodes;
    t_.gpus_per_node_ = node.gpu_count();
  }

  void build() {
    check_node();
    for (std::int64_t host = 0; host < t_.nodes_; ++host)
      add_node(host);
    if (t_.nodes_ > 1) add_network();
    check_gpus_connected();
    release_growth();
  }

 private:
  // The graph's vectors grew by doubling: a 2,048-node cluster's vertices would keep a third of
  // their 5.8 MB unused for the whole run.
  void release_growth() {
    auto& g = *t_.graph_;
    g.m_vertices.shrink_to_fit();
    for (auto& v : g.m_vertices)
      v.m_out_edges.shrink_to_fit();
  }

  void check_node() {
    const auto& n = t_.node_;
    if (t_.nodes_ < 1) throw Error("{nodes}: must be a positive integer");
    if (n.gpu_count() == 0) throw Error(n.origin + ": the node has no GPUs");
    std::set<std::string> ids;
    std::map<std::string, DeviceKind> kinds;
    for (const auto& d : n.devices) {
      if (!ids.insert(d.id).second) throw Error(d.where + ": device '" + d.id + "' listed twice");
      kinds[d.id] = d.kind;
    }
    std::set<std::pair<std::string, std::string>> pairs;
    for (const auto& l : n.links) {
      for (const auto& end : {l.from, l.to}) {
        if (ids.count(end) == 0) throw Error(l.where + ": link to unknown device '" + end + "'");
      }
      if (l.from == l.to) throw Error(l.where + ": link from '" + l.from + "' to itself");
      const auto key = std::minmax(l.from, l.to);
      if (!pairs.insert(key).second) {
        throw Error(l.where + ": link " + l.from + " - " + l.to +
                    " listed twice (use \"count\" for bonded links)");
      }
      if (l.count < 1) throw Error(l.where + ": count must be a positive integer");
      const LinkClass* cls = nullptr;
      try {
        cls = &table_.find(l.link_class);
      } catch (const Error& e) {
        throw Error(l.where + ": " + e.what());
      }
      check_link_kind(l, *cls, kinds.at(l.from), kinds.at(l.to));
    }
    if (t_.nodes_ > 1 && !n.network) {
      throw Error(n.origin + ": {nodes} " + std::to_string(t_.nodes_) +
                  " needs a \"network\" section (NIC link class) in the node topology");
    }
    if (t_.nodes_ > 1 && n.nic_count() == 0) {
      throw Error(n.origin + ": {nodes} " + std::to_string(t_.nodes_) + " needs NICs in the node");
    }
  }

  // NVSwitches carry NVLink only; socket links join CPUs; network links are made from the
  // "network" section, not listed inside a node.
  static void check_link_kind(const LinkSpec& l, const LinkClass& c, DeviceKind a, DeviceKind b) {
    const auto where = l.where + ": link " + l.from + " - " + l.to + " (" + l.link_class + ")";
    const bool nvswitch = a == DeviceKind::nvswitch || b == DeviceKind::nvswitch;
    if (nvswitch && c.kind != LinkKind::nvlink) {
      throw Error(where + ": an NVSwitch connects over NVLink classes only");
    }
    if (c.kind == LinkKind::socket && (a != DeviceKind::cpu || b != DeviceKind::cpu)) {
      throw Error(where + ": socket link classes join two CPUs");
    }
    if (c.kind == LinkKind::network) {
      throw Error(where +
                  ": network classes are set in the \"network\" section, which joins "
                  "the NICs to the switches");
    }
  }

  Vertex add_vertex(const Device& d) { return boost::add_vertex(d, (*t_.graph_)); }

  void add_link(Vertex a, Vertex b, const LinkClass& c, std::int64_t count,
                std::optional<double> bandwidth) {
    Link l;
    l.set_link_class(c.name);
    l.kind = c.kind;
    if (count > std::numeric_limits<std::int32_t>::max())
      throw Error("link class " + c.name + ": " + std::to_string(count) + " parallel links");
    l.count = static_cast<std::int32_t>(count);
    l.bandwidth_Bps = bandwidth.value_or(c.bandwidth_Bps * static_cast<double>(count));
    l.efficiency = c.efficiency;
    l.in_switch_reduction = c.in_switch_reduction;
    if (t_.physical_links_ >= std::numeric_limits<std::uint32_t>::max() / 2) {
      throw Error(t_.node_.origin + ": more than " +
                  std::to_string(std::numeric_limits<std::uint32_t>::max() / 2) + " links");
    }
    l.index = static_cast<std::uint32_t>(2 * t_.physical_links_++);
    boost::add_edge(a, b, l, (*t_.graph_));
    l.index += 1;
    boost::add_edge(b, a, l, (*t_.graph_));
  }

  void add_node(std::int64_t host) {
    const auto& n = t_.node_;
    const std::string prefix = t_.nodes_ > 1 ? "n" + std::to_string(host) + "/" : "";
    std::map<std::string, Vertex> local;
    std::int64_t gpu_index = 0;
    std::int64_t nic_index = 0;
    for (const auto& d : n.devices) {
      Device v{d.kind, prefix + d.id, host, -1, -1};
      if (d.kind == DeviceKind::gpu) v.gpu_rank = host * t_.gpus_per_node_ + gpu_index++;
      if (d.kind == DeviceKind::nic) v.rail = nic_index++;
      local[d.id] = add_vertex(v);
      if (d.kind == DeviceKind::gpu) t_.gpus_.push_back(local[d.id]);
      if (d.kind == DeviceKind::nic) t_.nics_.push_back(local[d.id]);
    }
    for (const auto& l : n.links) {
      add_link(local.at(l.from), local.at(l.to), table_.find(l.link_class), l.count,
               l.bandwidth_Bps);
    }
  }

  void add_network() {
    const auto& net = *t_.node_.network;
    const auto& port = table_.find(net.link_class);
    const std::int64_t rails = t_.node_.nic_count();
    const std::int64_t per_leaf = std::min(net.nodes_per_leaf, t_.nodes_);
    const std::int64_t per_pod =
        net.nodes_per_pod > 0 ? std::min(net.nodes_per_pod, t_.nodes_) : t_.nodes_;
    const std::vector<Vertex> spines = add_pods(net, port, rails, per_pod);
    std::vector<Vertex> leaves;
    for (std::int64_t g = 0; g < ceil_div(t_.nodes_, per_leaf); ++g) {
      const std::int64_t members = std::min(per_leaf, t_.nodes_ - g * per_leaf);
      const Vertex spine = spines[static_cast<std::size_t>(g * per_leaf / per_pod)];
      for (std::int64_t r = 0; r < rails; ++r) {
        const auto leaf =
            add_vertex({DeviceKind::network_switch,
                        "leaf-r" + std::to_string(r) + "-g" + std::to_string(g), -1, -1, r});
        leaves.push_back(leaf);
        const double uplink =
            port.bandwidth_Bps * static_cast<double>(members) / net.oversubscription;
        add_link(leaf, spine, port, members, uplink);
      }
    }
    for (const auto nic : t_.nics_) {
      const auto& d = (*t_.graph_)[nic];
      const std::int64_t group = d.host / per_leaf;
      add_link(nic, leaves[static_cast<std::size_t>(group * rails + d.rail)], port, 1,
               std::nullopt);
    }
  }

  // One aggregated spine per pod ("spine" when there is one pod); with several, a core joins
  // them, each pod's link to it carrying the pod's node-facing capacity over its
  // oversubscription.
  std::vector<Vertex> add_pods(const NetworkSpec& net, const LinkClass& port, std::int64_t rails,
                               std::int64_t per_pod) {
    const std::int64_t pods = ceil_div(t_.nodes_, per_pod);
    if (pods == 1) return {add_vertex({DeviceKind::network_switch, "spine", -1, -1, -1})};
    const Vertex core = add_vertex({DeviceKind::network_switch, "core", -1, -1, -1});
    std::vector<Vertex> spines;
    for (std::int64_t p = 0; p < pods; ++p) {
      const std::int64_t members = std::min(per_pod, t_.nodes_ - p * per_pod);
      spines.push_back(
          add_vertex({DeviceKind::network_switch, "spine-p" + std::to_string(p), -1, -1, -1}));
      const double uplink =
          port.bandwidth_Bps * static_cast<double>(members * rails) / net.pod_oversubscription;
      add_link(spines.back(), core, port, members * rails, uplink);
    }
    return spines;
  }

  // Every GPU must reach GPU 0 over links (directions are symmetric).
  void check_gpus_connected() {
    const auto& g = (*t_.graph_);
    std::vector<char> seen(boost::num_vertices(g), 0);
    std::deque<Vertex> queue{t_.gpus_.front()};
    seen[t_.gpus_.front()] = 1;
    while (!queue.empty()) {
      const auto v = queue.front();
      queue.pop_front();
      for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
        const auto w = boost::target(e, g);
        if (!seen[w]) {
          seen[w] = 1;
          queue.push_back(w);
        }
      }
    }
    for (const auto v : t_.gpus_) {
      if (!seen[v]) {
        throw Error(t_.node_.origin + ": " + g[v].name + " is not connected to " +
                    g[t_.gpus_.front()].name + " by any path of links");
      }
    }
  }

  const InterconnectTable& table_;
  Topology& t_;
};

Topology Topology::build(const NodeTemplate& node, std::int64_t nodes,
                         const InterconnectTable& table) {
  Topology t;
  TopologyBuilder(t, node, nodes, table).build();
  return t;
}

std::string to_dot(const Topology& t) {
  const auto& g = t.graph();
  std::string out = "graph \"" + t.node().name + "\" {\n  node [style=filled];\n";
  auto style = [](DeviceKind k) -> std::string {
    switch (k) {
      case DeviceKind::gpu:
        return "shape=box, fillcolor=\"#76b900\"";
      case DeviceKind::nvswitch:
        return "shape=hexagon, fillcolor=\"#b3d98c\"";
      case DeviceKind::cpu:
        return "shape=box3d, fillcolor=\"#9ecae1\"";
      case DeviceKind::pcie_switch:
        return "shape=ellipse, fillcolor=\"#deebf7\"";
      case DeviceKind::nic:
        return "shape=cds, fillcolor=\"#fdd0a2\"";
      case DeviceKind::network_switch:
        return "shape=doubleoctagon, fillcolor=\"#fdae6b\"";
    }
    return "";
  };
  for (const auto v : boost::make_iterator_range(boost::vertices(g))) {
    out +=
        "  v" + std::to_string(v) + " [label=\"" + g[v].name + "\", " + style(g[v].kind) + "];\n";
  }
  std::set<std::int64_t> drawn;
  for (const auto v : boost::make_iterator_range(boost::vertices(g))) {
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto& l = g[e];
      if (!drawn.insert(l.physical_id()).second) continue;
      out += "  v" + std::to_string(boost::source(e, g)) + " -- v" +
             std::to_string(boost::target(e, g)) + " [label=\"" + std::string(l.link_class()) +
             (l.count > 1 ? " x" + std::to_string(l.count) : "") + "\\n" + gbps(l.bandwidth_Bps) +
             "\"];\n";
    }
  }
  return out + "}\n";
}

}  // namespace dtplan
