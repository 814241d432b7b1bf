// Tests for cli/src/app.cpp: subcommand dispatch, version, and exit codes.
#include <catch2/catch.hpp>
#include <sstream>

#include "dtplan/cli/app.hpp"

namespace {
int run(const std::vector<std::string>& args, std::string* out_text = nullptr,
        std::string* err_text = nullptr) {
  std::ostringstream out, err;
  const int code = dtplan::cli::run_cli(args, out, err);
  if (out_text) *out_text = out.str();
  if (err_text) *err_text = err.str();
  return code;
}
}  // namespace

TEST_CASE("a subcommand is required, unknown ones are refused") {
  std::string err;
  CHECK(run({}, nullptr, &err) != 0);
  CHECK(run({"frobnicate"}, nullptr, &err) != 0);
}

TEST_CASE("version and help flags succeed") {
  std::string out;
  CHECK(run({"--version"}, &out) == 0);
  CHECK_THAT(out, Catch::Contains("dtplan 0."));
  CHECK(run({"--help"}, &out) == 0);
  CHECK_THAT(out,
             Catch::Contains("memory") && Catch::Contains("models") && Catch::Contains("gpus"));
}

TEST_CASE("library errors become one line and exit code 1") {
  std::string err;
  CHECK(run({"gpus", "--data-dir", "/nonexistent"}, nullptr, &err) == 1);
  CHECK(err ==
        "dtplan: error: --data-dir '/nonexistent' is not a dtplan data directory (no "
        "gpus.json in it)\n");
}

TEST_CASE("a flag given twice is named, not CLI11's 'At Most 1 required but received 2'") {
  std::string err;
  CHECK(run({"memory", "--params", "1B", "--gpus", "2", "--gpus", "4"}, nullptr, &err) == 2);
  CHECK(err == "dtplan: error: --gpus given twice (give it once) (see dtplan memory --help)\n");
}

TEST_CASE("a count that is not a number names the flag and the value, not 'Could not convert'") {
  std::string err;
  CHECK(run({"estimate", "--model", "gpt2", "--gpus", "8", "--micro-batch", "4x"}, nullptr, &err) ==
        2);
  CHECK(err ==
        "dtplan: error: --micro-batch: '4x' is not a whole number (see dtplan estimate --help)\n");
  CHECK(run({"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "6x4"}, nullptr, &err) ==
        2);
  CHECK(err ==
        "dtplan: error: --global-batch: '6x4' is not a whole number (see dtplan plan --help)\n");
}

TEST_CASE("a parse error without a command points at dtplan's own help") {
  std::string err;
  CHECK(run({"--gpus", "8"}, nullptr, &err) == 2);
  CHECK(err.rfind("dtplan: error: ", 0) == 0);
  CHECK_THAT(err, Catch::EndsWith(" (see dtplan --help)\n"));
}

TEST_CASE("an unknown option is named with the command's options like it, not CLI11's list") {
  // CLI11 said "The following arguments were not expected: 4096 --seqlen", the value first.
  std::string err;
  CHECK(run({"plan", "--model", "gpt2", "--global-batch", "8", "--seqlen", "4096"}, nullptr,
            &err) == 2);
  CHECK(err ==
        "dtplan: error: unknown option '--seqlen' for dtplan plan (did you mean: --seq-len?) "
        "(see dtplan plan --help)\n");
  CHECK(run({"estimate", "--model", "gpt2", "--grad-acc=4"}, nullptr, &err) == 2);
  CHECK(err ==
        "dtplan: error: unknown option '--grad-acc' for dtplan estimate (did you mean: "
        "--grad-accum?) (see dtplan estimate --help)\n");
  // An option another command has is unknown to this one.
  CHECK(run({"gpus", "--global-batch", "8"}, nullptr, &err) == 2);
  CHECK_THAT(err, Catch::StartsWith("dtplan: error: unknown option '--global-batch' for dtplan "
                                    "gpus"));
}

TEST_CASE("estimate's unknown strategy lists the layout frameworks it also takes") {
  std::string err;
  CHECK(run({"estimate", "--model", "gpt2", "--topology", "dgx-h100", "--gpu", "H100-SXM",
             "--strategy", "zero4"},
            nullptr, &err) == 1);
  CHECK_THAT(err,
             Catch::Contains("unknown strategy 'zero4' (did you mean: zero1, zero2, zero3?)") &&
                 Catch::Contains("; or a layout framework: megatron, fsdp2"));
}

TEST_CASE("a layout that does not divide the topology's GPUs says --gpus was not given") {
  std::string err;
  CHECK(run({"estimate", "--model", "llama-2-70b", "--topology", "dgx-h100", "--nodes", "2",
             "--gpu", "H100-SXM", "--tp", "3"},
            nullptr, &err) == 1);
  CHECK(err ==
        "dtplan: error: --gpus: not given, so every GPU of the topology: 16 is not divisible by "
        "--tp x --cp x --pp = 3; give --gpus or other sizes\n");
}
