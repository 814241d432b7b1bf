// Tests for cli/src/topo_command.cpp: `dtplan topo` text, JSON and Graphviz output.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

using Catch::Contains;

namespace {
using Result = dtplan::test::CliResult;
Result run(std::vector<std::string> args) {
  return dtplan::test::run_dtplan(std::move(args));
}
}  // namespace

TEST_CASE("topo reports the ring and the socket-link bottleneck of pcie-split-8") {
  const auto r = run({"topo", "--topology", "pcie-split-8"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("cpu0 - cpu1") && Contains("ring bandwidth: 10.0 GB/s") &&
                        Contains("crosses this link 2 times"));
  const auto j = nlohmann::json::parse(run({"topo", "--topology", "pcie-split-8", "--json"}).out);
  CHECK(j["ring"].size() == 8);
  CHECK(j["ring_bandwidth_Bps"].get<double>() == Approx(10e9));
  CHECK(j["bottleneck"]["kind"] == "socket");
  CHECK(j["bottleneck"]["crossings_per_ring"] == 2);
}

TEST_CASE("topo --dot - writes Graphviz") {
  const auto r = run({"topo", "--topology", "dgx-a100", "--dot", "-"});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("graph \"dgx-a100\"", 0) == 0);
  CHECK_THAT(r.out, Contains("nvlink3 x12"));
}

TEST_CASE("topo reads nvidia-smi topo -m output and states its assumptions") {
  const auto r = run({"topo", "--topology", std::string(DTPLAN_TEST_DATA_DIR) + "/smi/dgx1v.txt"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("assumed: PCIe links and switch uplinks assumed pcie4"));
  CHECK_THAT(r.out, Contains("nvlink2 x2"));
}

TEST_CASE("topo errors") {
  CHECK_THAT(run({"topo", "--topology", "dgx-a10"}).err, Contains("did you mean: dgx-a100"));
  CHECK(run({"topo", "--topology", "dgx-a100", "--gpus", "9"}).code == 1);
  CHECK_THAT(run({"topo", "--topology", "dgx-a100", "--nodes", "0"}).err,
             Contains("--nodes: must be a positive integer"));
  CHECK_THAT(run({"topo", "--topology", "pcie-split-8", "--pcie-class", "pcie7"}).err,
             Contains("unknown link class 'pcie7'"));
  CHECK(run({"topo"}).code == 2);  // --topology is required
}

// Issue 14, item 1: one GPU used to crash (the ring plan of one GPU had no channel rate).
TEST_CASE("topo with one GPU names the device and says there is no ring") {
  const std::string data = DTPLAN_TEST_DATA_DIR;
  const std::vector<std::vector<std::string>> inputs = {
      {"topo", "--topology", "pcie-1switch-4", "--gpus", "1"},
      {"topo", "--topology", "dgx-h100", "--nodes", "2", "--gpus", "1"},
      {"topo", "--topology", data + "/smi/one_gpu.txt"},
      {"topo", "--topology", data + "/topo/one_gpu.json"}};
  for (const auto& args : inputs) {
    INFO(args[2]);
    const auto r = run(args);
    REQUIRE(r.code == 0);
    // The device by name: gpu0, or n0/gpu0 when the topology spans nodes.
    CHECK_THAT(r.out, Contains("gpu0): no ring, a single GPU exchanges nothing") &&
                          Contains("\n  1 GPU ("));
    auto json_args = args;
    json_args.push_back("--json");
    const auto j = nlohmann::json::parse(run(json_args).out);
    CHECK(j["rings"].empty());
    CHECK(j["ring"] == nlohmann::json::array({0}));
    CHECK(j["ring_bandwidth_Bps"].get<double>() == 0.0);
    CHECK(j["bottleneck"].is_null());
    auto dot_args = args;
    dot_args.insert(dot_args.end(), {"--dot", "-"});
    const auto dot = run(dot_args);
    REQUIRE(dot.code == 0);
    CHECK_THAT(dot.out, Contains("gpu0"));
  }
}

TEST_CASE("a one-GPU node over two nodes rings through the network") {
  // One GPU per node: the ring is n0/gpu0 -> n1/gpu0 -> back, over the 100 GbE NICs.
  const auto j = nlohmann::json::parse(
      run({"topo", "--topology", std::string(DTPLAN_TEST_DATA_DIR) + "/topo/one_gpu.json",
           "--nodes", "2", "--json"})
          .out);
  CHECK(j["ring"] == nlohmann::json::array({0, 1}));
  CHECK(j["ring_bandwidth_Bps"].get<double>() > 0.0);
}
