// Tests for cli/src/validate_command.cpp: bad plans, measurements and profiles are refused
// naming the file, the field (a JSON pointer) and the problem, before anything is compared.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using Catch::Contains;

namespace {
const std::filesystem::path kBad = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "bad";
const std::filesystem::path kMeasured =
    std::filesystem::path(DTPLAN_DATA_DIR) / "measurements" / "cpu-2ranks";

dtplan::test::CliResult validate(const std::filesystem::path& plan,
                                 const std::filesystem::path& measured,
                                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"validate", "--plan", plan.string(), "--measured",
                                measured.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return dtplan::test::run_dtplan(args);
}
}  // namespace

TEST_CASE("validate: the bundled measurement still validates against its plan") {
  const auto r = validate(kMeasured / "plan.json", kMeasured / "measurement.json");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("step time"));
}

TEST_CASE("validate: absurd numbers in a measurement name the field, never print inf") {
  const auto plan = kMeasured / "plan.json";
  auto r = validate(plan, kBad / "measurement_time_negative.json");
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("measurement_time_negative.json:146: /steps/1/time_s: "
                             "must be positive, got -1"));
  r = validate(plan, kBad / "measurement_time_huge.json");
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("measurement_time_huge.json:146: /steps/1/time_s: "
                             "must be at most 1e7 (a sane maximum), got 1e308"));
  r = validate(plan, kBad / "measurement_scale_zero.json");
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("measurement_scale_zero.json:121: /scale: must be positive, got 0"));
}

TEST_CASE("validate: a measurement's unknown backend is named with the known ones") {
  const auto r = validate(kMeasured / "plan.json", kBad / "measurement_backend_tpu.json");
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("measurement_backend_tpu.json:2: /backend: unknown backend 'tpu'") &&
                        Contains("known: cpu, cuda"));
  CHECK(r.err.find("calibrate") == std::string::npos);
}

TEST_CASE("validate: without a bundled profile, says how to calibrate one in the CLI's flags") {
  // The bundled measurement relabelled as a CUDA run: no cuda-2ranks profile ships.
  nlohmann::json m;
  std::ifstream(kMeasured / "measurement.json") >> m;
  m["backend"] = "cuda";
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-validate-cuda.json";
  std::ofstream(path) << m.dump();
  const auto r = validate(kMeasured / "plan.json", path);
  std::filesystem::remove(path);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("no bundled hardware profile") &&
                        Contains("calibrate one (--backend cuda --np 2 --out profile.json) and "
                                 "pass it as --profile"));
}

TEST_CASE("validate: absurd numbers in a profile name the field") {
  const auto plan = kMeasured / "plan.json";
  const auto measured = kMeasured / "measurement.json";
  auto r =
      validate(plan, measured, {"--profile", (kBad / "profile_compute_scale_huge.json").string()});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("profile_compute_scale_huge.json:1089: "
                             "/step_correction/compute_scale: must be at most 1000"));
  r = validate(plan, measured, {"--profile", (kBad / "profile_rate_point_huge.json").string()});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("profile_rate_point_huge.json:101: "
                             "/elementwise_s_per_byte/1/s_per_unit: must be at most 1"));
}

TEST_CASE("validate: what is wrong with the plan itself, not 'a different plan'") {
  const auto measured = kMeasured / "measurement.json";
  auto r = validate(kBad / "plan_unknown_model.json", measured);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("plan_unknown_model.json: /model: unknown model 'gpt-7'"));
  CHECK(r.err.find("different plan") == std::string::npos);
  r = validate(kBad / "plan_seq_len_zero.json", measured);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("plan_seq_len_zero.json: /seq_len: 0:"));
  CHECK(r.err.find("different plan") == std::string::npos);
}
