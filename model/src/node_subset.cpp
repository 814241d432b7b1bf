// Part of a multi-host node (see node_subset.hpp).
#include "dtplan/model/node_subset.hpp"

#include <deque>
#include <map>
#include <set>
#include <string>

#include "dtplan/model/error.hpp"

namespace dtplan {

namespace {

void check_subset(const NodeTemplate& node, std::int64_t gpus) {
  const std::int64_t all = node.gpu_count(), per_host = node.gpus_per_host;
  const std::string named = "{gpus_per_node} " + std::to_string(gpus) + ": ";
  if (per_host <= 0 || per_host >= all) {
    throw Error(named + "node '" + node.name + "' is one host of " + std::to_string(all) +
                " GPUs; only a node of several hosts (an NVL72 rack) is used in part");
  }
  if (gpus < 1) throw Error(named + "GPUs per node are a positive number");
  if (gpus > all || gpus % per_host != 0) {
    throw Error(named + "node '" + node.name + "' is used in whole hosts of " +
                std::to_string(per_host) + " GPUs, up to its " + std::to_string(all));
  }
}

// Shared fabric: reached from a kept GPU it stays, but it leads nowhere else.
bool shared(DeviceKind k) {
  return k == DeviceKind::nvswitch || k == DeviceKind::network_switch;
}

// The devices the kept GPUs reach without passing a dropped GPU or crossing shared fabric.
std::set<std::string> reached(const NodeTemplate& node, const std::set<std::string>& kept,
                              const std::set<std::string>& dropped) {
  std::map<std::string, std::vector<std::string>> next;
  for (const auto& l : node.links) {
    next[l.from].push_back(l.to);
    next[l.to].push_back(l.from);
  }
  std::map<std::string, DeviceKind> kind;
  for (const auto& d : node.devices)
    kind[d.id] = d.kind;
  std::set<std::string> seen = kept;
  std::deque<std::string> queue(kept.begin(), kept.end());
  while (!queue.empty()) {
    const auto at = queue.front();
    queue.pop_front();
    if (shared(kind[at])) continue;
    for (const auto& to : next[at]) {
      if (dropped.count(to) || !seen.insert(to).second) continue;
      queue.push_back(to);
    }
  }
  return seen;
}

}  // namespace

NodeTemplate first_hosts(const NodeTemplate& node, std::int64_t gpus) {
  if (gpus == node.gpu_count()) return node;
  check_subset(node, gpus);
  std::set<std::string> kept, dropped;
  for (const auto& d : node.devices) {
    if (d.kind != DeviceKind::gpu) continue;
    (static_cast<std::int64_t>(kept.size()) < gpus ? kept : dropped).insert(d.id);
  }
  const auto keep = reached(node, kept, dropped);
  NodeTemplate out = node;
  out.devices.clear();
  for (const auto& d : node.devices)
    if (keep.count(d.id)) out.devices.push_back(d);
  out.links.clear();
  for (const auto& l : node.links)
    if (keep.count(l.from) && keep.count(l.to)) out.links.push_back(l);
  const std::int64_t hosts = gpus / node.gpus_per_host;
  const std::int64_t all_hosts = node.gpu_count() / node.gpus_per_host;
  if (node.host_memory) {
    out.host_memory = Bytes{static_cast<std::int64_t>(static_cast<double>(node.host_memory->value) *
                                                      static_cast<double>(hosts) /
                                                      static_cast<double>(all_hosts))};
  }
  out.assumptions.push_back("the first " + std::to_string(gpus) + " of the node's " +
                            std::to_string(node.gpu_count()) + " GPUs used (" +
                            std::to_string(hosts) + " of " + std::to_string(all_hosts) +
                            " hosts), the rest left out");
  return out;
}

}  // namespace dtplan
