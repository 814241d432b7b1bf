// Tests for cost/src/collectives.cpp and collective_patterns.cpp: the alpha-beta formulas by
// hand on round-number topologies, nccl-tests' bus-bandwidth factors, and predictions against
// nccl-tests figures NVIDIA engineers and users have published.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Contains;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;
const std::filesystem::path kTopo = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "topo";

struct Fixture {
  InterconnectTable table;
  Topology topology;
  Fixture(const std::filesystem::path& table_file, const std::string& topo,
          const std::filesystem::path& dir, std::int64_t nodes)
      : table(InterconnectTable::load(table_file)),
        topology(Topology::build(load_node_template(topo, dir), nodes, table)) {}
};

// Test tables: links of 10 GB/s (PCIe), 5 GB/s (socket), 2 GB/s (NIC), all achieved in
// full; one Simple protocol with a 2 us base latency, 1 us per PCIe hop, 3 us per network hop.
Fixture simple(const std::string& file, std::int64_t nodes = 1) {
  return Fixture(kTopo / "interconnect_simple.json", (kTopo / file).string(), kData, nodes);
}

Fixture real(const std::string& preset, std::int64_t nodes = 1) {
  return Fixture(kData / "interconnect.json", preset, kData / "topologies", nodes);
}

constexpr double kGB = 1e9;
constexpr std::int64_t kGiB = 1LL << 30;
}  // namespace

TEST_CASE("nccl-tests bus bandwidth factors") {
  // NVIDIA/nccl-tests doc/PERFORMANCE.md
  CHECK(bus_factor(Collective::all_reduce, 8) == Approx(2.0 * 7 / 8));
  CHECK(bus_factor(Collective::all_gather, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(Collective::reduce_scatter, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(Collective::all_to_all, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(Collective::broadcast, 8) == 1.0);
  CHECK(bus_factor(Collective::reduce, 8) == 1.0);
}

TEST_CASE("ring all-reduce: 2(n-1)/n S/B + 2(n-1) alpha + base") {
  // 4 GPUs under one switch: B = 10 GB/s, alpha = 1 us per hop, base 2 us, S = 1 GB:
  // 1.5 x 1e9 / 10e9 + 6 x 1e-6 + 2e-6 = 0.150008 s.
  auto f = simple("switch4.json");
  CommModel m(f.topology, f.table, 4);
  const auto e = m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::ring);
  CHECK(e.time_s == Approx(0.150008).epsilon(1e-9));
  CHECK(e.latency_s == Approx(8e-6));
  CHECK(e.algbw_Bps == Approx(1e9 / 0.150008));
  CHECK(e.busbw_Bps == Approx(1.5e9 / 0.150008));
  CHECK(e.ring.size() == 4);
  // Reduce-scatter and all-gather: (n-1)/n S/B + (n-1) alpha + base = 0.075 + 5e-6.
  CHECK(m.estimate(Collective::all_gather, Bytes{1'000'000'000}, Algorithm::ring).time_s ==
        Approx(0.075005).epsilon(1e-9));
  // Broadcast: a pipelined chain, S/B + (n-1) alpha + base.
  CHECK(m.estimate(Collective::broadcast, Bytes{1'000'000'000}, Algorithm::ring).time_s ==
        Approx(0.100005).epsilon(1e-9));
}

TEST_CASE("the socket link sets the ring across two sockets") {
  // GPUs 0,1 on socket 0 and 2,3 on socket 1; the 5 GB/s socket link carries one ring hop
  // each way: 1.5 x 1e9 / 5e9 + 6 us + 2 us.
  auto f = simple("split4.json");
  CommModel m(f.topology, f.table, 4);
  const auto e = m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::ring);
  CHECK(e.time_s == Approx(0.300008).epsilon(1e-9));
  CHECK(e.bottleneck.kind == "socket");
}

TEST_CASE("DataParallel's reduce to GPU 0 and broadcast back, against the ring") {
  // torch.nn.DataParallel runs an NCCL reduce to GPU 0 and an NCCL broadcast from it, each
  // pipelined along the ring: S / B each (0.1 s + 0.1 s), n-1 steps each (6 x 1 us) plus the
  // base: 0.200008 s against the ring all-reduce's 0.150008 s, i.e. 2 against 2(n-1)/n.
  auto f = simple("switch4.json");
  CommModel m(f.topology, f.table, 4);
  const auto ps = m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::ps);
  CHECK(ps.time_s == Approx(0.200008).epsilon(1e-9));
  CHECK(m.estimate(Collective::reduce, Bytes{1'000'000'000}, Algorithm::ps).time_s ==
        Approx(0.100005).epsilon(1e-9));
}

TEST_CASE("all-to-all: every pair exchanges S/n point to point") {
  // 4 GPUs on a switch: each GPU sends 3/4 S out of its 10 GB/s link and receives 3/4 S:
  // 0.75 x 1e9 / 1e10 = 0.075 s; latency: the base and n-1 = 3 hops of 1 us.
  auto f = simple("switch4.json");
  CommModel m(f.topology, f.table, 4);
  const auto e = m.estimate(Collective::all_to_all, Bytes{1'000'000'000});
  CHECK(e.algorithm == Algorithm::p2p);
  CHECK(e.time_s == Approx(0.075005).epsilon(1e-9));
  // Across two nodes with one 2 GB/s NIC each: every GPU sends S/8 to each of the 4 GPUs of
  // the other node, 16 flows of S/8 = 2 S per NIC direction: 1 s.
  auto two = simple("switch4.json", 2);
  CommModel m2(two.topology, two.table, 8);
  CHECK(m2.estimate(Collective::all_to_all, Bytes{1'000'000'000}).time_s ==
        Approx(1.0).epsilon(1e-4));
}

TEST_CASE("a collective crossing an oversubscribed pod tier pays for it") {
  // 4 nodes of 4 GPUs, one 2 GB/s NIC each, one node per leaf, two nodes per pod. All-to-all
  // over the 16 GPUs: every GPU sends S/16 to each of 15 others. Each NIC sends 12 x 4 x S/16 =
  // 3 S: 1.5 s for S = 1 GB. Pod 0 sends 8 x 8 x S/16 = 4 S to pod 1 over its core link of
  // 2 nodes x 2 GB/s / 4 = 1 GB/s: 4 s, the bottleneck. At 1:1 the core link is 4 GB/s (1 s)
  // and the NICs bound it again.
  auto over = simple("switch4_pods.json", 4);
  CommModel m(over.topology, over.table, 16);
  CHECK(m.estimate(Collective::all_to_all, Bytes{1'000'000'000}).time_s ==
        Approx(4.0).epsilon(1e-4));
  auto full = simple("switch4_pods_full.json", 4);
  CommModel f(full.topology, full.table, 16);
  CHECK(f.estimate(Collective::all_to_all, Bytes{1'000'000'000}).time_s ==
        Approx(1.5).epsilon(1e-4));
  // A two-tier network of the same nodes (no pods) prices the all-to-all as the 1:1 pods do.
  auto flat = simple("switch4.json", 4);
  CommModel two_tier(flat.topology, flat.table, 16);
  CHECK(two_tier.estimate(Collective::all_to_all, Bytes{1'000'000'000}).time_s ==
        Approx(1.5).epsilon(1e-4));
}

TEST_CASE("tree: chain up, then down") {
  // One node: the chain 0-1-2-3 moves S up (0.1 s on each GPU link) then down (0.1 s);
  // latency 2 us + 2 x 3 hops x 1 us.
  auto f = simple("switch4.json");
  CommModel m(f.topology, f.table, 4);
  CHECK(m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::tree).time_s ==
        Approx(0.200008).epsilon(1e-9));
}

TEST_CASE("two nodes: ring through the NIC against hierarchical") {
  // 2 nodes x 4 GPUs, one 2 GB/s NIC each. Ring: each hop carries 2 x 7/8 S; the NIC carries
  // one hop each way: 1.75e9 / 2e9 = 0.875 s; latency 2 us + 14 steps x (6 x 1 + 2 x 3)/8 us.
  auto f = simple("switch4.json", 2);
  CommModel m(f.topology, f.table, 8);
  const auto ring = m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::ring);
  CHECK(ring.time_s == Approx(0.875 + 23e-6).epsilon(1e-9));
  CHECK(ring.bottleneck.kind == "network");
  // Hierarchical: reduce-scatter and all-gather in the node (2 x 0.75 x 1e9 / 10e9 = 0.15 s),
  // then 4 rings across the nodes each with 2 x 1/2 x S/4 per hop, all through the one NIC:
  // S / 2e9 = 0.5 s; latency 2 us + 6 x 1 us + 2 x 3 us.
  const auto h = m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::hierarchical);
  CHECK(h.time_s == Approx(0.65 + 14e-6).epsilon(1e-9));
}

TEST_CASE("two nodes: one tree per channel through the NICs") {
  // Tree on 2 nodes x 4 GPUs (one channel, one 2 GB/s NIC each): the chains inside the nodes
  // move S over each 10 GB/s GPU link (0.1 s); the two mirrored trees send S/2 each way
  // through the NICs (0.25 s), the slower, once up and once down: 0.5 s; latency 2 us +
  // 2 x (3 PCIe hops x 1 us + 1 tree level x 3 us).
  auto f = simple("switch4.json", 2);
  CommModel m(f.topology, f.table, 8);
  const auto tree = m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::tree);
  CHECK(tree.time_s == Approx(0.500014).epsilon(1e-9));
  CHECK(tree.bottleneck.kind == "network");
}

TEST_CASE("a tree's bandwidth falls at medium sizes by NCCL's size correction") {
  // The test table's tree with a correction of 0.5 for every size class up to 2^22 x 64 B
  // (entry k for floor(log2(bytes / 64)) == k). 2 nodes x 4 GPUs as above, 14 us latency:
  //   1e9 B: floor(log2(1e9 / 64)) = 23, past the table: 0.5 s + 14 us, as above;
  //   1e6 B: floor(log2(15,625)) = 13, so 0.5: 2 x 0.5e-3 s + 14 us = 1.014 ms.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kTopo / "interconnect_simple.json"));
  j["algorithms"]["tree"]["Simple"]["bandwidth_factor_by_size"] = std::vector<double>(23, 0.5);
  const auto path = std::filesystem::temp_directory_path() / "dtplan_test_tree_factor.json";
  std::ofstream(path) << j.dump();
  Fixture f(path, (kTopo / "switch4.json").string(), kData, 2);
  std::filesystem::remove(path);
  CommModel m(f.topology, f.table, 8);
  CHECK(m.estimate(Collective::all_reduce, Bytes{1'000'000'000}, Algorithm::tree).time_s ==
        Approx(0.500014).epsilon(1e-9));
  CHECK(m.estimate(Collective::all_reduce, Bytes{1'000'000}, Algorithm::tree).time_s ==
        Approx(1.014e-3).epsilon(1e-9));
  // The shipped table is NCCL's treeCorrectionFactor: Simple 0.5 at 1 MiB (entry 14).
  auto h100 = real("dgx-h100", 2);
  const auto& simple_tree = *h100.table.algorithm(CommAlgorithm::tree)
                                 .protocols[static_cast<std::size_t>(Protocol::simple)];
  REQUIRE(simple_tree.bandwidth_factor_by_size.size() == 23);
  CHECK(simple_tree.bandwidth_factor_by_size[14] == Approx(0.5));
}

TEST_CASE("algorithms that do not apply are refused") {
  auto f = real("dgx-a100");
  CommModel m(f.topology, f.table, 8);
  CHECK_THROWS_WITH(m.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::nvls),
                    Contains("algorithm: nvls does not apply"));
  // A field the front end names (the CLI as --algorithm).
  CHECK_THROWS_AS(m.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::nvls), FieldError);
  CHECK_THROWS_WITH(m.estimate(Collective::all_to_all, Bytes{kGiB}, Algorithm::tree),
                    Contains("applicable: p2p"));
  CHECK_THROWS_WITH(CommModel(f.topology, f.table, 9), Contains("the topology has 8 GPUs"));
}

// Published nccl-tests figures (large messages: within 10%).
TEST_CASE("8x A100 NVSwitch against nccl-tests") {
  auto f = real("dgx-a100");
  CommModel m(f.topology, f.table, 8);
  // all_reduce 1 GB: 231.45 GB/s busbw; all_gather 1 GB: 253.59 GB/s (Azure NDm A100 v4,
  // NCCL 2.17.1; microsoft/mscclpp docs/performance-ndmv4.md).
  CHECK(m.estimate(Collective::all_reduce, Bytes{kGiB}).busbw_Bps ==
        Approx(231.45 * kGB).epsilon(0.10));
  CHECK(m.estimate(Collective::all_gather, Bytes{kGiB}).busbw_Bps ==
        Approx(253.59 * kGB).epsilon(0.10));
  // all_reduce 4 GB: 232.54 GB/s (NVIDIA/nccl-tests#175).
  CHECK(m.estimate(Collective::all_reduce, Bytes{4 * kGiB}).busbw_Bps ==
        Approx(232.54 * kGB).epsilon(0.10));
}

TEST_CASE("8x A100 small messages are latency-bound") {
  auto f = real("dgx-a100");
  CommModel m(f.topology, f.table, 8);
  // 1 KB all_reduce took 16.96 us (same source, CUDA graphs); the model uses NCCL's own LL
  // latencies, which put it within a quarter of that, and the time is flat from 8 B to 8 KiB.
  const auto one_kb = m.estimate(Collective::all_reduce, Bytes{1024});
  CHECK(one_kb.time_s == Approx(16.96e-6).epsilon(0.25));
  CHECK(one_kb.protocol == Protocol::ll);
  const double t8 = m.estimate(Collective::all_reduce, Bytes{8}).time_s;
  const double t8k = m.estimate(Collective::all_reduce, Bytes{8192}).time_s;
  CHECK(t8k / t8 < 1.05);
}

TEST_CASE("8x H100 NVSwitch against nccl-tests: ring and NVLink SHARP") {
  auto f = real("dgx-h100");
  CommModel m(f.topology, f.table, 8);
  // Forced ring: 365-370 GB/s (NVIDIA/nccl#1455); default (NVLS): 480 GB/s (NVIDIA/nccl#2140).
  CHECK(m.estimate(Collective::all_reduce, Bytes{4 * kGiB}, Algorithm::ring).busbw_Bps ==
        Approx(368 * kGB).epsilon(0.10));
  const auto nvls = m.estimate(Collective::all_reduce, Bytes{4 * kGiB});
  CHECK(nvls.algorithm == Algorithm::nvls);
  CHECK(nvls.busbw_Bps == Approx(480 * kGB).epsilon(0.10));
  // The NVLS efficiency was fitted on 8 GPUs only; 5, 6 and 7 GPUs measured 420, 440 and 460
  // GB/s (NVIDIA/nccl#1455), an independent check of the (1 + 1/n) traffic model.
  const std::pair<std::int64_t, double> measured[] = {{5, 420}, {6, 440}, {7, 460}};
  for (const auto& [n, busbw] : measured) {
    CommModel part(f.topology, f.table, n);
    CHECK(part.estimate(Collective::all_reduce, Bytes{4 * kGiB}, Algorithm::nvls).busbw_Bps ==
          Approx(busbw * kGB).epsilon(0.10));
  }
}

TEST_CASE("NVLS on Blackwell: the Hopper fit scaled by NCCL's generation efficiencies") {
  // NCCL 2.30.7 src/graph/tuning.cc nvlsEfficiency: Hopper 0.85, Blackwell 0.74. Fitted on
  // 8 x H100 at 0.687 of the link: 0.687 x 0.74 / 0.85 on NVLink 5.
  const auto table = InterconnectTable::load(kData / "interconnect.json");
  const auto& nvls = table.algorithm(CommAlgorithm::nvls);
  CHECK(nvls.efficiency_for("nvlink4") == Approx(0.687));
  CHECK(nvls.efficiency_for("nvlink5") == Approx(0.687 * 0.74 / 0.85));
  CHECK(nvls.efficiency_for("nvlink3") == Approx(0.687));  // not stated: as fitted
  // 8 x B200, 16 GiB, NVLS forced: 841 GB/s busbw (Together AI NCCL scaling report,
  // 2026-05-02, use3a-ss, 1 node). Traffic (1 + 1/n) S per link direction, so
  // busbw = 2(n-1)/n / (1 + 1/n) x 900 GB/s x 0.598 = 14/9 x 538 = 837 GB/s.
  auto f = real("dgx-b200");
  CommModel m(f.topology, f.table, 8);
  const auto e = m.estimate(Collective::all_reduce, Bytes{16 * kGiB}, Algorithm::nvls);
  CHECK(e.busbw_Bps == Approx(841 * kGB).epsilon(0.02));
}

TEST_CASE("8 x MI300X: seven disjoint rings over the xGMI mesh against rccl-tests") {
  // Each GPU has one 64 GB/s link per direction to each of its 7 peers, about 48 GB/s usable
  // (AMD ROCm blog, 'Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct
  // MI300X', 2025-03-02). A directed ring leaves each GPU by one link, so the 56 directed links
  // hold at most 7 rings: B = 7 x 48 = 336 GB/s.
  auto f = real("mi300x-8");
  CommModel m(f.topology, f.table, 8);
  CHECK(m.rings().rings.size() == 7);
  CHECK(m.rings().bandwidth_Bps == Approx(336 * kGB));
  // The same blog's rccl-tests all_reduce_perf at 16 GiB: 318.98 GB/s busbw (RCCL 2.22.3).
  const auto e = m.estimate(Collective::all_reduce, Bytes{16 * kGiB});
  CHECK(e.busbw_Bps == Approx(318.98 * kGB).epsilon(0.10));
  // No NVSwitch: no NVLS.
  CHECK_THROWS_AS(m.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::nvls), FieldError);
}

TEST_CASE("2x 8 A100 with 8 HDR NICs against nccl-tests") {
  // all_reduce 4 GB on 2 x 8 A100 with 8 HDR NICs each: 188.18 GB/s (mscclpp NDm A100 v4 doc);
  // NVIDIA quotes 192 GB/s for DGX A100 (NVIDIA/nccl#812).
  auto f = real("dgx-a100", 2);
  CommModel m(f.topology, f.table, 16);
  CHECK(m.estimate(Collective::all_reduce, Bytes{4 * kGiB}, Algorithm::ring).busbw_Bps ==
        Approx(188.18 * kGB).epsilon(0.10));
}

TEST_CASE("ABCI's A100 node: four HDR ports for eight GPUs bound a ring across nodes") {
  // abci-a100 (the ABCI User Guide's block diagram): one HDR port per PCIe switch, two GPUs
  // behind each. A ring across two nodes crosses each node's four ports: by hand
  // 4 x 25 GB/s x 0.96 (ib_hdr's efficiency) = 96 GB/s of bus bandwidth at a size where
  // latency is negligible, half of DGX A100's eight ports.
  auto abci = real("abci-a100", 2);
  CommModel m(abci.topology, abci.table, 16);
  const auto big = m.estimate(Collective::all_reduce, Bytes{16 * kGiB}, Algorithm::ring);
  CHECK(big.busbw_Bps == Approx(96 * kGB).epsilon(0.01));
  auto dgx = real("dgx-a100", 2);
  CommModel d(dgx.topology, dgx.table, 16);
  CHECK(d.estimate(Collective::all_reduce, Bytes{16 * kGiB}, Algorithm::ring).busbw_Bps ==
        Approx(2 * big.busbw_Bps).epsilon(0.01));
}

// Issue 14, item 2: planning at 32,768 GPUs took 12-25 s because every communication model
// routed every ring hop of every node again. Routes inside node k are node 0's routes shifted
// (nodes are one template), and models of one topology share their routes and rings, so the
// graph searches are bounded by the pairs of one node plus the pairs of network switches,
// whatever the node count.
TEST_CASE("routing a cluster searches each route once, whatever the node count") {
  // dgx-h100: 23 devices per node; 8 rails and 32 nodes per leaf, so 64 nodes have 2 leaf
  // groups: 16 leaves and a spine.
  auto f = real("dgx-h100", 64);
  const auto devices = static_cast<std::int64_t>(f.topology.node().devices.size());
  REQUIRE(devices == 23);
  const std::int64_t switches = 2 * 8 + 1;
  const auto bound = devices * devices + switches * switches;

  const auto context = std::make_shared<CommContext>(f.topology);
  CommModel all(f.topology, f.table, 512, context);
  const auto ring = all.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::ring);
  const auto tree = all.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::tree);
  (void)all.replica_all_reduce(Bytes{kGiB});
  const auto searched = context->router().searches();
  CHECK(searched <= bound);

  // A second model of the same size on the same context routes nothing new and agrees.
  CommModel again(f.topology, f.table, 512, context);
  CHECK(again.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::ring).time_s == ring.time_s);
  CHECK(again.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::tree).time_s == tree.time_s);
  CHECK(context->router().searches() == searched);

  // A model with its own routing gets the same answer as the shared one.
  CommModel alone(f.topology, f.table, 512);
  CHECK(alone.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::ring).time_s == ring.time_s);

  // A shifted route is node 0's route, moved: same length and width, inside its own node.
  auto& router = context->router();
  const auto& g = f.topology.graph();
  const auto& r0 = router.route(f.topology.gpu(0), f.topology.gpu(5));
  const auto& r9 = router.route(f.topology.gpu(9 * 8), f.topology.gpu(9 * 8 + 5));
  REQUIRE(r9.edges.size() == r0.edges.size());
  CHECK(r9.bottleneck_Bps == r0.bottleneck_Bps);
  for (const auto k : r9.edges) {
    CHECK(g[boost::source(router.edge(k), g)].host == 9);
    CHECK(g[boost::target(router.edge(k), g)].host == 9);
  }
  // Read shifted (route_shifted: node 0's route and an index shift, nothing cached for node 9),
  // every route inside node 9 has the edges of the route found for node 9 itself.
  for (std::int64_t a = 0; a < 8; ++a) {
    for (std::int64_t b = 0; b < 8; ++b) {
      if (a == b) continue;
      const auto shifted = router.route_shifted(f.topology.gpu(72 + a), f.topology.gpu(72 + b));
      CHECK(shifted.shift > 0);
      std::vector<EdgeIndex> read;
      shifted.for_each_edge([&](EdgeIndex k) { read.push_back(k); });
      CHECK(read == router.route(f.topology.gpu(72 + a), f.topology.gpu(72 + b)).edges);
    }
  }
}

TEST_CASE("a ring across nodes: NCCL's LL128 channel cap and its all-reduce plateau") {
  // All-reduce on 2 DGX H100 (16 GPUs, 8 rings through 8 NDR NICs of 50 GB/s x 0.94):
  // 30 steps, 26.25 over NVLink and 3.75 over the network (the all-gather case above, twice);
  // bus bytes 2 x 15/16 S.
  //   LL128: 14 + 26.25 x 1.9 + 3.75 x 4.0 = 78.875 us; its bus bandwidth, 0.92 x 376 GB/s,
  //     is capped at NCCL's 36.7 GB/s per channel x 8 = 293.6 GB/s.
  //   Simple: (8.4 + 26.25 x 3.4 + 3.75 x 14) us = 150.15 us, x 1.4 (an all-reduce ring
  //     across nodes with >= 64 B per channel and rank, compute capability 9.0) = 210.21 us;
  //     bus bandwidth 376 GB/s.
  auto h100 = real("dgx-h100", 2);
  CommModel m(h100.topology, h100.table, 16);
  const double mid = 16.0 * (1 << 20), big = static_cast<double>(kGiB);
  // 16 MiB: LL128 at 78.875 + 31,457,280 / 293.6e9 us = 186.02 us (uncapped it would be
  // 169.8); Simple 293.9 us.
  const auto e = m.estimate(Collective::all_reduce, Bytes{16 << 20}, Algorithm::ring);
  CHECK(e.protocol == Protocol::ll128);
  CHECK(e.time_s == Approx(78.875e-6 + 2 * 15.0 / 16 * mid / 293.6e9).epsilon(1e-9));
  // 1 GiB: Simple, with the plateau factor on its latency.
  const auto g = m.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::ring);
  CHECK(g.protocol == Protocol::simple);
  CHECK(g.latency_s == Approx(210.21e-6).epsilon(1e-9));
  CHECK(g.time_s == Approx(210.21e-6 + 2 * 15.0 / 16 * big / 376e9).epsilon(1e-9));
  // All-gather has no plateau: (8.4 + 13.125 x 3.4 + 1.875 x 14) us = 79.275 us.
  const auto ag = m.estimate(Collective::all_gather, Bytes{kGiB}, Algorithm::ring);
  CHECK(ag.latency_s == Approx(79.275e-6).epsilon(1e-9));
  // Nor does one node.
  auto one = real("dgx-h100", 1);
  CommModel o(one.topology, one.table, 8);
  CHECK(o.estimate(Collective::all_reduce, Bytes{kGiB}, Algorithm::ring).latency_s ==
        Approx((8.4 + 14 * 3.4) * 1e-6).epsilon(1e-9));
}

TEST_CASE("a collective context belongs to one topology") {
  auto a = real("dgx-h100", 2);
  auto b = real("dgx-h100", 2);
  const auto context = std::make_shared<CommContext>(a.topology);
  CHECK_THROWS_WITH(CommModel(b.topology, b.table, 16, context), Contains("another topology"));
}

TEST_CASE("a ring across nodes waits at least for the network proxy on every step") {
  // NCCL (tuning.cc, getNetOverhead): each step of a ring across nodes takes at least 1 us on
  // Intel hosts, 2 us on AMD ones (x3 under Simple). All-gather over 2 DGX nodes, 16 GPUs:
  // 15 steps on rings of 14 NVLink and 2 network hops, 13.125 NVLink and 1.875 network steps.
  // LL: base 6.6 us, NVLink hop 0.6 us, network hop 2.7 us.
  //   DGX H100 (Intel): 6.6 + 13.125 x max(0.6, 1) + 1.875 x 2.7 = 24.7875 us
  //   DGX A100 (AMD):   6.6 + 13.125 x max(0.6, 2) + 1.875 x 2.7 = 37.9125 us
  // One node has no proxy in the ring: 6.6 + 7 x 0.6 = 10.8 us.
  auto h100 = real("dgx-h100", 2);
  auto a100 = real("dgx-a100", 2);
  auto one = real("dgx-a100", 1);
  CommModel h(h100.topology, h100.table, 16);
  CommModel a(a100.topology, a100.table, 16);
  CommModel o(one.topology, one.table, 8);
  const auto tiny = Bytes{64};
  CHECK(h.estimate(Collective::all_gather, tiny, Algorithm::ring).latency_s ==
        Approx(24.7875e-6).epsilon(1e-9));
  CHECK(a.estimate(Collective::all_gather, tiny, Algorithm::ring).latency_s ==
        Approx(37.9125e-6).epsilon(1e-9));
  CHECK(o.estimate(Collective::all_gather, tiny, Algorithm::ring).latency_s ==
        Approx(10.8e-6).epsilon(1e-9));
}
