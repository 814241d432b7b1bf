// Tests for model/src/suggest.cpp: close-name suggestions.
#include <catch2/catch.hpp>

#include "dtplan/model/suggest.hpp"

using namespace dtplan;

TEST_CASE("edit distance is the Levenshtein distance, case-insensitive") {
  CHECK(edit_distance("kitten", "sitting") == 3);  // the textbook example
  CHECK(edit_distance("A100", "a100") == 0);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("close names rank the nearest first") {
  const std::vector<std::string> presets{"gpt2",        "gpt2-xl",    "llama-2-13b",
                                         "llama-2-70b", "llama-2-7b", "mistral-7b"};
  const auto close = close_names("llama-2-7", presets);
  REQUIRE_FALSE(close.empty());
  CHECK(close.front() == "llama-2-7b");
  CHECK(close_names("resnet50", presets).empty());
}

TEST_CASE("unknown-name messages list close and known names") {
  const auto msg = unknown_name_message("GPU", "A100-80", {"A100-40GB", "A100-80GB", "T4"});
  CHECK(msg.find("unknown GPU 'A100-80'") == 0);
  CHECK(msg.find("did you mean: A100-80GB") != std::string::npos);
  CHECK(msg.find("known: A100-40GB, A100-80GB, T4") != std::string::npos);
}
