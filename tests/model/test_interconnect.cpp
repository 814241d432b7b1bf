// Tests for model/src/interconnect.cpp: the bundled constants reproduce NCCL's effective link
// bandwidths (NCCL src/graph/topo.h: SM80_NVLINK_BW 20.0 and SM90_NVLINK_BW 20.6 GB/s per
// link, PCI_BW 12.0 GB/s for Gen3 x16 and lanes x gen / 80 beyond, SKL_QPI_BW 10.0).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/interconnect.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
InterconnectTable table() {
  return InterconnectTable::load(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json");
}
double achieved(const LinkClass& c, double links = 1) {
  return c.bandwidth_Bps * c.efficiency * links;
}
}  // namespace

TEST_CASE("achieved link bandwidths match NCCL's constants") {
  const auto t = table();
  CHECK(achieved(t.find("nvlink3"), 12) == Approx(12 * 20.0e9));  // A100: 240 GB/s
  CHECK(achieved(t.find("nvlink4"), 18) == Approx(18 * 20.6e9));  // H100: 370.8 GB/s
  CHECK(achieved(t.find("pcie3")) == Approx(12.0e9).epsilon(0.001));
  CHECK(achieved(t.find("pcie4")) == Approx(24.0e9).epsilon(0.001));
  CHECK(achieved(t.find("pcie5")) == Approx(48.0e9).epsilon(0.001));
  CHECK(achieved(t.find("upi")) == Approx(10.0e9));
  CHECK(t.find("nvlink4").in_switch_reduction);
  CHECK_FALSE(t.find("nvlink3").in_switch_reduction);
}

TEST_CASE("protocol constants follow NCCL 2.20.3's tuning table") {
  const auto t = table();
  const auto& ring = t.algorithm(CommAlgorithm::ring);
  const auto& ll = *ring.protocols[static_cast<std::size_t>(Protocol::ll)];
  CHECK(ll.base_latency_s == Approx(6.6e-6));  // baseLat Ring LL
  CHECK(ll.hop_latency_s[static_cast<std::size_t>(LinkKind::nvlink)] == Approx(0.6e-6));
  CHECK(ll.hop_latency_s[static_cast<std::size_t>(LinkKind::network)] == Approx(2.7e-6));
  CHECK(ll.bandwidth_fraction == Approx(0.25));
  const auto& simple = *ring.protocols[static_cast<std::size_t>(Protocol::simple)];
  CHECK(simple.hop_latency_s[static_cast<std::size_t>(LinkKind::pcie)] == Approx(5.7e-6));
  CHECK(simple.hop_latency_s[static_cast<std::size_t>(LinkKind::socket)] == Approx(5.7e-6));
  CHECK_FALSE(t.algorithm(CommAlgorithm::nvls).protocols[0].has_value());
  // perChMaxRingLL128Bws (Ampere 20, Hopper 36.7 GB/s a channel) and the ring's plateau
  // factor (x1.9 before compute capability 8.0, x1.4 from it), in 2.20.3's tuning.cc.
  const auto& ll128 = *ring.protocols[static_cast<std::size_t>(Protocol::ll128)];
  CHECK(ll128.channel_max_Bps_across_nodes.at("nvlink3")[0] == Approx(20e9));
  CHECK(ll128.channel_max_Bps_across_nodes.at("nvlink4")[1] == Approx(36.7e9));
  CHECK(simple.multi_node_all_reduce_latency_factor.at("nvlink2") == Approx(1.9));
  CHECK(simple.multi_node_all_reduce_latency_factor.at("nvlink4") == Approx(1.4));
}

TEST_CASE("unknown link classes and malformed tables are errors") {
  CHECK_THROWS_WITH(table().find("nvlink9"),
                    Contains("unknown link class 'nvlink9'") && Contains("nvlink2"));
  const auto path = std::filesystem::temp_directory_path() / "dtplan_test_interconnect.json";
  std::ofstream(path) << R"({"schema_version": 1, "link_classes": [
    {"name": "x", "kind": "warp", "bandwidth_Bps": 1e9, "efficiency": 1}], "algorithms": {}})";
  CHECK_THROWS_WITH(InterconnectTable::load(path), Contains("/link_classes/0/kind"));
  std::ofstream(path) << R"({"schema_version": 1, "link_classes": [
    {"name": "x", "kind": "pcie", "bandwidth_Bps": 1e9, "efficiency": 1.5}], "algorithms": {}})";
  CHECK_THROWS_WITH(InterconnectTable::load(path), Contains("/efficiency: must be at most 1"));
  std::ofstream(path) << R"({"schema_version": 1, "link_classes": [
    {"name": "x", "kind": "pcie", "bandwidth_Bps": 1e-300, "efficiency": 1}], "algorithms": {}})";
  CHECK_THROWS_WITH(InterconnectTable::load(path),
                    Contains("/bandwidth_Bps: must be at least 1e6"));
  // A tree's channel cap names the NVLink class of a GPU generation, nothing else.
  auto with_cap = [&](const std::string& cls) {
    nlohmann::json j = nlohmann::json::parse(
        std::ifstream(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json"));
    j["algorithms"]["tree"]["Simple"]["channel_max_Bps_across_nodes"] = {
        {cls, {{"two_nodes", 1e10}, {"more_nodes", 1e10}}}};
    std::ofstream(path) << j.dump();
  };
  with_cap("pcie4");
  CHECK_THROWS_WITH(InterconnectTable::load(path),
                    Contains("channel_max_Bps_across_nodes: 'pcie4' is not an NVLink class"));
  with_cap("nvlink9");
  CHECK_THROWS_WITH(InterconnectTable::load(path), Contains("'nvlink9' is not an NVLink class"));
  // So does a ring's all-reduce plateau factor, and it lies in [1, 10].
  auto with_plateau = [&](const std::string& cls, double factor) {
    nlohmann::json j = nlohmann::json::parse(
        std::ifstream(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json"));
    j["algorithms"]["ring"]["Simple"]["multi_node_all_reduce_latency_factor"] = {{cls, factor}};
    std::ofstream(path) << j.dump();
  };
  with_plateau("ib_hdr", 1.4);
  CHECK_THROWS_WITH(InterconnectTable::load(path),
                    Contains("multi_node_all_reduce_latency_factor: 'ib_hdr' is not an NVLink"));
  with_plateau("nvlink4", 0.5);
  CHECK_THROWS_WITH(
      InterconnectTable::load(path),
      Contains("multi_node_all_reduce_latency_factor/nvlink4") && Contains("must be at least 1"));
  // A size correction is 1 to 64 factors, each in (0, 1].
  auto with_factors = [&](const nlohmann::json& factors) {
    nlohmann::json j = nlohmann::json::parse(
        std::ifstream(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json"));
    j["algorithms"]["tree"]["LL"]["bandwidth_factor_by_size"] = factors;
    std::ofstream(path) << j.dump();
  };
  with_factors(nlohmann::json::array({1.0, 1.5}));
  CHECK_THROWS_WITH(InterconnectTable::load(path),
                    Contains("bandwidth_factor_by_size") && Contains("(0, 1], got 1.5"));
  with_factors(nlohmann::json::array());
  CHECK_THROWS_WITH(InterconnectTable::load(path), Contains("an array of 1 to 64 factors"));
  // NVLS scales its fit by generation only from a generation it states.
  nlohmann::json j = nlohmann::json::parse(
      std::ifstream(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json"));
  j["algorithms"]["nvls"]["fitted_generation"] = "nvlink3";
  std::ofstream(path) << j.dump();
  CHECK_THROWS_WITH(InterconnectTable::load(path),
                    Contains("/algorithms/nvls/fitted_generation") &&
                        Contains("'nvlink3' is not a key of generation_efficiency"));
  j["algorithms"]["nvls"]["fitted_generation"] = "nvlink4";
  j["algorithms"]["nvls"]["generation_efficiency"]["nvlnk5"] = 0.74;
  std::ofstream(path) << j.dump();
  CHECK_THROWS_WITH(InterconnectTable::load(path),
                    Contains("generation_efficiency: 'nvlnk5' is not an NVLink class"));
  std::filesystem::remove(path);
}

TEST_CASE("a tree across nodes is capped per channel as NCCL's tuning model caps it") {
  // NCCL 2.30.7 src/graph/tuning.cc perChMaxTreeBws, columns N2 and N4: Ampere 23.6 / 17.8,
  // Hopper 41.4 / 36.0, Blackwell 42.8 / 24.0 GB/s.
  const auto t = table();
  const auto& simple =
      *t.algorithm(CommAlgorithm::tree).protocols[static_cast<std::size_t>(Protocol::simple)];
  const auto cap = [&](const char* cls) { return simple.channel_max_Bps_across_nodes.at(cls); };
  CHECK(cap("nvlink3") == std::array<double, 2>{23.6e9, 17.8e9});
  CHECK(cap("nvlink4") == std::array<double, 2>{41.4e9, 36.0e9});
  CHECK(cap("nvlink5") == std::array<double, 2>{42.8e9, 24.0e9});
}
