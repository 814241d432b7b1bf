// Tests for cli/src/catalog_commands.cpp: `dtplan models` and `dtplan gpus`.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dtplan/cli/app.hpp"

namespace {
nlohmann::json run_json(const std::string& command) {
  std::ostringstream out, err;
  const int code =
      dtplan::cli::run_cli({command, "--json", "--data-dir", DTPLAN_DATA_DIR}, out, err);
  REQUIRE(code == 0);
  return nlohmann::json::parse(out.str());
}
}  // namespace

TEST_CASE("models lists every preset with its exact count") {
  const auto j = run_json("models");
  CHECK(j["models"].size() == 15);
  int found = 0;
  for (const auto& m : j["models"]) {
    if (m["name"] == "llama-2-70b") {
      ++found;
      CHECK(m["params"] == 68'976'648'192);
      CHECK(m["shape"]["kv_heads"] == 8);
    }
    if (m["name"] == "llama-3.2-1b") {
      ++found;
      // 128256 x 2048 tied embedding + 16 x (attention 2048 x (2048 + 2 x 512 + 2048) + MLP
      // 3 x 2048 x 8192 + two norms) + final norm; PyTorch counts the same 1,235,814,400
      // (data/measurements/h100-torch/torch-ref.jsonl, "parameters").
      CHECK(m["params"] == 1'235'814'400);
    }
    if (m["name"] == "llama-3.1-405b") {
      ++found;
      // Untied 128256 x 16384 embedding and LM head + 126 x (attention 16384 x (16384 + 2 x
      // 1024 + 16384) + MLP 3 x 16384 x 53248 + two norms) + final norm = 405,853,388,800, the
      // count Meta's model card rounds to 405B (by hand: 2 x 2,101,346,304 + 126 x
      // 3,187,703,808 + 16,384).
      CHECK(m["params"] == 405'853'388'800);
      CHECK(m["shape"]["layers"] == 126);
    }
    if (m["name"] == "llama-3.1-8b") {
      ++found;
      // Untied 128256 x 4096 embedding and LM head (2 x 525,336,576) + 32 x (attention 4096 x
      // (4096 + 2 x 1024 + 4096) = 41,943,040, MLP 3 x 4096 x 14336 = 176,160,768, two norms
      // 8,192) + final norm 4,096 = 8,030,261,248, Hugging Face's count for Llama 3.1 8B.
      CHECK(m["params"] == 8'030'261'248);
      CHECK(m["shape"]["max_positions"] == 131072);
    }
  }
  CHECK(found == 4);
}

TEST_CASE("gpus lists the catalogue") {
  const auto j = run_json("gpus");
  CHECK(j["gpus"].size() == 12);
  CHECK(j["gpus"][0].contains("memory_bytes"));
}
