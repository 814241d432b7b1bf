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

TEST_CASE("a wrapped last column breaks at words and keeps the rule to the wrap width") {
  dtplan::cli::TextTable t({"part", "how"});
  t.add_row({"a", "one two three four"});
  t.add_rule();
  t.add_row({"bb", "extraordinarily x"});
  t.wrap_last_column(9);
  std::ostringstream out;
  t.print(out, {1});
  // "one two" (7) fits in 9, "three" would make 13; a word longer than 9 keeps a line alone.
  CHECK(out.str() ==
        "  part  how\n"
        "  a     one two\n"
        "        three\n"
        "        four\n"
        "  ---------------\n"
        "  bb    extraordinarily\n"
        "        x\n");
}
