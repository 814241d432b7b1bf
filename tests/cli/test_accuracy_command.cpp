// Tests for `dtplan accuracy --published` (cli/src/accuracy_command.cpp, published_report.cpp):
// the summaries by family and source, JSON as documented, and bad input named by its flag.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/planner/published_accuracy.hpp"

using Catch::Contains;

namespace {
using Result = dtplan::test::CliResult;
Result run(std::vector<std::string> args) {
  return dtplan::test::run_dtplan(std::move(args));
}
}  // namespace

TEST_CASE("accuracy --published: one family as JSON, each row's error as defined") {
  const auto r = run({"accuracy", "--published", "--family", "comm", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["by_family"].size() == 1);
  CHECK(j["by_family"][0]["name"] == "comm");
  CHECK(j["by_family"][0]["predicted"].get<int>() > 0);
  for (const auto& row : j["rows"]) {
    CHECK(row["family"] == "comm");
    if (row["status"] != "predicted") continue;
    const double m = row["measured"], p = row["predicted"], e = row["error"];
    // busbw: larger is faster, so error = predicted / measured - 1; time_us the inverse.
    CHECK(e == Approx(row["metric"] == "time_us" ? m / p - 1 : p / m - 1));
  }
}

TEST_CASE("accuracy --published: text names sources and the largest errors, and bad input") {
  const auto r = run({"accuracy", "--published", "--source", "narayanan2021-ptdp"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("narayanan2021-ptdp") && Contains("the largest errors") &&
                        Contains("tflops_per_gpu"));
  // Step rows give the error bands; a memory source has none, and prints no empty table.
  CHECK_THAT(r.out, Contains("error bands of step predictions"));
  const auto memory =
      run({"accuracy", "--published", "--family", "memory", "--source", "memory-torchtitan"});
  REQUIRE(memory.code == 0);
  CHECK_THAT(memory.out,
             Contains("memory-torchtitan") && !Contains("error bands of step predictions"));
  const auto family = run({"accuracy", "--published", "--family", "speed"});
  CHECK(family.code != 0);
  CHECK_THAT(family.err, Contains("--family") && Contains("step, comm, memory"));
  const auto source = run({"accuracy", "--published", "--source", "narayanan2020"});
  CHECK(source.code != 0);
  CHECK_THAT(source.err, Contains("--source") && Contains("narayanan2021-ptdp"));
  const auto none = run({"accuracy"});
  CHECK(none.code != 0);
  CHECK_THAT(none.err, Contains("--profile") && Contains("--published"));
}

TEST_CASE("accuracy --published: the ranking of one job's configurations, text and JSON") {
  // Narayanan et al. 2021 measured, among others, ZeRO-3 and PTD-P at 384, 768 and 1,536 GPUs
  // for one 175B job per GPU count: pairs of one job in two configurations.
  const auto j = nlohmann::json::parse(
      run({"accuracy", "--published", "--source", "narayanan2021-ptdp", "--json"}).out);
  const auto& r = j["ranking"];
  const auto pairs = r["pairs"].get<std::int64_t>();
  CHECK(pairs >= 3);
  CHECK(r["agree"].get<std::int64_t>() + r["tied"].get<std::int64_t>() +
            static_cast<std::int64_t>(r["disagreements"].size()) ==
        pairs);
  CHECK(r["ties"].size() == r["tied"].get<std::size_t>());
  CHECK(r["clear_gap"].get<double>() == 0.05);
  for (const auto& d : r["disagreements"]) {
    CHECK(d["measured_gap"].get<double>() > 0);
    CHECK(d["predicted_gap"].get<double>() < 0);
  }
  const auto text = run({"accuracy", "--published", "--source", "narayanan2021-ptdp"});
  CHECK_THAT(text.out, Contains("ranking: pairs of step rows of one job") &&
                           Contains("dtplan orders " + std::to_string(r["agree"].get<int>()) +
                                    " of " + std::to_string(pairs)));
}

TEST_CASE("estimate shows the error band of runs like it, from the published runs") {
  const auto r = run({"estimate", "--model", "llama-2-70b", "--topology", "dgx-h100", "--nodes",
                      "16", "--gpu", "H100-SXM", "--tp", "8", "--pp", "4", "--sp", "--global-batch",
                      "1024", "--seq-len", "4096", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["error_band"]["group"] == "megatron on hopper");
  CHECK(j["error_band"]["rows"].get<int>() >= 3);
  const auto text = run({"estimate", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu",
                         "RTX-4090", "--micro-batch", "2"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("accuracy: no published measurements of data-parallel on ada"));
}

TEST_CASE("plan shows the error band of its best plan's kind") {
  // The plan example on A100s: the best is a data-parallel strategy; its band is the
  // one the bundled data/error_bands.json holds for data-parallel runs on Ampere.
  const auto bands =
      dtplan::planner::load_error_bands(dtplan::resolve_data_dir("") / "error_bands.json");
  const auto* band = dtplan::planner::find_band(bands, "data-parallel on ampere");
  REQUIRE(band != nullptr);
  const std::vector<std::string> plan{"plan",         "--model",   "gpt2-xl",   "--topology",
                                      "pcie-split-8", "--gpu",     "A100-80GB", "--global-batch",
                                      "512",          "--seq-len", "1024"};
  auto json_args = plan;
  json_args.emplace_back("--json");
  const auto r = run(json_args);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["error_band"]["group"] == "data-parallel on ampere");
  CHECK(j["error_band"]["rows"].get<std::int64_t>() == band->rows);
  CHECK(j["error_band"]["median_abs_error"].get<double>() == Approx(band->median_abs_error));
  const auto text = run(plan);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("accuracy: on " + std::to_string(band->rows) +
                                " published runs of data-parallel on ampere"));
  // 158 rows: no caveat. A band of fewer than 10 rows (FSDP2 layouts on Hopper) says it is a
  // weak guide.
  CHECK(band->rows >= dtplan::planner::kFewBandRows);
  CHECK_THAT(text.out, !Contains("weak guide"));
  const auto* few = dtplan::planner::find_band(bands, "fsdp2 on hopper");
  REQUIRE(few != nullptr);
  REQUIRE(few->rows < dtplan::planner::kFewBandRows);
  const auto fsdp2 = run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu",
                          "H100-SXM", "--strategy", "fsdp2", "--seq-len", "4096"});
  REQUIRE(fsdp2.code == 0);
  CHECK_THAT(fsdp2.out, Contains("published runs of fsdp2 on hopper") &&
                            Contains("; so few runs are a weak guide"));
}
