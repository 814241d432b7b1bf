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
  CHECK(j["models"].size() == 26);
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
    if (m["name"] == "mixtral-8x7b") {
      ++found;
      // 2 x 32000 x 4096 (untied) + 4096 + 32 x (attention 41,943,040 + norms 8,192 + router
      // 8 x 4096 + 8 experts x 3 x 4096 x 14336) = 46,702,792,704 (keras-hub's Mixtral preset
      // "params"; the checkpoint's safetensors total_size 93,405,585,408 bytes / 2). Active:
      // 2 of 8 experts, 12,879,925,248 (Mistral AI's "12.9B").
      CHECK(m["params"] == 46'702'792'704);
      CHECK(m["active_params"] == 12'879'925'248);
      CHECK(m["shape"]["moe"]["experts"] == 8);
    }
    if (m["name"] == "qwen3-30b-a3b") {
      ++found;
      // 2 x 151936 x 2048 + 2048 + 48 x (attention 2048 x (4096 + 2 x 512) + 4096 x 2048,
      // q/k norms 2 x 128, norms 4,096, router 128 x 2048, 128 x 3 x 2048 x 768) =
      // 30,532,122,624 (keras-hub's Qwen3-MoE preset); active, 8 experts: 3,353,032,704
      // (Qwen's "3.3B activated").
      CHECK(m["params"] == 30'532'122'624);
      CHECK(m["active_params"] == 3'353'032'704);
    }
    if (m["name"] == "qwen1.5-moe-a2.7b") {
      ++found;
      // Per layer: attention 4 x 2048^2 + q/k/v biases 3 x 2048, norms 4,096, router 60 x
      // 2048, 60 x 3 x 2048 x 1408, shared expert 3 x 2048 x 5632 and its gate 2048; x 24,
      // + 2 x 151936 x 2048 + 2048 = 14,315,784,192 (keras-hub's preset; the model card's
      // "14.3B in total and 2.7B activated").
      CHECK(m["params"] == 14'315'784'192);
      CHECK(m["active_params"] == 2'689'173'504);
    }
    if (m["name"] == "phi-3-mini") {
      ++found;
      // 2 x 32064 x 3072 + 3072 + 32 x (4 x 3072^2 + 3 x 3072 x 8192 + 2 x 3072) =
      // 3,821,079,552 (keras-hub's Phi-3 preset); dense, so active = total.
      CHECK(m["params"] == 3'821'079'552);
      CHECK(m["active_params"] == 3'821'079'552);
      CHECK(m["shape"]["sliding_window"] == 2047);
    }
    if (m["name"] == "qwen3-8b") {
      ++found;
      // 2 x 151936 x 4096 + 4096 + 36 x (41,943,040 + q/k norms 256 + 150,994,944 + 8,192)
      // = 8,190,735,360 (keras-hub's Qwen3 preset; 16,381,470,720 bytes of bf16 weights).
      CHECK(m["params"] == 8'190'735'360);
      CHECK(m["shape"]["qk_norm"] == true);
    }
    if (m["name"] == "llama-3-70b") {
      ++found;
      // 2 x 128256 x 8192 + 8192 + 80 x (attention 8192 x (8192 + 2 x 1024 + 8192) =
      // 150,994,944, MLP 3 x 8192 x 28672 = 704,643,072, norms 16,384) = 70,553,706,496
      // (Hugging Face's count for Meta-Llama-3-70B).
      CHECK(m["params"] == 70'553'706'496);
    }
    if (m["name"] == "gemma-2-9b") {
      ++found;
      // Tied 256000 x 3584 + 3584 + 42 x (44,040,192 + 154,140,672 + four norms 14,336) =
      // 9,241,705,984 (keras-hub's gemma2_9b_en); 21 of 42 layers windowed.
      CHECK(m["params"] == 9'241'705'984);
      CHECK(m["shape"]["mlp"] == "geglu");
      CHECK(m["shape"]["norms_per_layer"] == 4);
      CHECK(m["shape"]["windowed_layers"] == 21);
      CHECK(m["shape"]["final_logit_softcap"] == 30.0);
    }
    if (m["name"] == "gpt-oss-20b") {
      ++found;
      // 2 x 201088 x 2880 + 2880 + 24 x (attention 26,550,144 with biases and 64 sinks, two
      // norms 5,760, router 92,192, 32 experts x 24,891,840) = 20,914,757,184 (the GGUF
      // conversion's general.parameter_count); active, 4 experts: 4,187,440,704, the model
      // card's 3.61B plus the 579,133,440 input embedding it leaves out.
      CHECK(m["params"] == 20'914'757'184);
      CHECK(m["active_params"] == 4'187'440'704);
      CHECK(m["shape"]["attention_sinks"] == true);
    }
    if (m["name"] == "deepseek-v3") {
      ++found;
      // The 671,026,419,200 of the released model (3 dense and 58 sparse blocks of latent
      // attention) and its one multi-token prediction module, 11,610,068,224
      // (tests/model/test_transformer_gemma_gpt_oss.cpp derives both).
      CHECK(m["params"] == 682'636'487'424);
      CHECK(m["shape"]["moe"]["first_dense_layers"] == 3);
      CHECK(m["shape"]["latent_attention"]["kv_lora_rank"] == 512);
      CHECK(m["shape"]["mtp_layers"] == 1);
    }
  }
  CHECK(found == 13);
}

TEST_CASE("gpus lists the catalogue") {
  const auto j = run_json("gpus");
  CHECK(j["gpus"].size() == 23);
  CHECK(j["gpus"][0].contains("memory_bytes"));
  for (const auto& g : j["gpus"]) {
    if (g["name"] != "B200") continue;
    // HGX B200's table, per 8 GPUs: FP16/BF16 36 PF with sparsity, so 2.25 PF dense per GPU;
    // nvidia-smi reports 183359 MiB.
    CHECK(g["peak_flops_bf16"] == 2.25e15);
    CHECK(g["memory_bytes"] == 183359LL * 1048576);
  }
}
