// `dtplan topo`: the devices and links of a topology, the rings NCCL-style search finds over
// its GPUs, and the link that limits them; --dot writes the graph for Graphviz.
#include <map>
#include <memory>
#include <set>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/cost/collectives.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

struct TopoOptions {
  TopologyOptions topology;
  std::string data_dir;
  std::optional<std::int64_t> gpus;
  std::string dot;
  bool json = false;
};

std::string gbps(double bytes_per_s) {
  return fixed(bytes_per_s / 1e9, 1);
}

std::string join_ranks(const std::vector<std::int64_t>& ranks, std::size_t limit = 32) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < limit; ++i) {
    out += (i ? " " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > limit) out += " ... (" + std::to_string(ranks.size()) + " GPUs)";
  return out;
}

nlohmann::json bottleneck_json(const cost::Bottleneck& b) {
  return {{"from", b.from},
          {"to", b.to},
          {"kind", b.kind},
          {"class", b.link_class},
          {"bandwidth_Bps", b.bandwidth_Bps},
          {"achieved_Bps", b.achieved_Bps}};
}

// Physical links of the first node (and the network links of its NICs), one line each.
void print_links(std::ostream& out, const Topology& t) {
  const auto& g = t.graph();
  TextTable table({"link", "class", "GB/s per direction", "achieved"});
  std::set<std::int64_t> seen;
  for (const auto v : boost::make_iterator_range(boost::vertices(g))) {
    if (g[v].host > 0) continue;
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const auto& l = g[e];
      const auto w = boost::target(e, g);
      if (!seen.insert(l.physical_id()).second || (g[w].host > 0)) continue;
      table.add_row(
          {g[v].name + " - " + g[w].name,
           std::string(l.link_class()) + (l.count > 1 ? " x" + std::to_string(l.count) : ""),
           gbps(l.bandwidth_Bps), gbps(l.effective_Bps())});
    }
  }
  table.print(out, {1});
}

void print_devices(std::ostream& out, const Topology& t) {
  std::map<DeviceKind, std::int64_t> count;
  const auto& g = t.graph();
  for (const auto v : boost::make_iterator_range(boost::vertices(g)))
    ++count[g[v].kind];
  std::string line;
  for (const auto& [kind, n] : count) {
    line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(name_of(kind));
  }
  out << "  devices: " << line << " (" << t.physical_link_count() << " links)\n";
}

int run_topo(const TopoOptions& o, const RunContext& ctx) {
  const auto data = data_dir_of({"", "", o.data_dir});
  const auto loaded = load_topology(o.topology, data);
  const auto& t = loaded.topology;
  if (!o.dot.empty()) {
    const auto dot = to_dot(t);
    if (o.dot == "-") {
      ctx.out << dot;
      return 0;
    }
    write_file_atomically(o.dot, dot, "--dot");
  }
  const std::int64_t n = o.gpus.value_or(t.gpu_count());
  cost::CommModel model(t, loaded.table, n);  // checks the GPU count
  const auto& plan = model.rings();
  if (o.json) {
    nlohmann::json j = report_preamble("topo", ctx.args);
    j["topology"] = {{"name", t.node().name},
                     {"origin", t.node().origin},
                     {"nodes", t.nodes()},
                     {"gpus", t.gpu_count()},
                     {"assumptions", t.node().assumptions}};
    auto rings = nlohmann::json::array();
    for (std::size_t i = 0; i < plan.rings.size(); ++i) {
      rings.push_back(
          {{"gpus", plan.rings[i]}, {"rate_Bps", plan.rates_Bps[i]}, {"rail", plan.rails[i]}});
    }
    j["rings"] = rings;
    j["ring"] = plan.rings.front();
    j["ring_bandwidth_Bps"] = plan.bandwidth_Bps;
    if (n == 1) {
      j["rings"] = nlohmann::json::array();  // one GPU: nothing to exchange, no ring
      j["bottleneck"] = nullptr;
    } else {
      j["bottleneck"] = bottleneck_json(plan.bottleneck);
      j["bottleneck"]["crossings_per_ring"] = plan.bottleneck_crossings;
    }
    ctx.out << j.dump(2) << '\n';
    return 0;
  }
  out_header(ctx.out, t);
  print_devices(ctx.out, t);
  for (const auto& a : t.node().assumptions)
    ctx.out << "  assumed: " << a << '\n';
  ctx.out << "\n  links" << (t.nodes() > 1 ? " of node 0 and its NICs" : "") << ":\n";
  print_links(ctx.out, t);
  if (n == 1) {
    ctx.out << "\n  1 GPU (" << t.graph()[t.gpu(0)].name
            << "): no ring, a single GPU exchanges nothing\n";
    return 0;
  }
  ctx.out << "\n  rings over " << n << " GPUs (" << (plan.exhaustive ? "exhaustive" : "heuristic")
          << " search in each node, " << plan.candidates << " orders evaluated):\n";
  TextTable rings({"channel", "GPU order", "GB/s", "rail"});
  for (std::size_t i = 0; i < plan.rings.size(); ++i) {
    rings.add_row({std::to_string(i), join_ranks(plan.rings[i]), gbps(plan.rates_Bps[i]),
                   plan.rails[i] < 0 ? "-" : std::to_string(plan.rails[i])});
  }
  rings.print(ctx.out, {1});
  const auto& b = plan.bottleneck;
  ctx.out << "\n  ring bandwidth: " << gbps(plan.bandwidth_Bps) << " GB/s per GPU\n"
          << "  bottleneck: " << b.from << " -> " << b.to << " (" << b.kind << ", " << b.link_class
          << ", " << gbps(b.bandwidth_Bps) << " GB/s nominal, " << gbps(b.achieved_Bps)
          << " achieved); the first ring crosses this link " << plan.bottleneck_crossings
          << (plan.bottleneck_crossings == 1 ? " time" : " times") << " (both directions)\n";
  return 0;
}

}  // namespace

void out_header(std::ostream& out, const Topology& t) {
  out << "dtplan topo: " << t.node().name << " (" << t.node().origin << "), " << t.nodes()
      << (t.nodes() == 1 ? " node, " : " nodes, ") << t.gpu_count() << " GPUs\n";
  if (!t.node().description.empty()) out << "  " << t.node().description << '\n';
}

Command register_topo_command(CLI::App& app) {
  auto options = std::make_shared<TopoOptions>();
  auto* cmd = app.add_subcommand("topo", "Devices, links, rings and the bottleneck of a topology");
  add_topology_options(*cmd, options->topology, true);
  cmd->add_option("--gpus", options->gpus, "GPUs in the rings (default: all)");
  cmd->add_option("--dot", options->dot, "write the graph as Graphviz DOT to FILE (- for stdout)");
  cmd->add_option("--data-dir", options->data_dir, "data directory");
  cmd->add_flag("--json", options->json, "machine-readable output");
  return {"topo", [options](const RunContext& ctx) { return run_topo(*options, ctx); }};
}

}  // namespace dtplan::cli
