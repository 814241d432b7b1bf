// Tests for cli/src/format.cpp and json_output.cpp: the last line of defence, a non-finite
// number reaching a report is an internal error, never "inf ms" with exit 0.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

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

TEST_CASE("a report line wraps between its parts, never inside one") {
  std::ostringstream out;
  // Widths by hand: "  " + "step 1.000 s:" is 15 characters; ", compute 0.800 s" would make
  // 32 > 30, so the line breaks after "step 1.000 s:" and the comma stays on it (its trailing
  // space dropped). The continuation starts at 2 + 4 spaces: "      compute 0.800 s" is 21,
  // and ", optimizer 0.2 s" would make 38 > 30 again.
  print_wrapped(out, "  ",
                {{"", "step 1.000 s:"}, {", ", "compute 0.800 s"}, {", ", "optimizer 0.2 s"}}, 30);
  CHECK(out.str() == "  step 1.000 s:,\n      compute 0.800 s,\n      optimizer 0.2 s\n");
  std::ostringstream wide;
  print_wrapped(wide, "  ", {{"", "a"}, {", ", "b"}, {"; ", "c"}});
  CHECK(wide.str() == "  a, b; c\n");
  // A part longer than the width keeps a line of its own rather than being cut.
  std::ostringstream longer;
  print_wrapped(longer, "", {{"", "x"}, {" ", std::string(40, 'y')}, {" ", "z"}}, 10);
  CHECK(longer.str() == "x\n    " + std::string(40, 'y') + "\n    z\n");
}
