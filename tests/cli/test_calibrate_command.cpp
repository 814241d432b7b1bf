// Tests for cli/src/calibrate_command.cpp and autotune_command.cpp: output paths that cannot be
// used are refused up front with what is wrong, before minutes of measuring.
#include <catch2/catch.hpp>
#include <filesystem>

#include "cli_runner.hpp"

using Catch::Contains;

TEST_CASE("calibrate checks --out before measuring") {
  // No mpirun is started for these: the refusal comes first (and at once).
  auto r = dtplan::test::run_dtplan({"calibrate", "--out", "/nonexistent-dir/profile.json"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--out /nonexistent-dir/profile.json: the directory "
                             "/nonexistent-dir does not exist"));
  const auto dir = std::filesystem::temp_directory_path();
  r = dtplan::test::run_dtplan({"calibrate", "--out", dir.string()});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains(": is a directory"));
}

TEST_CASE("autotune --resume on a directory says it is a directory, not that it is empty") {
  // The library's FieldError on "results", rendered with the flag: no trial is started, the
  // results file is opened before the first one.
  const auto dir = std::filesystem::temp_directory_path() / "dtplan-test-results-dir";
  std::filesystem::create_directories(dir);
  const auto r =
      dtplan::test::run_dtplan({"autotune", "--model", "gpt2", "--global-batch", "8", "--seq-len",
                                "64", "--scale", "0.05", "--results", dir.string(), "--resume"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--results: " + dir.string() + ": is a directory"));
}

TEST_CASE("autotune refuses an infinite time budget and a scale above 1, naming the flag") {
  // Refused while parsing flags: no planner, no mpirun.
  auto r = dtplan::test::run_dtplan(
      {"autotune", "--model", "gpt2", "--global-batch", "8", "--time-budget", "inf"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--time-budget: must be finite, got inf"));
  r = dtplan::test::run_dtplan(
      {"autotune", "--model", "gpt2", "--global-batch", "8", "--scale", "2"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--scale: must be at most 1"));
}
