// Tests for cli/src/model_report.cpp: `dtplan models NAME` describes one model.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dtplan/cli/app.hpp"

using Catch::Contains;

namespace {
std::string run(std::vector<std::string> args) {
  std::ostringstream out, err;
  args.insert(args.end(), {"--data-dir", DTPLAN_DATA_DIR});
  REQUIRE(dtplan::cli::run_cli(args, out, err) == 0);
  return out.str();
}
}  // namespace

TEST_CASE("a layer list is described layer by layer") {
  const auto text = run({"models", "cifar10-lenet"});
  // conv 3->6 k5 on 32x32: 6 x 28 x 28 = 4,704 activation elements, 456 parameters
  CHECK_THAT(text, Contains("[6, 28, 28]") && Contains("4,704") && Contains("456"));
  CHECK_THAT(text, Contains("62,006 parameters"));
  const auto j = nlohmann::json::parse(run({"models", "cifar10-lenet", "--json"}));
  CHECK(j["model"]["layers"][0]["output_elements"] == 4704);
  CHECK(j["model"]["layers"].size() == 12);
}

TEST_CASE("a transformer is described by component and shape") {
  const auto text = run({"models", "llama-2-70b"});
  CHECK_THAT(text, Contains("68,976,648,192 parameters") && Contains("64 / 8 / 128") &&
                       Contains("28672 (SwiGLU"));
}
