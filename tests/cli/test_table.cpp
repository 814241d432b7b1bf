// Tests for cli/src/table.cpp: column alignment.
#include <catch2/catch.hpp>
#include <sstream>

#include "table.hpp"

TEST_CASE("columns align: first left, others right") {
  dtplan::cli::TextTable t({"name", "GiB"});
  t.add_row({"weights", "1.50"});
  t.add_row({"x", "12.25"});
  t.add_rule();
  std::ostringstream out;
  t.print(out);
  CHECK(out.str() ==
        "  name       GiB\n"
        "  weights   1.50\n"
        "  x        12.25\n"
        "  --------------\n");
}
