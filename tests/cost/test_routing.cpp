// Tests for cost/src/routing.cpp: widest-then-shortest routes, no forwarding through GPUs,
// rails between nodes, and flows adding up on shared links.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <tuple>

#include "dtplan/cost/routing.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;
const std::filesystem::path kTopo = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "topo";

Topology preset(const std::string& name, std::int64_t nodes = 1) {
  return Topology::build(load_node_template(name, kData / "topologies"), nodes,
                         InterconnectTable::load(kData / "interconnect.json"));
}

std::vector<std::string> names(const Router& router, const Route& r) {
  const auto& g = router.topology().graph();
  std::vector<std::string> out{g[boost::source(router.edge(r.edges.front()), g)].name};
  for (const auto k : r.edges)
    out.push_back(g[boost::target(router.edge(k), g)].name);
  return out;
}
}  // namespace

TEST_CASE("across sockets the route climbs to the CPUs and crosses the socket link") {
  const auto t = preset("pcie-split-8");
  Router router(t);
  const auto& r = router.route(t.gpu(0), t.gpu(4));
  CHECK(names(router, r) == std::vector<std::string>{"gpu0", "sw0", "cpu0", "cpu1", "sw1", "gpu4"});
  CHECK(r.bottleneck_Bps == Approx(10e9));                                // UPI, NCCL SKL_QPI_BW
  CHECK(latency_rank(r.slowest_kind) == latency_rank(LinkKind::socket));  // PCIe-class latency
  CHECK(names(router, router.route(t.gpu(0), t.gpu(1))) ==
        std::vector<std::string>{"gpu0", "sw0", "gpu1"});
}

TEST_CASE("direct NVLinks first, GPUs relay only NVLink to NVLink") {
  const auto t = preset("dgx1-v100");
  Router router(t);
  // gpu0 - gpu3 is NV2 (40 GB/s achieved): the direct link.
  CHECK(router.route(t.gpu(0), t.gpu(3)).edges.size() == 1);
  CHECK(router.route(t.gpu(0), t.gpu(3)).bottleneck_Bps == Approx(40e9));
  // gpu0 - gpu1 is NV1 (20 GB/s): still the route, though relaying over NV2 links through
  // gpu3 and gpu2 would be wider (NCCL uses PATH_NVL when a direct NVLink exists).
  CHECK(router.route(t.gpu(0), t.gpu(1)).edges.size() == 1);
  // gpu0 - gpu5 have no NVLink: NCCL's PATH_NVB relays through gpu1 or gpu4 over NVLink at
  // 20 GB/s, better than PCIe and the Broadwell QPI link (6 GB/s).
  const auto& r = router.route(t.gpu(0), t.gpu(5));
  CHECK(r.edges.size() == 2);
  for (const auto k : r.edges)
    CHECK(router.link(k).kind == LinkKind::nvlink);
  CHECK(r.bottleneck_Bps == Approx(20e9));
  // On PCIe-only nodes no GPU relays: gpu0 -> gpu4 never passes through gpu1..gpu3.
  const auto split = preset("pcie-split-8");
  Router pcie(split);
  for (const auto k : pcie.route(split.gpu(0), split.gpu(4)).edges) {
    const auto v = boost::target(pcie.edge(k), split.graph());
    CHECK((v == split.gpu(4) || split.graph()[v].kind != DeviceKind::gpu));
  }
}

TEST_CASE("between nodes a GPU uses its own rail's NIC") {
  const auto t = preset("dgx-a100", 2);
  Router router(t);
  // gpu1 shares its PCIe switch with nic0 and nic1; its rail is nic1.
  CHECK(router.preferred_rail(t.gpu(1)) == 1);
  const auto path = names(router, router.route(t.gpu(1), t.gpu(9)));
  CHECK(path == std::vector<std::string>{"n0/gpu1", "n0/sw0", "n0/nic1", "leaf-r1-g0", "n1/nic1",
                                         "n1/sw0", "n1/gpu1"});
}

TEST_CASE("flows sharing a link add up") {
  const auto t = Topology::build(load_node_template((kTopo / "split4.json").string(), kData), 1,
                                 InterconnectTable::load(kTopo / "interconnect_simple.json"));
  Router router(t);
  // Two 1 GB flows from socket 0 to socket 1 share the 5 GB/s socket link: 2 GB / 5 GB/s.
  const auto ft = time_flows(router, {{t.gpu(0), t.gpu(2), 1e9}, {t.gpu(1), t.gpu(3), 1e9}});
  CHECK(ft.time_s == Approx(0.4));
  CHECK(ft.bottleneck.from == "cpu0");
  CHECK(ft.bottleneck.to == "cpu1");
  CHECK(ft.bottleneck.bytes == Approx(2e9));
  // Opposite directions do not share: each direction has its own bandwidth.
  const auto both = time_flows(router, {{t.gpu(0), t.gpu(2), 1e9}, {t.gpu(2), t.gpu(0), 1e9}});
  CHECK(both.time_s == Approx(0.2));
}

TEST_CASE("a route between nodes read from its parts is the joined route, link by link") {
  // 34 nodes of dgx-a100: nodes_per_leaf is 32, so node 33 sits under another leaf and the
  // way between the NICs climbs to the spine.
  const auto t = preset("dgx-a100", 34);
  Router router(t);
  for (const auto& [a, b, rail] : {std::tuple{1, 9, 1}, {9, 1, 3}, {17, 8 * 33 + 5, 6}}) {
    INFO(a << " -> " << b << " on rail " << rail);
    const auto parts = router.via_rail_parts(t.gpu(a), t.gpu(b), rail);
    std::vector<EdgeIndex> read;
    parts.for_each_edge([&](EdgeIndex k) { read.push_back(k); });
    const auto& joined = router.route_via_rail(t.gpu(a), t.gpu(b), rail);
    CHECK(read == joined.edges);
    CHECK(parts.bottleneck_Bps == joined.bottleneck_Bps);
    CHECK(parts.slowest_kind == LinkKind::network);
  }
  // GPU 17 (node 2) to GPU 269 (node 33) on rail 6: out through n2/nic6, up to leaf-r6-g0,
  // the spine, down leaf-r6-g1 to n33/nic6.
  const auto path = names(router, router.route_via_rail(t.gpu(17), t.gpu(8 * 33 + 5), 6));
  const auto at = std::find(path.begin(), path.end(), "n2/nic6");
  REQUIRE(path.end() - at >= 5);
  CHECK(std::vector<std::string>(at, at + 5) ==
        std::vector<std::string>{"n2/nic6", "leaf-r6-g0", "spine", "leaf-r6-g1", "n33/nic6"});
}

TEST_CASE("a tree's flows between nodes load each rail's NIC ports, flow by flow") {
  const auto t = preset("dgx-a100", 2);
  Router router(t);
  // Two 1 GB flows from node 0 to node 1 on rail 0 share nic0's port to its leaf; a third on
  // rail 1 does not. The port is HDR InfiniBand (25 GB/s per direction, achieved as the
  // interconnect table's efficiency says): 2 GB cross it.
  FlowLoad load(router);
  load.add({t.gpu(0), t.gpu(8), 1e9, 0});
  load.add({t.gpu(1), t.gpu(9), 1e9, 0});
  load.add({t.gpu(2), t.gpu(10), 1e9, 1});
  const auto ft = load.time();
  CHECK(ft.bottleneck.bytes == Approx(2e9));
  CHECK(ft.bottleneck.kind == "network");
  CHECK(ft.time_s == Approx(2e9 / ft.bottleneck.achieved_Bps));
  CHECK(ft.slowest_kind == LinkKind::network);
  // time_flows over the same flows agrees.
  const auto same = time_flows(
      router,
      {{t.gpu(0), t.gpu(8), 1e9, 0}, {t.gpu(1), t.gpu(9), 1e9, 0}, {t.gpu(2), t.gpu(10), 1e9, 1}});
  CHECK(same.time_s == ft.time_s);
}
