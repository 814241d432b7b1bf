// Shared pieces of the fuzz targets in this folder. Each target defines the libFuzzer entry
// point LLVMFuzzerTestOneInput; it is linked either with libFuzzer (clang, -DDTPLAN_FUZZ=ON)
// or with replay_main.cpp, which feeds it files, so past crashes replay in any build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "dtplan/model/error.hpp"

namespace dtplan::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A file named `name` holding `bytes`, for parsers whose entry point takes a path. One
// folder per process, so parallel fuzzing jobs do not share files; rewritten on every call.
std::filesystem::path scratch_file(std::string_view bytes, std::string_view name);

// Runs `parse`. dtplan::Error is the libraries' documented way to refuse an input; anything
// else (another exception, a sanitizer report, a crash) escapes and is a finding.
template <class Parse>
void expect_value_or_error(Parse&& parse) {
  try {
    parse();
  } catch (const dtplan::Error&) {
  }
}

}  // namespace dtplan::fuzz

// Defines the entry point around a body that parses `text` (the input as characters):
//   DTPLAN_FUZZ_TARGET(text) { dtplan::parse_something(text); }
#define DTPLAN_FUZZ_TARGET(text)                                                      \
  static void dtplan_fuzz_one(std::string_view text);                                 \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    dtplan::fuzz::expect_value_or_error(                                              \
        [&] { dtplan_fuzz_one(dtplan::fuzz::as_text(data, size)); });                 \
    return 0;                                                                         \
  }                                                                                   \
  static void dtplan_fuzz_one(std::string_view text)
