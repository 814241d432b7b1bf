// Tests for cli/src/catalog_commands.cpp: `dtplan models` and `dtplan gpus`.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dtplan/cli/app.hpp"

namespace {
nlohmann::json run_json(const std::string& command) {
  std::ostringstream out, err;
  const int code =
      dtplan::cli::run_cli({command, "--json", "--data-dir", DTPLAN_DATA_DIR}, out, err);
  REQUIRE(code == 0);
  return nlohmann::json::parse(out.str());
}
}  // namespace

TEST_CASE("models lists every preset with its exact count") {
  const auto j = run_json("models");
  CHECK(j["models"].size() == 12);
  bool found = false;
  for (const auto& m : j["models"]) {
    if (m["name"] == "llama-2-70b") {
      found = true;
      CHECK(m["params"] == 68'976'648'192);
      CHECK(m["shape"]["kv_heads"] == 8);
    }
  }
  CHECK(found);
}

TEST_CASE("gpus lists the catalogue") {
  const auto j = run_json("gpus");
  CHECK(j["gpus"].size() == 12);
  CHECK(j["gpus"][0].contains("memory_bytes"));
}
