// Tests for cost/src/rings.cpp. Expected ring bandwidths are derived from the link figures:
// the ring rate is the achieved bandwidth of the most loaded link divided by its load.
#include <catch2/catch.hpp>
#include <filesystem>
#include <numeric>
#include <string>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/rings.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;

struct Fixture {
  InterconnectTable table = InterconnectTable::load(kData / "interconnect.json");
  Topology topology;
  Fixture(const std::string& name, std::int64_t nodes)
      : topology(Topology::build(load_node_template(name, kData / "topologies"), nodes, table)) {}
};

RingPlan plan(const std::string& name, std::int64_t nodes = 1) {
  Fixture f(name, nodes);
  Router router(f.topology);
  std::vector<std::int64_t> gpus(static_cast<std::size_t>(f.topology.gpu_count()));
  std::iota(gpus.begin(), gpus.end(), 0);
  return plan_rings(router, gpus);
}
}  // namespace

TEST_CASE("pcie-split-8: the socket link is the bottleneck, crossed twice per ring") {
  const auto p = plan("pcie-split-8");
  CHECK(p.exhaustive);
  CHECK(p.bandwidth_Bps == Approx(10e9));  // UPI at 10 GB/s < PCIe Gen4 at 24 GB/s
  CHECK(p.bottleneck.kind == "socket");
  CHECK(((p.bottleneck.from == "cpu0" && p.bottleneck.to == "cpu1") ||
         (p.bottleneck.from == "cpu1" && p.bottleneck.to == "cpu0")));
  CHECK(p.bottleneck_crossings == 2);  // once each way: 3 -> 4 and 7 -> 0 (or the reverse)
  // The best ring keeps each socket's GPUs together: exactly two hops change socket.
  int changes = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    changes += (p.rings[0][i] < 4) != (p.rings[0][(i + 1) % 8] < 4) ? 1 : 0;
  }
  CHECK(changes == 2);
}

TEST_CASE("one PCIe switch: each GPU link carries one ring hop each way") {
  CHECK(plan("pcie-1switch-4").bandwidth_Bps == Approx(24e9).epsilon(0.001));
  CHECK(plan("pcie-1switch-8").bandwidth_Bps == Approx(24e9).epsilon(0.001));
}

TEST_CASE("NVSwitch nodes: the GPU's switch links, as NCCL rates them") {
  // NCCL: 12 x SM80_NVLINK_BW 20.0 = 240 GB/s; 18 x SM90_NVLINK_BW 20.6 = 370.8 GB/s. These
  // are also the measured nccl-tests ring busbw (~230-235 on A100, 365-370 on H100).
  CHECK(plan("dgx-a100").bandwidth_Bps == Approx(240e9));
  CHECK(plan("dgx-h100").bandwidth_Bps == Approx(370.8e9));
}

TEST_CASE("DGX-1: equal channels over every NVLink") {
  // Each V100 has 6 NVLinks of 20 GB/s achieved (NV2 pairs count twice): 120 GB/s out of each
  // GPU. Six channels at 20 GB/s use them all: the NV2 ring twice in each direction and the
  // NV1 ring once in each direction.
  const auto p = plan("dgx1-v100");
  CHECK(p.rings.size() == 6);
  for (const auto r : p.rates_Bps)
    CHECK(r == Approx(20e9));
  CHECK(p.bandwidth_Bps == Approx(120e9));
}

TEST_CASE("across nodes every rail carries a channel") {
  // 2 x DGX A100: 8 HDR NICs of 25 GB/s at 96% = 24 GB/s each; 8 channels, one per rail, give
  // 192 GB/s, the all-reduce busbw NVIDIA measures on DGX A100 (NVIDIA/nccl#812).
  const auto p = plan("dgx-a100", 2);
  CHECK(p.rings.size() == 8);
  CHECK(p.bandwidth_Bps == Approx(192e9));
  CHECK(p.bottleneck.kind == "network");
  std::vector<std::int64_t> rails = p.rails;
  std::sort(rails.begin(), rails.end());
  CHECK(rails == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  // Four nodes: the same channels laid over every node.
  const auto four = plan("dgx-a100", 4);
  CHECK(four.bandwidth_Bps == Approx(192e9));
  CHECK(four.rings.front().size() == 32);
}

// GB200 NVL72 racks as nodes: a GPU reaches only its own tray's NICs (through its Grace), so a
// ring leaves a rack through a NIC of the tray of its last GPU. Every GPU is on every channel,
// so its NVLink (18 x 50 GB/s x 0.802 = 721.8 GB/s) bounds the channels at 47 GB/s each (one
// 400 Gb/s NDR NIC at 0.94): floor(721.8 / 47) = 15 channels, 705 GB/s.
TEST_CASE("GB200 NVL72: rings leave a rack through their tray's NICs, 15 channels on 2 racks") {
  const auto p = plan("gb200-nvl72", 2);
  CHECK(p.rings.size() == 15);
  CHECK(p.bandwidth_Bps == Approx(15 * 47e9));
  for (std::size_t c = 0; c < p.rings.size(); ++c) {
    // The GPU before the rack boundary (local rank 71 of rack 0 in the ring's order): its
    // tray's NICs are rails 4 t .. 4 t + 3, of which its Grace holds two.
    const auto& ring = p.rings[c];
    std::int64_t exit_gpu = -1;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      if (ring[i] < 72 && ring[(i + 1) % ring.size()] >= 72) exit_gpu = ring[i];
    }
    REQUIRE(exit_gpu >= 0);
    INFO("channel " << c << " exits at GPU " << exit_gpu << " on rail " << p.rails[c]);
    CHECK(p.rails[c] / 2 == exit_gpu / 2);  // the NICs of the exit GPU's Grace
  }
}

// GB300 NVL72: each ConnectX-8 hangs off its own GPU (PCIe 6.0) and, through its PCIe switch,
// off the tray's Grace (PCIe 5.0). A ring leaving a rack from one GPU and entering the next at
// another reaches a NIC they share through a Grace: 63 GB/s x 0.762 = 48 GB/s a channel, and
// NVLink (721.8 GB/s) bounds the channels at 15: 720 GB/s. (Without the Grace links no two GPUs
// shared a NIC and no ring could leave a rack.)
TEST_CASE("GB300 NVL72: rings leave a rack through a SuperNIC both boundary GPUs reach") {
  const auto p = plan("gb300-nvl72", 2);
  CHECK(p.rings.size() == 15);
  CHECK(p.bandwidth_Bps == Approx(15 * 63.015e9 * 0.762).epsilon(1e-3));
}

TEST_CASE("greedy orders: 2-opt removes the crossings that tied widths put in a ring") {
  // Two PCIe 4.0 switches joined by one PCIe 5.0 link; even GPUs on sw0, odd GPUs on sw1. Every
  // GPU-to-GPU route is as wide as a GPU's own PCIe 4.0 link (24 GB/s), so the widest next hop
  // is a tie that the greedy order breaks by rank: 0 1 2 ... 7, changing switch at every hop,
  // four times each way over the sw0-sw1 link (48.0 GB/s / 4 = 12.0 GB/s). A ring that changes
  // switch at most twice each way runs at the GPU links' 24 GB/s (48.0 / 2 >= 24): the bound
  // no ring can beat, since each ring leaves every GPU over its one link.
  std::string devices = R"({"id": "cpu0", "kind": "cpu"}, {"id": "sw0", "kind": "pcie_switch"},
    {"id": "sw1", "kind": "pcie_switch"})";
  std::string links = R"({"from": "sw0", "to": "cpu0", "class": "pcie4"},
    {"from": "sw0", "to": "sw1", "class": "pcie5"})";
  for (int g = 0; g < 8; ++g) {
    const auto id = "gpu" + std::to_string(g);
    devices += R"(, {"id": ")" + id + R"(", "kind": "gpu"})";
    links += R"(, {"from": ")" + id + R"(", "to": "sw)" + std::to_string(g % 2) +
             R"(", "class": "pcie4"})";
  }
  const auto doc = parse_json(R"({"schema_version": 1, "name": "interleaved", "devices": [)" +
                                  devices + R"(], "links": [)" + links + "]}",
                              "<interleaved>");
  const InterconnectTable table = InterconnectTable::load(kData / "interconnect.json");
  const auto topology = Topology::build(node_from_json(ObjectReader::root(doc)), 1, table);
  Router router(topology);
  std::vector<std::int64_t> gpus(8);
  std::iota(gpus.begin(), gpus.end(), 0);
  RingOptions greedy;
  greedy.exhaustive_limit = 1;  // greedy orders and 2-opt, as for a 72-GPU NVLink domain
  const auto p = plan_rings(router, gpus, greedy);
  CHECK_FALSE(p.exhaustive);
  CHECK(p.bandwidth_Bps == Approx(24e9).epsilon(0.001));
  CHECK(p.bottleneck.kind == "pcie");
  int changes = 0;
  for (std::size_t i = 0; i < 8; ++i)
    changes += p.rings[0][i] % 2 != p.rings[0][(i + 1) % 8] % 2 ? 1 : 0;
  CHECK(changes <= 4);  // at most twice each way over the switches' link
  // The rank order itself, which the greedy order starts from, runs at 12.0 GB/s.
  CHECK(ring_rate(router, {0, 1, 2, 3, 4, 5, 6, 7}, -1) == Approx(48.0e9 / 4).epsilon(0.01));
}

namespace {

void check_same_plan(const RingPlan& a, const RingPlan& b) {
  CHECK(a.rings == b.rings);
  CHECK(a.rails == b.rails);
  CHECK(a.rates_Bps == b.rates_Bps);
  CHECK(a.bandwidth_Bps == b.bandwidth_Bps);
  CHECK(a.bottleneck.from == b.bottleneck.from);
  CHECK(a.bottleneck.to == b.bottleneck.to);
  CHECK(a.bottleneck.kind == b.bottleneck.kind);
  CHECK(a.bottleneck.link_class == b.bottleneck.link_class);
  CHECK(a.bottleneck.achieved_Bps == b.bottleneck.achieved_Bps);
  CHECK(a.bottleneck.bytes == b.bottleneck.bytes);
  CHECK(a.bottleneck_crossings == b.bottleneck_crossings);
  CHECK(a.hop_kinds == b.hop_kinds);
  CHECK(a.candidates == b.candidates);
  CHECK(a.exhaustive == b.exhaustive);
}

}  // namespace

TEST_CASE("node channels planned once give every GPU count the plan it had alone") {
  // A planner asks one context for rings over many GPU counts; the node's rings and the
  // two-node channels are planned once (CommContext) and reused. Each count's plan must be the
  // one plan_rings makes on its own for that count. (That plan itself is pinned by the figures
  // of the tests above and by the comm command's tests.)
  for (const std::string name : {"dgx-a100", "dgx-h100", "gb200-nvl72", "pcie-split-8"}) {
    Fixture f(name, 6);
    Router shared(f.topology);
    const auto node = plan_node_channels(shared);
    CommContext context(f.topology);
    for (const std::int64_t nodes : {2, 3, 6}) {
      const std::int64_t n = nodes * f.topology.gpus_per_node();
      std::vector<std::int64_t> gpus(static_cast<std::size_t>(n));
      std::iota(gpus.begin(), gpus.end(), 0);
      Router fresh(f.topology);
      const auto alone = plan_rings(fresh, gpus);
      INFO(name << " x " << nodes);
      check_same_plan(plan_rings(shared, gpus, node), alone);
      check_same_plan(context.rings(n), alone);
      CHECK(alone.rings.front().size() == gpus.size());  // not vacuous: rings over every GPU
    }
    // Channels planned under other options, or GPUs not laid out node after node, are refused.
    std::vector<std::int64_t> two(static_cast<std::size_t>(2 * f.topology.gpus_per_node()));
    std::iota(two.begin(), two.end(), 0);
    RingOptions fewer;
    fewer.max_channels = 2;
    CHECK_THROWS_WITH(plan_rings(shared, two, node, fewer),
                      Catch::Matchers::Contains("other ring options"));
    std::swap(two[0], two[1]);
    CHECK_THROWS_WITH(plan_rings(shared, two, node), Catch::Matchers::Contains("in order"));
  }
}
