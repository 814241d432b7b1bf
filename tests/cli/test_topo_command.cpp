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
