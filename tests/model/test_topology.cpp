// Tests for model/src/topology.cpp and topology_json.cpp: presets build, nodes replicate over a
// rail-optimised network, and broken topologies are refused with the reason.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_topology.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;
const std::filesystem::path kTopo = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "topo";

InterconnectTable table() {
  return InterconnectTable::load(kData / "interconnect.json");
}

Topology build(const std::string& name, std::int64_t nodes = 1) {
  return Topology::build(load_node_template(name, kData / "topologies"), nodes, table());
}

std::string build_error(const std::string& file, std::int64_t nodes = 1) {
  try {
    build((kTopo / file).string(), nodes);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::int64_t count(const Topology& t, DeviceKind k) {
  std::int64_t n = 0;
  for (const auto v : boost::make_iterator_range(boost::vertices(t.graph()))) {
    n += t.graph()[v].kind == k ? 1 : 0;
  }
  return n;
}
}  // namespace

TEST_CASE("every preset builds with the GPUs it names") {
  const std::pair<const char*, std::int64_t> presets[] = {
      {"pcie-1switch-4", 4}, {"pcie-1switch-8", 8}, {"pcie-split-8", 8}, {"dgx1-v100", 8},
      {"dgx-a100", 8},       {"dgx-h100", 8},       {"dgx-b200", 8},     {"hgx-a800", 8},
      {"hgx-h800", 8},       {"hgx-b300", 8},       {"mi300x-8", 8},     {"mi355x-8", 8},
      {"abci-a100", 8},      {"gb200-nvl72", 72},   {"gb300-nvl72", 72}, {"oci-bm-gpu4-8", 8}};
  for (const auto& [name, gpus] : presets) {
    INFO(name);
    const auto t = build(name);
    CHECK(t.gpu_count() == gpus);
    CHECK(t.gpus_per_node() == gpus);
  }
  CHECK(list_topology_presets(kData / "topologies").size() == 16);
}

TEST_CASE("OCI BM.GPU4.8: DGX A100's GPUs with 16 RoCE 100 Gb/s ports, four per PCIe switch") {
  const auto t = build("oci-bm-gpu4-8");
  CHECK(count(t, DeviceKind::nic) == 16);        // 8 x 2 x 100 Gb/s (OCI's shape table)
  CHECK(t.node().cpu_vendor == CpuVendor::amd);  // 2 x AMD EPYC 7542
  REQUIRE(t.node().network);
  CHECK(t.node().network->link_class == "roce_100g");
}

TEST_CASE("DGX A100: NVSwitch with 12 NVLinks per GPU, 8 NICs") {
  const auto t = build("dgx-a100");
  const auto& g = t.graph();
  CHECK(count(t, DeviceKind::nvswitch) == 1);
  CHECK(count(t, DeviceKind::nic) == 8);
  bool found = false;
  for (const auto e : boost::make_iterator_range(boost::out_edges(t.gpu(3), g))) {
    if (g[boost::target(e, g)].kind != DeviceKind::nvswitch) continue;
    found = true;
    CHECK(g[e].count == 12);
    CHECK(g[e].bandwidth_Bps == Approx(12 * 25e9));  // 300 GB/s per direction
  }
  CHECK(found);
}

TEST_CASE("nodes replicate and join through rail leaves and a spine") {
  const auto one = build("dgx-h100");
  const auto four = build("dgx-h100", 4);
  CHECK(four.gpu_count() == 32);
  CHECK(four.nodes() == 4);
  // 8 rails x 1 group of 4 nodes (32 nodes per leaf) = 8 leaves, plus the aggregated spine.
  CHECK(count(four, DeviceKind::network_switch) == 8 + 1);
  // Per node the same links, plus one NIC-leaf link per NIC and one leaf-spine link per leaf.
  CHECK(four.physical_link_count() == 4 * one.physical_link_count() + 4 * 8 + 8);
  CHECK(four.graph()[four.gpu(17)].name == "n2/gpu1");
  CHECK(four.graph()[four.nic(3, 5)].rail == 5);
}

TEST_CASE("pods: a spine per pod, a core between pods at the pod oversubscription") {
  // 4 nodes, one per leaf, two per pod: 4 leaves, 2 pod spines, 1 core.
  const auto simple = InterconnectTable::load(kTopo / "interconnect_simple.json");
  const auto t =
      Topology::build(load_node_template((kTopo / "switch4_pods.json").string(), kData), 4, simple);
  CHECK(count(t, DeviceKind::network_switch) == 4 + 2 + 1);
  const auto& g = t.graph();
  int core_links = 0;
  for (const auto v : boost::make_iterator_range(boost::vertices(g))) {
    if (g[v].name != "spine-p1") continue;
    for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      if (g[boost::target(e, g)].name != "core") continue;
      ++core_links;
      // 2 nodes x 1 NIC x 2 GB/s / 4.
      CHECK(g[e].bandwidth_Bps == Approx(2 * 2e9 / 4));
    }
  }
  CHECK(core_links == 1);
  const auto bad = [](const std::string& json) {
    const auto path = std::filesystem::temp_directory_path() / "dtplan_test_pods.json";
    std::ofstream(path) << json;
    try {
      load_node_template(path.string(), kData);
    } catch (const Error& e) {
      std::filesystem::remove(path);
      return std::string(e.what());
    }
    std::filesystem::remove(path);
    return std::string("<no error>");
  };
  const std::string head = R"({"schema_version": 1, "name": "x", "devices": [{"id": "gpu0",
    "kind": "gpu"}], "links": [], "network": {"class": "ib_ndr", "nodes_per_leaf": 32, )";
  CHECK_THAT(bad(head + R"("nodes_per_pod": 48}})"),
             Contains("/network/nodes_per_pod") && Contains("not a multiple of nodes_per_leaf 32"));
  CHECK_THAT(bad(head + R"("pod_oversubscription": 7}})"),
             Contains("/network/pod_oversubscription") && Contains("needs nodes_per_pod"));
  // Hosts split the node's GPUs evenly (an NVL72 rack: 18 trays of 4).
  CHECK(load_node_template("gb200-nvl72", kData / "topologies").launch_gpus_per_host() == 4);
  CHECK(load_node_template("dgx-h100", kData / "topologies").launch_gpus_per_host() == 8);
  CHECK_THAT(bad(R"({"schema_version": 1, "name": "x", "gpus_per_host": 2, "devices": [
    {"id": "gpu0", "kind": "gpu"}, {"id": "gpu1", "kind": "gpu"}, {"id": "gpu2", "kind": "gpu"}],
    "links": []})"),
             Contains("/gpus_per_host") && Contains("3 GPUs do not split into hosts of 2"));
}

TEST_CASE("broken topologies name the problem") {
  CHECK_THAT(build_error("bad_duplicate_device.json"), Contains("device 'gpu0' listed twice"));
  CHECK_THAT(build_error("bad_duplicate_link.json"), Contains("link gpu1 - gpu0 listed twice"));
  CHECK_THAT(build_error("bad_unknown_class.json"),
             Contains("bad_unknown_class.json:") && Contains("unknown link class 'nvlink9'"));
  CHECK_THAT(build_error("bad_unknown_device.json"), Contains("link to unknown device 'gpu1'"));
  CHECK_THAT(build_error("bad_disconnected.json"),
             Contains("gpu1 is not connected to gpu0 by any path of links"));
  CHECK_THAT(build_error("bad_unknown_kind.json"),
             Contains("/devices/0/kind: unknown device kind"));
  CHECK_THAT(build_error("bad_no_network.json", 2), Contains("needs a \"network\" section"));
  CHECK_THROWS_WITH(build("dgx-a10"),
                    Contains("unknown topology 'dgx-a10'") && Contains("did you mean: dgx-a100"));
}

TEST_CASE("Graphviz output lists every device and link once") {
  const auto t = build("pcie-split-8");
  const auto dot = to_dot(t);
  CHECK(dot.rfind("graph \"pcie-split-8\" {", 0) == 0);
  CHECK(std::count(dot.begin(), dot.end(), '\n') ==
        1 + 1 + 14 + 13 + 1);  // head, style, 14 devices, 13 links, }
  CHECK_THAT(dot, Contains("label=\"upi\\n10.0 GB/s\""));
}

TEST_CASE("absurd numbers in a topology file name the field") {
  const auto path =
      std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "bad" / "topology_oversubscription_huge.json";
  CHECK_THROWS_WITH(load_node_template(path.string(), kData / "topologies"),
                    Contains("topology_oversubscription_huge.json:70: /network/oversubscription: "
                             "must be at most 1024 (a sane maximum), got 1e308"));
}

// Issue 14, item 15: nodes carry their host memory, from the preset (docs/memory-model.md
// cites the DGX datasheets) or the documented default.
TEST_CASE("presets state host memory per node, a topology without it gets the default") {
  constexpr std::int64_t GiB = std::int64_t{1} << 30;
  const std::pair<const char*, std::int64_t> presets[] = {
      {"dgx-a100", 2048},      {"dgx-h100", 2048},      {"dgx1-v100", 512},
      {"pcie-1switch-4", 256}, {"pcie-1switch-8", 512}, {"pcie-split-8", 512}};
  for (const auto& [name, gib] : presets) {
    INFO(name);
    const auto node = load_node_template(name, kData / "topologies");
    REQUIRE(node.host_memory.has_value());
    CHECK(node.host_memory->value == gib * GiB);
  }
  const auto plain = load_node_template((kTopo / "switch4.json").string(), kData / "topologies");
  CHECK_FALSE(plain.host_memory.has_value());
  CHECK(plain.host_memory_or_default().value == 512 * GiB);
  CHECK_THAT(build_error("bad_host_memory.json"), Contains("bad_host_memory.json:") &&
                                                      Contains("/host_memory_GiB") &&
                                                      Contains("host memory per node in GiB"));
}

TEST_CASE("presets state their hosts' CPU vendor, which NCCL's network proxy cost depends on") {
  // DGX A100: 2 AMD EPYC 7742; DGX H100: 2 Intel Xeon Platinum 8480C; DGX-1: 2 Intel Xeon
  // E5-2698 v4 (each system's datasheet). Unstated: NCCL's default.
  CHECK(load_node_template("dgx-a100", kData / "topologies").cpu_vendor == CpuVendor::amd);
  CHECK(load_node_template("dgx-h100", kData / "topologies").cpu_vendor == CpuVendor::intel);
  CHECK(load_node_template("dgx1-v100", kData / "topologies").cpu_vendor == CpuVendor::intel);
  CHECK(load_node_template("pcie-split-8", kData / "topologies").cpu_vendor == CpuVendor::other);
  CHECK_THAT(build_error("bad_cpu_vendor.json"),
             Contains("bad_cpu_vendor.json:") && Contains("/cpu_vendor") &&
                 Contains("unknown CPU vendor 'via' (known: intel, amd, other)"));
}

TEST_CASE("a GPU fits a topology only with the NVLink the topology gives it") {
  const auto gpus = GpuCatalog::load(kData / "gpus.json");
  // DGX A100: 12 NVLink 3 links of 25 GB/s per direction, 300 GB/s; A100 has exactly that.
  CHECK(nvlink_Bps_per_gpu(build("dgx-a100")) == Approx(300e9));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("A100-80GB"), build("dgx-a100")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("H100-SXM"), build("dgx-h100")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("B200"), build("dgx-b200")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("L40S"), build("pcie-split-8")));
  // A800 and H800 keep 400 GB/s of NVLink (200 per direction): a DGX preset would price
  // their collectives at the full part's links.
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("A800-80GB"), build("dgx-a100")),
                    Catch::Contains("{gpu} A800-80GB has 200 GB/s NVLink per direction") &&
                        Catch::Contains("{topology} dgx-a100 gives each GPU 300 GB/s"));
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("H800"), build("dgx-h100")),
                    Catch::Contains("gives each GPU 450 GB/s"));
  // An H100 on NVLink 5 (900 GB/s) and an MI300X (Infinity Fabric, no NVLink) on NVSwitch.
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("H100-SXM"), build("dgx-b200")),
                    Catch::Contains("gives each GPU 900 GB/s"));
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("MI300X"), build("dgx-h100")),
                    Catch::Contains("MI300X has no NVLink"));
  // The export parts on their own boards: 8 links of 25 GB/s per direction each.
  CHECK(nvlink_Bps_per_gpu(build("hgx-h800")) == Approx(200e9));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("H800"), build("hgx-h800")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("A800-80GB"), build("hgx-a800")));
  // MI300X: 7 xGMI links of 64 GB/s per direction (AMD ROCm blog, 2025-03-02), 448 GB/s; no
  // NVLink, so an NVIDIA part has no place on the mesh and MI300X none on NVSwitch.
  CHECK(xgmi_Bps_per_gpu(build("mi300x-8")) == Approx(7 * 64e9));
  CHECK(nvlink_Bps_per_gpu(build("mi300x-8")) == 0.0);
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("MI300X"), build("mi300x-8")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("MI325X"), build("mi300x-8")));
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("H100-SXM"), build("mi300x-8")),
                    Catch::Contains("H100-SXM has no xGMI per direction") &&
                        Catch::Contains("gives each GPU 448 GB/s of xGMI"));
  // MI355X's links are 153.6 GB/s bidirectional: 7 x 76.8 GB/s = 537.6 GB/s; MI300X has less.
  CHECK(xgmi_Bps_per_gpu(build("mi355x-8")) == Approx(537.6e9));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("MI355X"), build("mi355x-8")));
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("MI300X"), build("mi355x-8")),
                    Catch::Contains("MI300X has 448 GB/s xGMI per direction"));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("GB200"), build("gb200-nvl72")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("GB300"), build("gb300-nvl72")));
  CHECK_NOTHROW(check_gpu_on_topology(gpus.find("B300"), build("hgx-b300")));
  // A Grace superchip GPU only on its C2C board, a PCIe GPU never on one.
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("GB200"), build("dgx-b200")),
                    Catch::Contains("GB200 reaches its host over NVLink-C2C") &&
                        Catch::Contains("dgx-b200 puts its GPUs on PCIe"));
  CHECK_THROWS_WITH(check_gpu_on_topology(gpus.find("B200"), build("gb200-nvl72")),
                    Catch::Contains("B200 sits on PCIe") &&
                        Catch::Contains("gb200-nvl72 is a Grace superchip board"));
}

// GB200 NVL72 (NVIDIA's NVL72 specification): 72 GPUs and 36 Grace CPUs in 18 trays, one
// NVLink domain; each GPU has its own NIC, so a rack is a node of 72 rails.
TEST_CASE("GB200 NVL72: one 72-GPU NVLink domain, a Grace per two GPUs, a NIC per GPU") {
  const auto t = build("gb200-nvl72", 2);
  CHECK(t.gpus_per_node() == 72);
  CHECK(t.gpu_count() == 144);
  CHECK(count(t, DeviceKind::cpu) == 2 * 36);
  CHECK(count(t, DeviceKind::nic) == 2 * 72);
  CHECK(count(t, DeviceKind::nvswitch) == 2);
  // 18 NVLink 5 links of 50 GB/s per direction: 900 GB/s, B200's and GB200's figure.
  CHECK(nvlink_Bps_per_gpu(t) == Approx(900e9));
  const auto& g = t.graph();
  bool c2c = false;
  for (const auto e : boost::make_iterator_range(boost::out_edges(t.gpu(73), g))) {
    if (g[boost::target(e, g)].kind != DeviceKind::cpu) continue;
    c2c = true;
    CHECK(g[e].link_class() == "nvlink_c2c");
    CHECK(g[boost::target(e, g)].name == "n1/t0cpu0");  // GPUs 0 and 1 of tray 0 share a Grace
  }
  CHECK(c2c);
  // Two racks join through 72 rail leaves (8 racks per leaf group) and the spine.
  CHECK(count(t, DeviceKind::network_switch) == 72 + 1);
  CHECK(load_node_template("gb200-nvl72", kData / "topologies").host_memory->value == 16093LL
                                                                                          << 30);
}

// A 2,048-node cluster holds 1.5 x 10^5 directed links, each Link on the heap: it stays 32
// bytes, its class a number naming an interned string.
static_assert(sizeof(Link) <= 32, "Link grew: every directed edge of a cluster graph holds one");

TEST_CASE("each direction of a link names its class and shares its physical link") {
  const auto t = build("dgx-a100", 2);
  const auto& g = t.graph();
  std::map<std::int64_t, int> directions;
  std::map<std::string, int> node0;  // physical links of node 0 by class
  for (const auto e : boost::make_iterator_range(boost::edges(g))) {
    const auto& l = g[e];
    ++directions[l.physical_id()];
    CHECK(l.physical_id() == l.index / 2);
    CHECK(!l.link_class().empty());  // every link got its class
    if (l.index % 2 == 0 && g[boost::source(e, g)].host == 0 && g[boost::target(e, g)].host == 0)
      ++node0[std::string(l.link_class())];
    if (g[boost::target(e, g)].kind == DeviceKind::network_switch &&
        g[boost::source(e, g)].host >= 0)
      CHECK(l.link_class() == "ib_hdr");
  }
  CHECK(static_cast<std::int64_t>(directions.size()) == t.physical_link_count());
  for (const auto& [id, n] : directions)
    CHECK(n == 2);
  // A DGX A100 node: each GPU's 12 NVLink 3 links to the NVSwitches (one bundle per GPU, as the
  // preset writes them), four PCIe 4 switches each with two GPUs, two NICs and a CPU port, and
  // the sockets' xGMI link.
  CHECK(node0 == std::map<std::string, int>{{"nvlink3", 8}, {"pcie4", 20}, {"xgmi2", 1}});
}
