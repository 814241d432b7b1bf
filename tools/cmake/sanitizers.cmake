# Sanitizer and fuzzing builds (CI's second build, and local hunting).
#   -DDTPLAN_SANITIZE=ON  everything under AddressSanitizer + UndefinedBehaviorSanitizer; any
#                         UB report aborts the process, so a finding fails its test.
#   -DDTPLAN_FUZZ=ON      also builds the libFuzzer targets of tests/fuzz (clang only); implies
#                         coverage instrumentation of all code. Without it, or with a compiler
#                         that has no libFuzzer, each target is still built as a replay
#                         program over its corpus and past crashes (a normal ctest test).
# See docs/reliability.md.
option(DTPLAN_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(DTPLAN_FUZZ "Build the libFuzzer targets in tests/fuzz (needs clang)" OFF)

if(DTPLAN_SANITIZE OR DTPLAN_FUZZ)
  # -g1 (line tables) after the build type's -g: the reports name function, file and line, and
  # full debug information cost 7-13% more compile time per file and larger links (clang 14).
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=address,undefined)
endif()

set(DTPLAN_HAVE_LIBFUZZER OFF)
if(DTPLAN_FUZZ)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
  check_cxx_source_compiles([[
    #include <cstddef>
    #include <cstdint>
    extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
  ]] DTPLAN_LIBFUZZER_LINKS)
  unset(CMAKE_REQUIRED_FLAGS)
  if(NOT DTPLAN_LIBFUZZER_LINKS)
    message(FATAL_ERROR "DTPLAN_FUZZ needs a compiler with libFuzzer (-fsanitize=fuzzer), "
                        "such as clang with libclang-rt-dev; ${CMAKE_CXX_COMPILER_ID} has none")
  endif()
  set(DTPLAN_HAVE_LIBFUZZER ON)
  # Coverage feedback for the library code the fuzzers reach.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
