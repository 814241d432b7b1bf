// Tests for cli/src/format.cpp and json_output.cpp: the last line of defence, a non-finite
// number reaching a report is an internal error, never "inf ms" with exit 0.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "format.hpp"
#include "json_output.hpp"

using namespace dtplan::cli;

TEST_CASE("formatters refuse inf and NaN") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(seconds(0.0123) == "12.30 ms");
  CHECK_THROWS_AS(seconds(inf), NonFiniteInReport);
  CHECK_THROWS_AS(percent(nan), NonFiniteInReport);
  CHECK_THROWS_WITH(fixed(-inf, 1), Catch::Contains("a report came to hold inf"));
}

TEST_CASE("JSON reports refuse inf and NaN (nlohmann would write null)") {
  nlohmann::json j{{"ok", 1.5}, {"rows", {{{"t", std::nan("")}}}}};
  CHECK_THROWS_AS(report_text(j), NonFiniteInReport);
  j["rows"][0]["t"] = 2.0;
  CHECK(report_text(j) == j.dump(2) + "\n");
}

TEST_CASE("significant digits, as the learning rate is shown") {
  CHECK(significant(0.000125, 3) == "0.000125");
  CHECK_THROWS_AS(significant(std::numeric_limits<double>::infinity(), 3), NonFiniteInReport);
}

TEST_CASE("a near miss is said in MiB, never as 0.00 GiB") {
  CHECK(gib_or_mib(1.5) == "1.50 GiB");
  CHECK(gib_or_mib(0.01) == "0.01 GiB");
  CHECK(gib_or_mib(0.003) == "3.1 MiB");  // 0.003 x 1024 = 3.072
}
