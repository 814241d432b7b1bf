// Node topologies from our JSON format and from presets.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/model/topology_io.hpp"

namespace dtplan {

namespace {

DeviceSpec read_device(const ObjectReader& r) {
  DeviceSpec d;
  d.id = r.string("id");
  const auto kind = parse_device_kind(r.string("kind"));
  if (!kind) {
    r.fail("kind",
           "unknown device kind (known: gpu, pcie_switch, cpu, nvswitch, nic, "
           "network_switch)");
  }
  d.kind = *kind;
  d.where = r.location("id");
  r.reject_unknown_keys();
  return d;
}

LinkSpec read_link(const ObjectReader& r) {
  LinkSpec l;
  l.from = r.string("from");
  l.to = r.string("to");
  l.link_class = r.string("class");
  l.count = r.has("count") ? r.integer("count", 1, 1024) : 1;
  l.bandwidth_Bps = r.optional_number("bandwidth_Bps", kLinkBandwidth);
  l.where = r.location("class");
  r.reject_unknown_keys();
  return l;
}

NetworkSpec read_network(const ObjectReader& r) {
  NetworkSpec n;
  n.link_class = r.string("class");
  n.nodes_per_leaf = r.has("nodes_per_leaf") ? r.integer("nodes_per_leaf", 1, 100'000) : 32;
  // Oversubscription is downlinks over uplinks of a leaf switch: 1 (full bisection) to a
  // few dozen; beyond 1024 there would be no uplink at all.
  n.oversubscription = r.optional_number("oversubscription", {1.0, 1024.0}).value_or(1.0);
  if (r.has("nodes_per_pod")) {
    n.nodes_per_pod = r.integer("nodes_per_pod", 1, 10'000'000);
    if (n.nodes_per_pod % n.nodes_per_leaf != 0) {
      r.fail("nodes_per_pod", "a pod holds whole leaf groups: " + std::to_string(n.nodes_per_pod) +
                                  " is not a multiple of nodes_per_leaf " +
                                  std::to_string(n.nodes_per_leaf));
    }
  }
  n.pod_oversubscription = r.optional_number("pod_oversubscription", {1.0, 1024.0}).value_or(1.0);
  if (r.has("pod_oversubscription") && n.nodes_per_pod == 0) {
    r.fail("pod_oversubscription", "needs nodes_per_pod: the pods it is between");
  }
  r.reject_unknown_keys();
  return n;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

NodeTemplate node_from_json(const ObjectReader& r) {
  r.check_schema_version(1);
  NodeTemplate n;
  n.name = r.string("name");
  n.description = r.optional_string("description").value_or("");
  r.optional_string("reference");
  n.origin = r.document().origin;
  for (const auto& d : r.objects("devices"))
    n.devices.push_back(read_device(d));
  for (const auto& l : r.objects("links"))
    n.links.push_back(read_link(l));
  if (r.has("network")) n.network = read_network(r.object("network"));
  if (r.has("gpus_per_host")) {
    n.gpus_per_host = r.integer("gpus_per_host", 1, 1'000'000);
    if (n.gpu_count() % n.gpus_per_host != 0) {
      r.fail("gpus_per_host", "the node's " + std::to_string(n.gpu_count()) +
                                  " GPUs do not split into hosts of " +
                                  std::to_string(n.gpus_per_host));
    }
  }
  if (const auto gib = r.optional_number("host_memory_GiB")) {
    // Up to 1 PiB per node: larger is a typo (bytes given as GiB), and would overflow Bytes.
    if (!(*gib > 0.0 && *gib <= 1048576.0)) {
      r.fail("host_memory_GiB", "host memory per node in GiB: must be in (0, 1048576]");
    }
    n.host_memory = Bytes{static_cast<std::int64_t>(std::llround(*gib * kBytesPerGiB))};
  }
  if (const auto vendor = r.optional_string("cpu_vendor")) {
    try {
      n.cpu_vendor = parse_cpu_vendor(*vendor);
    } catch (const Error& e) {
      r.fail("cpu_vendor", e.what());
    }
  }
  r.reject_unknown_keys();
  return n;
}

std::vector<std::string> list_topology_presets(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  if (ec) throw Error(dir.string() + ": cannot list topology presets: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

NodeTemplate load_node_template(const std::string& preset_or_path,
                                const std::filesystem::path& topologies_dir,
                                const SmiAssumptions& assume) {
  std::filesystem::path path(preset_or_path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(preset_or_path + ": a directory, not a topology file");
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    const auto preset = topologies_dir / (preset_or_path + ".json");
    if (!std::filesystem::is_regular_file(preset, ec)) {
      if (preset_or_path.find('/') != std::string::npos) {
        throw Error(preset_or_path + ": no such file");
      }
      throw Error(
          unknown_name_message("topology", preset_or_path, list_topology_presets(topologies_dir)) +
          " (or give a topology JSON or `nvidia-smi topo -m` output file)");
    }
    path = preset;
  }
  const std::string text = read_text(path);
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    return node_from_json(ObjectReader::root(parse_json(text, path.string())));
  }
  return parse_nvidia_smi_topo(text, path.string(), assume);
}

}  // namespace dtplan
