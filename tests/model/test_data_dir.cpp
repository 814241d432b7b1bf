// Tests for model/src/data_dir.cpp: explicit directory, environment, build default, errors.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;

TEST_CASE("an explicit data directory wins and must hold gpus.json") {
  CHECK(resolve_data_dir(DTPLAN_DATA_DIR) == std::filesystem::path(DTPLAN_DATA_DIR));
  CHECK_THROWS_WITH(resolve_data_dir("/tmp"),
                    Catch::Contains("--data-dir '/tmp' is not a dtplan data directory"));
}

TEST_CASE("DTPLAN_DATA_DIR is used when no directory is given") {
  ::setenv("DTPLAN_DATA_DIR", "/nonexistent-dtplan", 1);
  CHECK_THROWS_WITH(resolve_data_dir(""), Catch::Contains("DTPLAN_DATA_DIR '/nonexistent-dtplan'"));
  ::unsetenv("DTPLAN_DATA_DIR");
  // Without the variable, the build's own data directory (this checkout's data/).
  CHECK(std::filesystem::equivalent(resolve_data_dir(""), DTPLAN_DATA_DIR));
}
