// Tests for cli/src/comm_command.cpp and comm_report.cpp: `dtplan comm` for one size, a
// sweep, and training communication; JSON keys as documented; bad input.
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

TEST_CASE("comm --size --json has time, algbw, busbw, ring and bottleneck") {
  const auto r = run({"comm", "--topology", "pcie-split-8", "--size", "1GiB", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["size_bytes"] == 1073741824);
  // Bandwidth-bound: busbw approaches the 10 GB/s socket link.
  CHECK(j["busbw_Bps"].get<double>() == Approx(10e9).epsilon(0.01));
  // Ring all-reduce: 2 x 7/8 x 1 GiB over the 10 GB/s UPI link, plus microseconds of latency.
  CHECK(j["time_s"].get<double>() == Approx(1.75 * 1073741824.0 / 10e9).epsilon(0.001));
  CHECK(j["ring"].size() == 8);
  CHECK(j["bottleneck"]["kind"] == "socket");
  CHECK(j["bottleneck"]["bandwidth_Bps"].get<double>() == Approx(10e9));
}

TEST_CASE("a sweep reads like nccl-tests") {
  const auto r = run({"comm", "--topology", "pcie-split-8", "--sweep", "32KiB:4GiB"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("size") && Contains("count") && Contains("busbw") &&
                        Contains("(GB/s)") && Contains("# Avg bus bandwidth"));
  CHECK_THAT(r.out, Contains("32768") && Contains("4294967296"));
  const auto j = nlohmann::json::parse(
      run({"comm", "--topology", "pcie-split-8", "--sweep", "32KiB:4GiB", "--json"}).out);
  CHECK(j["results"].size() == 18);  // 2^15 .. 2^32
  // Latency-bound small messages, bandwidth-bound large ones.
  CHECK(j["results"][0]["busbw_Bps"].get<double>() < 0.2 * 10e9);
  CHECK(j["results"][17]["busbw_Bps"].get<double>() > 0.95 * 10e9);
}

TEST_CASE("training communication per strategy") {
  const auto r =
      run({"comm", "--topology", "dgx-a100", "--params", "1B", "--grad-accum", "4", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["strategies"].size() == 9);
  double ddp_wire = 0, zero3_wire = 0;
  for (const auto& s : j["strategies"]) {
    if (s["strategy"] == "ddp") {
      ddp_wire = s["wire_bytes_synced_every_micro_step"].get<double>() / 4;
      CHECK(s["no_sync_saving_s"].get<double>() > 0);
    }
    if (s["strategy"] == "zero3") zero3_wire = s["wire_bytes_per_gpu_per_step"].get<double>() / 4;
  }
  CHECK(zero3_wire / ddp_wire == Approx(1.5));
  const auto text = run({"comm", "--topology", "dgx-a100", "--model", "gpt2", "--strategy", "ddp",
                         "--grad-accum", "8"});
  CHECK_THAT(text.out, Contains("no_sync saves") && Contains("gradient all-reduce (DDP buckets)"));
}

TEST_CASE("all-to-all counts per rank and rounds sizes as nccl-tests does") {
  const auto r = run({"comm", "--topology", "dgx-a100", "--collective", "all-to-all", "--sweep",
                      "1000:4000", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // Whole floats for each of 8 ranks (multiples of 32 B): 1000 B rounds down to 992, 2000 to
  // 1984, and 4000 stays.
  CHECK(j["results"][0]["size_bytes"] == 992);
  CHECK(j["results"][1]["size_bytes"] == 1984);
  CHECK(j["results"][2]["size_bytes"] == 4000);
  CHECK(j["results"][0]["algorithm"] == "p2p");
  const auto text =
      run({"comm", "--topology", "dgx-a100", "--collective", "all-to-all", "--size", "1GiB"});
  CHECK_THAT(text.out, Contains("33554432"));  // 1 GiB / (4 B x 8 ranks) elements per rank
}

TEST_CASE("comm errors") {
  CHECK_THAT(run({"comm", "--topology", "dgx-a100", "--size", "12XB"}).err,
             Contains("--size '12XB': not a size"));
  CHECK_THAT(run({"comm", "--topology", "dgx-a100", "--sweep", "1GiB"}).err,
             Contains("expected FROM:TO"));
  CHECK_THAT(run({"comm", "--topology", "dgx-a100", "--sweep", "1GiB:1KiB"}).err,
             Contains("TO is smaller than FROM"));
  CHECK_THAT(run({"comm", "--topology", "dgx-a100"}).err, Contains("give --size SIZE or --sweep"));
  CHECK_THAT(
      run({"comm", "--topology", "dgx-a100", "--size", "1GiB", "--collective", "gather"}).err,
      Contains("unknown collective 'gather'"));
  CHECK_THAT(run({"comm", "--topology", "dgx-a100", "--size", "1GiB", "--algorithm", "nvls"}).err,
             Contains("--algorithm: nvls does not apply"));
  CHECK_THAT(
      run({"comm", "--topology", "dgx-a100", "--nodes", "2", "--gpus", "12", "--size", "1GiB"}).err,
      Contains("use whole nodes"));
  CHECK_THAT(run({"comm", "--topology", "dgx-a100", "--nodes", "5000", "--size", "1GiB"}).err,
             Contains("--nodes: 5000 is beyond the supported 4,096"));
  CHECK_THAT(run({"comm", "--topology", "/tmp", "--size", "1GiB"}).err, Contains("a directory"));
}

TEST_CASE("DGX B200: a ring all-reduce over NVLink 5 at NCCL's per-link bandwidth") {
  // 18 NVLink 5 links per B200 at NCCL's SM100_NVLINK_BW 40.1 GB/s each (src/graph/topo.h):
  // 721.8 GB/s, the bottleneck of a one-node ring. At 16 GiB the bus bandwidth is that less
  // the latency: Together's DGX B200 sweep measured 679 GB/s (ring, NCCL 2.29.7), 6% below.
  const auto r = run({"comm", "--topology", "dgx-b200", "--size", "16GiB", "--collective",
                      "all_reduce", "--algorithm", "ring", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["bottleneck"]["class"] == "nvlink5");
  CHECK(j["bottleneck"]["achieved_Bps"].get<double>() == Approx(18 * 40.1e9));
  const double bytes = 16.0 * (1 << 30);
  const double time_s = 2.0 * 7.0 / 8.0 * bytes / (18 * 40.1e9) + j["latency_s"].get<double>();
  CHECK(j["time_s"].get<double>() == Approx(time_s).epsilon(1e-6));
}

TEST_CASE("a tree across nodes runs no channel faster than NCCL's cap for the generation") {
  // NCCL's tuning model caps a tree channel's bus bandwidth by GPU generation and node count
  // (src/graph/tuning.cc perChMaxTreeBws, Blackwell: 42.8 GB/s for 2 nodes, 24.0 from 3 on).
  // With one channel per rail, 8 on DGX B200: 342.4 and 192 GB/s. Together's DGX B200 sweep
  // measured 335 (2 nodes) and 191-194 GB/s (4 to 46 nodes) at 16 GiB; without the cap the
  // tree was priced by its links at 643 and 333.
  for (const auto& [nodes, cap] : {std::pair{"2", 8 * 42.8e9}, std::pair{"4", 8 * 24.0e9}}) {
    const auto r = run({"comm", "--topology", "dgx-b200", "--nodes", nodes, "--size", "16GiB",
                        "--collective", "all_reduce", "--algorithm", "tree", "--json"});
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["channels"] == 8);
    const double gpus = std::stod(nodes) * 8;
    const double bytes = 16.0 * (1 << 30);
    const double time_s = bytes * 2 * (gpus - 1) / gpus / cap + j["latency_s"].get<double>();
    CHECK(j["time_s"].get<double>() == Approx(time_s).epsilon(1e-9));
  }
}

TEST_CASE("trial: strategies comm skips name their settings, not flags the user never typed") {
  // Two DGX A100 nodes given by --nodes: DataParallel's single process cannot span them, and
  // the line says "gpus 16 exceeds gpus per node 8", not "--gpus" or "--gpus-per-node".
  const auto r = dtplan::test::run_dtplan({"comm", "--topology", "dgx-a100", "--nodes", "2",
                                           "--model", "llama-2-7b", "--grad-accum", "8"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("skipped dp:") && Catch::Contains("gpus 16 exceeds gpus per node 8"));
  CHECK_THAT(r.out, !Catch::Contains("--gpus"));
}
