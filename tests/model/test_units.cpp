// Tests for model/src/units.cpp: checked byte arithmetic and formatting.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/units.hpp"

using namespace dtplan;

TEST_CASE("bytes_of multiplies elements by element size") {
  CHECK(bytes_of(1'000'000'000, 4, "w").value == 4'000'000'000);
  CHECK((Bytes{3} + Bytes{4}).value == 7);
  CHECK((Bytes{3} - Bytes{4}).value == -1);
}

TEST_CASE("overflowing byte counts throw and name the quantity") {
  // 5e18 parameters x 4 bytes = 2e19 > 2^63 - 1 (about 9.22e18).
  try {
    bytes_of(5'000'000'000'000'000'000, 4, "weights (fp32)");
    FAIL("expected an overflow error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("weights (fp32)") && Catch::Contains("overflows"));
  }
  CHECK_THROWS_AS(Bytes{INT64_MAX} + Bytes{1}, Error);
  CHECK_THROWS_AS(checked_add(INT64_MAX, 1, "x"), Error);
}

TEST_CASE("ceil_div rounds up") {
  CHECK(ceil_div(10, 3) == 4);
  CHECK(ceil_div(9, 3) == 3);
  CHECK(ceil_div(0, 3) == 0);
}

TEST_CASE("fraction_of rounds up") {
  CHECK(fraction_of(Bytes{100}, 0.05).value == 5);
  CHECK(fraction_of(Bytes{101}, 0.05).value == 6);  // 5.05 -> 6
  CHECK(fraction_of(Bytes{0}, 0.5).value == 0);
}

TEST_CASE("GiB and GB are distinct units") {
  CHECK(format_gib(Bytes{1073741824}) == "1.00 GiB");
  CHECK(format_gb(Bytes{1'000'000'000}) == "1.00 GB");
  // 80 GiB (A100-80GB) is 85.90 GB.
  CHECK(format_gb(Bytes{80LL * 1073741824}) == "85.90 GB");
  CHECK(format_gib(Bytes{-1073741824}) == "-1.00 GiB");
}

TEST_CASE("thousands separators") {
  CHECK(format_thousands(6738415616) == "6,738,415,616");
  CHECK(format_thousands(999) == "999");
  CHECK(format_thousands(1000) == "1,000");
  CHECK(format_thousands(-1234567) == "-1,234,567");
  CHECK(format_thousands(INT64_MIN) == "-9,223,372,036,854,775,808");
}

TEST_CASE("sizes parse with binary and decimal units") {
  CHECK(parse_size("4096", "--size").value == 4096);
  CHECK(parse_size("32KiB", "--size").value == 32 * 1024);
  CHECK(parse_size("1GiB", "--size").value == 1073741824);
  CHECK(parse_size("1.5GB", "--size").value == 1'500'000'000);
  CHECK(parse_size("512MB", "--size").value == 512'000'000);
  CHECK(parse_size("8B", "--size").value == 8);
  CHECK(parse_size("1e9", "--size").value == 1'000'000'000);
  for (const char* bad : {"12XB", "GiB", "", "0", "-1KiB", "1.5", "0.5B", "1e30", "ten"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_size(bad, "--size"), Error);
  }
  CHECK_THROWS_WITH(parse_size("12XB", "--size"), Catch::Contains("--size '12XB': not a size"));
}

TEST_CASE("sizes print in binary units") {
  CHECK(format_size(Bytes{32768}) == "32KiB");
  CHECK(format_size(Bytes{1073741824}) == "1GiB");
  CHECK(format_size(Bytes{1'000'000'000}) == "953.67MiB");
  CHECK(format_size(Bytes{12}) == "12B");
}
