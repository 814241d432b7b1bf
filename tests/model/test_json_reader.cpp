// Tests for model/src/json_reader.cpp: positions in errors, type checks, unknown keys.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("malformed JSON reports origin, line and column") {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": ,\n}\n";
  const auto msg = error_of([&] { parse_json(text, "cfg.json"); });
  CHECK_THAT(msg, Contains("cfg.json:3:") && Contains("malformed JSON"));
}

// Found by fuzzing (tests/fuzz/regressions/profile): nlohmann throws out_of_range, not a
// parse_error, for a number beyond a double, and it escaped every command as a crash.
TEST_CASE("a number too large for a double is malformed JSON with its line") {
  const auto msg = error_of([] { parse_json("{\"a\": 1,\n \"b\": 2e308}", "p.json"); });
  CHECK_THAT(msg,
             Catch::Contains("p.json: malformed JSON: line 2: number overflow parsing '2e308'"));
}

TEST_CASE("duplicate keys are rejected") {
  const auto msg = error_of([] { parse_json(R"({"a": 1, "a": 2})", "d.json"); });
  CHECK_THAT(msg, Contains("d.json") && Contains("duplicate key \"a\""));
}

TEST_CASE("line_of_pointer finds nested keys and array elements") {
  const std::string text =
      "{\n"                            // 1
      "  \"name\": \"x\",\n"           // 2
      "  \"layers\": [\n"              // 3
      "    {\"type\": \"ReLU\"},\n"    // 4
      "    {\n"                        // 5
      "      \"type\": \"Conv2d\",\n"  // 6
      "      \"kernal_size\": 5\n"     // 7
      "    }\n"                        // 8
      "  ]\n"                          // 9
      "}\n";
  CHECK(line_of_pointer(text, "/name") == 2);
  CHECK(line_of_pointer(text, "/layers") == 3);
  CHECK(line_of_pointer(text, "/layers/0") == 4);
  CHECK(line_of_pointer(text, "/layers/1/type") == 6);
  CHECK(line_of_pointer(text, "/layers/1/kernal_size") == 7);
  // A missing key points at its deepest existing ancestor.
  CHECK(line_of_pointer(text, "/layers/1/missing") == 5);
  // A parsed document answers the same from the index it builds once.
  const auto doc = parse_json(text, "<layers>");
  CHECK(doc->line_of("/layers/1/kernal_size") == 7);
  CHECK(doc->line_of("/layers/1/missing/deeper") == 5);
  CHECK(doc->line_of("/layers/0") == 4);
  CHECK(doc->line_of("") == 1);
}

TEST_CASE("line numbers of keys that need escaping in a JSON pointer") {
  const std::string text = "{\n  \"a/b\": {\n    \"c~d\": 1\n  }\n}\n";
  const auto doc = parse_json(text, "<escaped>");
  CHECK(doc->line_of("/a~1b") == 2);
  CHECK(doc->line_of("/a~1b/c~0d") == 3);
  CHECK(line_of_pointer(text, "/a~1b/c~0d") == 3);
}

TEST_CASE("unknown keys are errors naming path and line") {
  const auto doc = parse_json("{\n  \"schema_version\": 1,\n  \"nmae\": \"x\"\n}", "m.json");
  const auto r = ObjectReader::root(doc);
  r.check_schema_version(1);
  r.optional_string("name");
  const auto msg = error_of([&] { r.reject_unknown_keys(); });
  CHECK_THAT(msg, Contains("m.json:3: /nmae: unknown key") && Contains("name"));
}

TEST_CASE("typed getters check presence and type") {
  const auto doc = parse_json(
      R"({"s": "text", "i": 5, "z": 0, "f": 1e9, "half": 1.5, "b": true, "n": null, "l": [1, "x"]})",
      "t.json");
  const auto r = ObjectReader::root(doc);
  CHECK(r.integer("i") == 5);
  CHECK(r.integer("f") == 1'000'000'000);  // integral float accepted
  CHECK_THAT(error_of([&] { r.integer("half"); }), Contains("/half: expected an integer"));
  CHECK_THAT(error_of([&] { r.integer("s"); }), Contains("expected an integer, got a string"));
  CHECK_THAT(error_of([&] { r.positive_integer("z"); }),
             Contains("/z: must be a positive integer, got 0"));
  CHECK_THAT(error_of([&] { r.string("missing"); }), Contains("/missing: missing required key"));
  CHECK_FALSE(r.optional_integer("n").has_value());  // null reads as absent
  CHECK(r.boolean("b"));
  CHECK_THAT(error_of([&] { r.integers("l"); }), Contains("/l/1: expected an integer"));
}

TEST_CASE("schema_version must be supported") {
  const auto doc = parse_json(R"({"schema_version": 7})", "v.json");
  CHECK_THAT(error_of([&] { ObjectReader::root(doc).check_schema_version(1); }),
             Contains("unsupported version 7"));
}

TEST_CASE("a non-object root is rejected") {
  CHECK_THAT(error_of([] { ObjectReader::root(parse_json("[1, 2]", "a.json")); }),
             Contains("a.json") && Contains("expected an object, got an array"));
}

TEST_CASE("unreadable files name the path") {
  CHECK_THAT(error_of([] { read_json_file("/nonexistent/x.json"); }),
             Contains("/nonexistent/x.json: cannot open"));
}

TEST_CASE("range-checked numbers: finite, positive where asked, within a sane maximum") {
  const auto doc = parse_json(
      "{\n  \"neg\": -1,\n  \"zero\": 0,\n  \"huge\": 1e308,\n  \"ok\": 0.5,\n  \"n\": 3\n}\n",
      "r.json");
  const auto r = ObjectReader::root(doc);
  CHECK(r.number("ok", kPositiveSeconds) == 0.5);
  CHECK_THAT(error_of([&] { r.number("neg", kPositiveSeconds); }),
             Contains("r.json:2: /neg: must be positive, got -1"));
  CHECK_THAT(error_of([&] { r.number("zero", kFactor); }),
             Contains("r.json:3: /zero: must be positive, got 0"));
  CHECK_THAT(error_of([&] { r.number("huge", kPositiveSeconds); }),
             Contains("r.json:4: /huge: must be at most 1e7 (a sane maximum), got 1e308"));
  CHECK(r.number("zero", kSeconds) == 0.0);
  CHECK_FALSE(r.optional_number("absent", kFactor).has_value());
  CHECK_THAT(error_of([&] { r.integer("n", 4, 10); }),
             Contains("/n: must be an integer from 4 to 10, got 3"));
  // A literal beyond double's range is a one-line error, not nlohmann's exception.
  CHECK(error_of([] { parse_json(R"({"x": 1e999})", "i.json"); }) ==
        "i.json: malformed JSON: line 1: number overflow parsing '1e999'");
}

TEST_CASE("flags share the range check: NaN, inf, negatives and junk are named") {
  const auto check = number_check(kLearningRate);
  CHECK(check("0.001").empty());
  CHECK(check("nan") == "must be a number, got NaN");
  CHECK(check("inf") == "must be finite, got inf");
  CHECK(check("-1") == "must be positive, got -1");
  CHECK(check("100") == "must be at most 10 (a sane maximum), got 100");
  CHECK(check("1e-3x") == "expected a number, got 1e-3x");
  CHECK(number_check(kSeconds)("0").empty());
  CHECK(number_check(kSeconds)("-1") == "must be zero or more, got -1");
}
