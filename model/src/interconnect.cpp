// Loading the interconnect constants table.
#include "dtplan/model/interconnect.hpp"

#include <set>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

namespace {
constexpr std::array<std::string_view, 4> kLinkKinds{"nvlink", "pcie", "socket", "network"};
constexpr std::array<std::string_view, 3> kProtocolNames{"LL", "LL128", "Simple"};
constexpr std::array<std::string_view, 3> kAlgorithmNames{"ring", "tree", "nvls"};
}  // namespace

std::string_view name_of(LinkKind k) {
  return kLinkKinds[static_cast<std::size_t>(k)];
}
std::string_view name_of(Protocol p) {
  return kProtocolNames[static_cast<std::size_t>(p)];
}
std::string_view name_of(CommAlgorithm a) {
  return kAlgorithmNames[static_cast<std::size_t>(a)];
}

namespace {

LinkKind parse_kind(const ObjectReader& r) {
  const auto text = r.string("kind");
  for (std::size_t i = 0; i < kLinkKinds.size(); ++i) {
    if (text == kLinkKinds[i]) return static_cast<LinkKind>(i);
  }
  r.fail("kind", "must be one of nvlink, pcie, socket, network");
}

LinkClass read_class(const ObjectReader& r) {
  LinkClass c;
  c.name = r.string("name");
  c.kind = parse_kind(r);
  c.bandwidth_Bps = r.number("bandwidth_Bps", kLinkBandwidth);
  c.efficiency = r.number("efficiency", kFraction);
  c.in_switch_reduction = r.optional_boolean("in_switch_reduction").value_or(false);
  r.optional_string("note");
  r.reject_unknown_keys();
  return c;
}

}  // namespace

CpuVendor parse_cpu_vendor(std::string_view text) {
  if (text == "intel") return CpuVendor::intel;
  if (text == "amd") return CpuVendor::amd;
  if (text == "other") return CpuVendor::other;
  throw Error("unknown CPU vendor '" + std::string(text) + "' (known: intel, amd, other)");
}

namespace {

// {"base_latency_s": x, "bandwidth_fraction": f, "hop_latency_s": {"nvlink": a, "pcie": b,
//  "network": c}, "multi_node_step_s": {"intel": i, "amd": a, "other": o}}; socket links use
// the pcie latency.
ProtocolCost read_protocol(const ObjectReader& r) {
  ProtocolCost p;
  p.base_latency_s = r.number("base_latency_s", kSeconds);
  p.bandwidth_fraction = r.number("bandwidth_fraction", kFraction);
  p.bandwidth_fraction_one_node = r.has("bandwidth_fraction_one_node")
                                      ? r.number("bandwidth_fraction_one_node", kFraction)
                                      : p.bandwidth_fraction;
  r.optional_number("bandwidth_fraction_one_node");
  const auto hops = r.object("hop_latency_s");
  p.hop_latency_s[static_cast<std::size_t>(LinkKind::nvlink)] = hops.number("nvlink", kSeconds);
  p.hop_latency_s[static_cast<std::size_t>(LinkKind::pcie)] = hops.number("pcie", kSeconds);
  p.hop_latency_s[static_cast<std::size_t>(LinkKind::socket)] = hops.number("pcie", kSeconds);
  p.hop_latency_s[static_cast<std::size_t>(LinkKind::network)] = hops.number("network", kSeconds);
  hops.reject_unknown_keys();
  if (const auto step = r.optional_object("multi_node_step_s")) {
    p.multi_node_step_s[static_cast<std::size_t>(CpuVendor::other)] =
        step->number("other", kSeconds);
    p.multi_node_step_s[static_cast<std::size_t>(CpuVendor::intel)] =
        step->number("intel", kSeconds);
    p.multi_node_step_s[static_cast<std::size_t>(CpuVendor::amd)] = step->number("amd", kSeconds);
    step->reject_unknown_keys();
  }
  if (const auto caps = r.optional_object("channel_max_Bps_across_nodes")) {
    for (const auto& item : r.value("channel_max_Bps_across_nodes").items()) {
      const auto cap = caps->object(item.key());
      p.channel_max_Bps_across_nodes[item.key()] = {cap.number("two_nodes", kLinkBandwidth),
                                                    cap.number("more_nodes", kLinkBandwidth)};
      cap.reject_unknown_keys();
    }
  }
  if (r.has("bandwidth_factor_by_size")) {
    const auto& factors = r.value("bandwidth_factor_by_size");
    if (!factors.is_array() || factors.empty() || factors.size() > 64) {
      r.fail("bandwidth_factor_by_size", "must be an array of 1 to 64 factors");
    }
    for (const auto& f : factors) {
      if (!f.is_number() || !(f.get<double>() > 0.0 && f.get<double>() <= 1.0)) {
        r.fail("bandwidth_factor_by_size",
               "every factor must be a number in (0, 1], got " + f.dump());
      }
      p.bandwidth_factor_by_size.push_back(f.get<double>());
    }
  }
  if (const auto factors = r.optional_object("multi_node_all_reduce_latency_factor")) {
    for (const auto& item : r.value("multi_node_all_reduce_latency_factor").items())
      p.multi_node_all_reduce_latency_factor[item.key()] = factors->number(item.key(), {1.0, 10.0});
  }
  r.reject_unknown_keys();
  return p;
}

AlgorithmCost read_algorithm(const ObjectReader& r) {
  AlgorithmCost a;
  a.bandwidth_efficiency =
      r.has("bandwidth_efficiency") ? r.number("bandwidth_efficiency", kFraction) : 1.0;
  r.optional_number("bandwidth_efficiency");
  if (const auto by_generation = r.optional_object("generation_efficiency")) {
    for (const auto& item : r.value("generation_efficiency").items()) {
      a.generation_efficiency[item.key()] = by_generation->number(item.key(), kFraction);
    }
    a.fitted_generation = r.string("fitted_generation");
    if (a.generation_efficiency.count(a.fitted_generation) == 0) {
      r.fail("fitted_generation", "'" + a.fitted_generation +
                                      "' is not a key of generation_efficiency, so the fit "
                                      "cannot be scaled to another generation");
    }
  }
  r.optional_string("fitted_generation");
  r.optional_string("note");
  for (std::size_t i = 0; i < kProtocolNames.size(); ++i) {
    if (const auto p = r.optional_object(kProtocolNames[i])) a.protocols[i] = read_protocol(*p);
  }
  r.reject_unknown_keys();
  return a;
}

}  // namespace

double AlgorithmCost::efficiency_for(std::string_view nvlink_class) const {
  const auto it = generation_efficiency.find(nvlink_class);
  if (it == generation_efficiency.end()) return bandwidth_efficiency;
  return bandwidth_efficiency * it->second / generation_efficiency.at(fitted_generation);
}

InterconnectTable InterconnectTable::load(const std::filesystem::path& path) {
  const auto root = ObjectReader::root(read_json_file(path));
  root.check_schema_version(1);
  InterconnectTable t;
  std::set<std::string> names;
  for (const auto& entry : root.objects("link_classes")) {
    auto c = read_class(entry);
    if (!names.insert(c.name).second) entry.fail("name", "'" + c.name + "' is defined twice");
    t.classes_.push_back(std::move(c));
  }
  const auto algorithms = root.object("algorithms");
  for (std::size_t i = 0; i < kAlgorithmNames.size(); ++i) {
    t.algorithms_[i] = read_algorithm(algorithms.object(kAlgorithmNames[i]));
    // NVLS generations name NVLink classes too.
    for (const auto& [name, efficiency] : t.algorithms_[i].generation_efficiency) {
      if (names.count(name) == 0 || t.find(name).kind != LinkKind::nvlink) {
        algorithms.fail(kAlgorithmNames[i], "generation_efficiency: '" + name +
                                                "' is not an NVLink class of link_classes");
      }
    }
    // A channel cap names the NVLink class of a GPU generation.
    for (const auto& protocol : t.algorithms_[i].protocols) {
      if (!protocol) continue;
      for (const auto& [name, cap] : protocol->channel_max_Bps_across_nodes) {
        const bool nvlink = names.count(name) > 0 && t.find(name).kind == LinkKind::nvlink;
        if (!nvlink) {
          algorithms.fail(kAlgorithmNames[i], "channel_max_Bps_across_nodes: '" + name +
                                                  "' is not an NVLink class of link_classes");
        }
      }
      for (const auto& [name, factor] : protocol->multi_node_all_reduce_latency_factor) {
        const bool nvlink = names.count(name) > 0 && t.find(name).kind == LinkKind::nvlink;
        if (!nvlink) {
          algorithms.fail(kAlgorithmNames[i], "multi_node_all_reduce_latency_factor: '" + name +
                                                  "' is not an NVLink class of link_classes");
        }
      }
    }
  }
  algorithms.reject_unknown_keys();
  root.optional_string("source");
  root.reject_unknown_keys();
  return t;
}

const LinkClass& InterconnectTable::find(std::string_view name) const {
  std::vector<std::string> names;
  for (const auto& c : classes_) {
    if (c.name == name) return c;
    names.push_back(c.name);
  }
  throw Error(unknown_name_message("link class", name, names));
}

}  // namespace dtplan
