// Tests for model/src/transformer.cpp: exact parameter counts by component, derived by hand
// from the per-block formulas, and Hugging Face config.json reading.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/transformer.hpp"
#include "hf_config_test.hpp"

using namespace dtplan;
using Catch::Contains;

using test::error_of;
using test::from_config;

TEST_CASE("GPT-2 small by component") {
  const auto s = from_config(
      R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
          "n_layer": 12, "n_head": 12})");
  const auto p = count_parameters(s);
  // wte 50257*768 + wpe 1024*768
  CHECK(p.embeddings == 38'597'376 + 786'432);
  // c_attn 768*2304 + 2304, c_proj 768*768 + 768 = 2,362,368 per block
  CHECK(p.attention == 12 * 2'362'368);
  // c_fc 768*3072 + 3072, c_proj 3072*768 + 768 = 4,722,432 per block
  CHECK(p.mlp == 12 * 4'722'432);
  // ln_1, ln_2 (weight + bias) per block, and ln_f
  CHECK(p.norms == 12 * 4 * 768 + 2 * 768);
  CHECK(p.head == 0);  // tied to wte
  CHECK(p.per_layer == 2'362'368 + 4'722'432 + 4 * 768);
  CHECK(p.total() == 124'439'808);  // the figure in issue #2 and transformers' num_parameters()
}

TEST_CASE("Llama 2 7B by component") {
  const auto s = from_config(
      R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
          "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 32, "max_position_embeddings": 4096})");
  CHECK(s.mlp == MlpKind::swiglu);
  CHECK(s.norm == NormKind::rmsnorm);
  CHECK(s.positions == PositionKind::rotary);
  CHECK_FALSE(s.tied_embeddings);
  const auto p = count_parameters(s);
  CHECK(p.embeddings == 32000LL * 4096);
  CHECK(p.attention == 32LL * 4 * 4096 * 4096);  // q, k, v, o without biases
  CHECK(p.mlp == 32LL * 3 * 4096 * 11008);       // gate, up, down
  CHECK(p.norms == 32LL * 2 * 4096 + 4096);      // two RMSNorms per block + final
  CHECK(p.head == 32000LL * 4096);               // untied lm_head
  CHECK(p.total() == 6'738'415'616);             // issue #2; HF model card 6.74B
}

TEST_CASE("grouped-query attention shrinks k and v") {
  // Llama 2 70B: 64 heads of 128, 8 KV heads -> k, v are 8192 x 1024.
  const auto s = from_config(
      R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 8192,
          "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
          "num_key_value_heads": 8, "max_position_embeddings": 4096})");
  CHECK(s.kv_size() == 1024);
  const auto p = count_parameters(s);
  CHECK(p.attention == 80LL * (2 * 8192LL * 8192 + 2 * 8192LL * 1024));
}

TEST_CASE("GPT-NeoX (Pythia-160M): untied head, rotary, biases") {
  const auto s = from_config(
      R"({"model_type": "gpt_neox", "vocab_size": 50304, "hidden_size": 768,
          "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
          "max_position_embeddings": 2048, "rotary_pct": 0.25, "tie_word_embeddings": false})");
  const auto p = count_parameters(s);
  CHECK(p.embeddings == 50304LL * 768);  // embed_in only: rotary has no parameters
  CHECK(p.head == 50304LL * 768);        // embed_out
  // Pythia model card / paper table: 162,322,944 total parameters for Pythia-160M.
  CHECK(p.total() == 162'322'944);
}

TEST_CASE("Qwen2 has q/k/v biases but no output bias") {
  const auto s = from_config(
      R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
          "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
          "num_key_value_heads": 2, "max_position_embeddings": 131072,
          "tie_word_embeddings": true})");
  const auto p = count_parameters(s);
  // q 896*896+896, k and v 896*128+128 each, o 896*896
  CHECK(p.attention == 24LL * (896 * 896 + 896 + 2 * (896 * 128 + 128) + 896 * 896));
  CHECK(p.head == 0);
  CHECK(p.total() == 494'032'768);  // Qwen2-0.5B, HF safetensors metadata: 494,032,768
}

TEST_CASE("BERT: token types, embedding LayerNorm, pooler, no LM head") {
  const auto s = from_config(
      R"({"model_type": "bert", "vocab_size": 30522, "hidden_size": 1024,
          "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
          "max_position_embeddings": 512, "type_vocab_size": 2})");
  const auto p = count_parameters(s);
  CHECK(p.embeddings == (30522LL + 512 + 2) * 1024);
  CHECK(p.head == 1024LL * 1024 + 1024);  // pooler dense
  CHECK(p.norms == 24LL * 2 * 2048 + 2048);
  CHECK(p.total() == 335'141'888);  // BertModel.from_pretrained("bert-large-uncased")
}

TEST_CASE("the architecture sets the head") {
  // bert-large-uncased's own config names BertForMaskedLM: no pooler (-1,049,600), a transform
  // dense 1024x1024+1024, its LayerNorm 2,048 and a decoder bias of 30,522 (the decoder weight
  // is tied): 335,174,458, transformers' num_parameters() for that checkpoint.
  const auto mlm = from_config(
      R"({"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 30522,
          "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
          "intermediate_size": 4096, "max_position_embeddings": 512, "type_vocab_size": 2})");
  CHECK(count_parameters(mlm).total() == 335'174'458);
  // A Llama 2 7B classifier: no lm_head, a 4096 x 3 score layer without bias.
  const auto cls = from_config(
      R"({"model_type": "llama", "architectures": ["LlamaForSequenceClassification"],
          "num_labels": 3, "vocab_size": 32000, "hidden_size": 4096,
          "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
          "max_position_embeddings": 4096})");
  CHECK(count_parameters(cls).total() == 6'738'415'616 - 131'072'000 + 4096 * 3);
  const auto base = from_config(
      R"({"model_type": "llama", "architectures": ["LlamaModel"], "vocab_size": 32000,
          "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
          "num_attention_heads": 32, "max_position_embeddings": 4096})");
  CHECK(count_parameters(base).total() == 6'738'415'616 - 131'072'000);
}

TEST_CASE("config.json errors name the key") {
  CHECK_THAT(error_of(R"({"model_type": "t5", "d_model": 512})"),
             Contains("/model_type") && Contains("'t5' is not supported") &&
                 Contains("gpt2, gpt_neox, llama"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000})"),
             Contains("config.json") && Contains("/hidden_size: missing required key"));
  CHECK_THAT(error_of(R"({"model_type": "gpt2", "vocab_size": "50257", "n_embd": 768,
                          "n_layer": 12, "n_head": 12, "n_positions": 1024})"),
             Contains("/vocab_size: expected an integer, got a string"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
                          "intermediate_size": 0, "num_hidden_layers": 32,
                          "num_attention_heads": 32, "max_position_embeddings": 4096})"),
             Contains("/intermediate_size: must be a positive integer, got 0"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
                          "intermediate_size": 11008, "num_hidden_layers": 32,
                          "num_attention_heads": 32, "num_key_value_heads": 5,
                          "max_position_embeddings": 4096})"),
             Contains("num_key_value_heads 5 does not divide num_attention_heads 32"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "quantization_config": {"bits": 4}})"),
             Contains("/quantization_config: quantized checkpoints are not supported"));
  // An unsupported model_type is the first thing said, before its other keys.
  CHECK_THAT(error_of(R"({"model_type": "kimi_k3", "quantization_config": {"fmt": "e4m3"}})"),
             Contains("/model_type: model_type 'kimi_k3' is not supported"));
  // DeepSeek-V3's release states its FP8 weight format (quant_method fp8), which is read; any
  // other quantization of it is refused.
  CHECK_THAT(error_of(R"({"model_type": "deepseek_v3", "quantization_config": {"fmt": "e4m3"}})"),
             Contains("/quantization_config: quantized checkpoints are not supported"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
                          "intermediate_size": null, "num_hidden_layers": 32,
                          "num_attention_heads": 32, "max_position_embeddings": 4096})"),
             Contains("/intermediate_size: required, got null"));
  CHECK_THAT(error_of(R"({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768,
                          "n_layer": 12, "n_head": 12, "n_positions": 1024,
                          "add_cross_attention": true})"),
             Contains("/add_cross_attention: cross-attention"));
  // GPT2MLP's activation: "gelu_new" (the default) is NewGELUActivation, eight tensor ops;
  // "gelu" one kernel; an activation that is not a GELU would be priced wrongly, so it is refused.
  const std::string gpt2 = R"({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768,
                               "n_layer": 12, "n_head": 12, "n_positions": 1024)";
  CHECK(test::from_config(gpt2 + "}").gelu_as_tensor_ops);
  CHECK_FALSE(test::from_config(gpt2 + R"(, "activation_function": "gelu"})").gelu_as_tensor_ops);
  CHECK_THAT(error_of(gpt2 + R"(, "activation_function": "relu"})"),
             Contains("/activation_function: 'relu' is not modelled for GPT-2"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "architectures": ["LlamaForTokenClassification"],
                          "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
                          "num_hidden_layers": 32, "num_attention_heads": 32,
                          "max_position_embeddings": 4096})"),
             Contains("'LlamaForTokenClassification' is not supported"));
}

// Found by fuzzing (tests/fuzz/regressions/hf_config): sizes whose products overflow 64 bits
// were undefined behaviour (signed overflow) instead of an error.
TEST_CASE("sizes that overflow a 64-bit count are refused, not wrapped") {
  CHECK_THAT(error_of(R"({"model_type": "gpt2", "n_embd": 9223372036854775807, "n_layer": 2,
                          "n_head": 1, "vocab_size": 100, "n_positions": 1024})"),
             Contains("/n_embd: 4 x n_embd") && Contains("overflows a 64-bit count"));
  // h = 2^31, one head: h*q = 2^62 fits, the k and v projections' 2*h*k = 2^63 does not. A
  // config.json this large is refused when read (next test); a spec built in code is counted
  // with overflow checks.
  auto spec = from_config(R"({"model_type": "llama", "vocab_size": 32000,
      "hidden_size": 4096, "intermediate_size": 1, "num_hidden_layers": 1,
      "num_attention_heads": 1, "max_position_embeddings": 4096})");
  spec.hidden_size = spec.head_dim = std::int64_t{1} << 31;
  CHECK_THROWS_WITH(count_parameters(spec), Contains("parameter count") && Contains("overflows"));
}

// Issue 14, item 8: absurd sizes are refused when read, naming the field, before any count.
TEST_CASE("config.json sizes beyond a sane maximum are refused when read") {
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000,
      "hidden_size": 2147483648, "intermediate_size": 1, "num_hidden_layers": 1,
      "num_attention_heads": 1, "max_position_embeddings": 4096})"),
             Contains("config.json") &&
                 Contains("hidden_size 2147483648 is beyond the sane maximum 16777216"));
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
      "intermediate_size": 11008, "num_hidden_layers": 4611686018427387904,
      "num_attention_heads": 32, "max_position_embeddings": 4096})"),
             Contains("num_layers 4611686018427387904 is beyond the sane maximum 65536"));
  // Llama 3.1 405B's shapes are well inside the limits.
  CHECK_NOTHROW(from_config(R"({"model_type": "llama", "vocab_size": 128256,
      "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
      "num_attention_heads": 128, "num_key_value_heads": 8,
      "max_position_embeddings": 131072})"));
}

namespace {
// Mixtral 8x7B's config.json (Hugging Face, mistralai/Mixtral-8x7B-v0.1), the keys that count.
constexpr const char* kMixtral =
    R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
        "max_position_embeddings": 32768, "sliding_window": null,
        "tie_word_embeddings": false})";

std::string with(std::string json, const std::string& from, const std::string& to) {
  const auto at = json.find(from);
  REQUIRE(at != std::string::npos);
  return json.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("Mixtral: every expert counts, two per token are active") {
  const auto s = from_config(kMixtral);
  REQUIRE(s.moe.active());
  const auto p = count_parameters(s);
  // One expert: 3 x 4096 x 14336 = 176,160,768; router 4096 x 8.
  CHECK(p.mlp == 32LL * (8 * 176'160'768LL + 4096 * 8));
  CHECK(p.total() == 46'702'792'704);  // keras-hub's Mixtral preset; 93,405,585,408 B of bf16
  CHECK(p.active == p.total() - 32LL * 6 * 176'160'768LL);
  // Mixtral 8x22B (hidden 6144, 56 layers, 48 heads, experts of 16384, vocabulary 32000):
  // 140,620,634,112, the checkpoint's 281,241,268,224 bytes of bf16 weights / 2.
  const auto big = from_config(
      R"({"model_type": "mixtral", "hidden_size": 6144, "intermediate_size": 16384,
          "num_attention_heads": 48, "num_hidden_layers": 56, "num_key_value_heads": 8,
          "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
          "max_position_embeddings": 65536})");
  CHECK(count_parameters(big).total() == 140'620'634'112);
}

TEST_CASE("a block's modules hold its parameters, experts and fused projections included") {
  for (const std::string& json :
       {std::string(kMixtral),
        std::string(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
          "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 151936,
          "max_position_embeddings": 8192, "num_experts": 60, "num_experts_per_tok": 4,
          "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632})"),
        std::string(R"({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
          "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 32064,
          "max_position_embeddings": 4096, "sliding_window": 2047})")}) {
    const auto s = from_config(json);
    std::int64_t sum = 0;
    for (const auto t : layer_parameter_tensors(s))
      sum += t;
    CHECK(sum == count_parameters(s).per_layer);
  }
  // Mixtral: 2 norms, q, k, v, o, the router, 8 experts x 3 projections.
  CHECK(layer_submodules(from_config(kMixtral)).size() == 2 + 4 + 1 + 24);
}

TEST_CASE("Qwen3: a norm on every query and key head, a tied embedding counted once") {
  // Qwen3-0.6B: hidden 1024, 28 layers, 16 heads of 128 (q is 2048 wide), 8 key/value heads,
  // MLP 3072, tied 151936 x 1024 embedding. Per layer: attention 1024 x (2048 + 2 x 1024) +
  // 2048 x 1024 = 6,291,456, q/k norms 2 x 128, MLP 3 x 1024 x 3072 = 9,437,184, norms 2,048.
  const auto s = from_config(
      R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
          "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
          "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
          "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": null})");
  CHECK(s.qk_norm);
  CHECK(count_parameters(s).per_layer == 6'291'456 + 256 + 9'437'184 + 2'048);
  // keras-hub's Qwen3-0.6B preset: 596,049,920 (the checkpoint stores the tied matrix twice).
  CHECK(count_parameters(s).total() == 596'049'920);
}

TEST_CASE("keys that change the count are read or refused, never skipped") {
  // Mixtral relabelled as Mistral would be counted as a 7.2B dense model.
  CHECK_THAT(error_of(with(kMixtral, "\"mixtral\"", "\"mistral\"")),
             Contains("/num_local_experts: changes the parameter count") &&
                 Contains("model_type 'mistral'"));
  CHECK_THAT(error_of(with(kMixtral, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9")),
             Contains("/num_experts_per_tok: must be an integer from 1 to 8, got 9"));
  const std::string qwen_moe =
      R"({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
          "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 4,
          "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
          "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
          "decoder_sparse_step": 1, "mlp_only_layers": []})";
  CHECK(count_parameters(from_config(qwen_moe)).total() == 30'532'122'624);  // keras-hub
  CHECK_THAT(error_of(with(qwen_moe, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2")),
             Contains("/decoder_sparse_step: dense layers between sparse ones"));
  CHECK_THAT(error_of(with(qwen_moe, "\"mlp_only_layers\": []", "\"mlp_only_layers\": [0]")),
             Contains("/mlp_only_layers"));
  CHECK_THAT(error_of(with(qwen_moe, "\"num_experts\": 128",
                           "\"use_sliding_window\": true, "
                           "\"num_experts\": 128")),
             Contains("/use_sliding_window: sliding-window attention on some layers"));
  CHECK_THAT(error_of(with(qwen_moe, "\"qwen3_moe\"", "\"qwen3\"")),
             Contains("/num_experts: changes the parameter count"));
  CHECK_THAT(error_of(R"({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
                          "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 32064,
                          "max_position_embeddings": 4096, "sliding_window": -1})"),
             Contains("/sliding_window: must be a positive number of tokens"));
}

TEST_CASE("dropout probabilities as the config gives them, GPT-2's defaults 0.1") {
  const std::string gpt2 = R"({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768,
                               "n_layer": 12, "n_head": 12, "n_positions": 1024)";
  // transformers' GPT2Config: attn_pdrop, resid_pdrop and embd_pdrop default to 0.1.
  const auto defaults = from_config(gpt2 + "}");
  CHECK(defaults.attention_dropout == 0.1);
  CHECK(defaults.hidden_dropout == 0.1);
  CHECK(defaults.embedding_dropout == 0.1);
  const auto set = from_config(gpt2 + R"(, "attn_pdrop": 0.0, "resid_pdrop": 0.25})");
  CHECK(set.attention_dropout == 0.0);
  CHECK(set.hidden_dropout == 0.25);
  CHECK_THAT(error_of(gpt2 + R"(, "resid_pdrop": 1.0})"),
             Contains("/resid_pdrop") && Contains("0.99"));
  CHECK_THAT(error_of(gpt2 + R"(, "embd_pdrop": -0.1})"), Contains("/embd_pdrop"));
  // Llama trains without dropout unless attention_dropout says otherwise.
  const std::string llama = R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
      "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
      "max_position_embeddings": 4096)";
  CHECK(from_config(llama + "}").attention_dropout == 0.0);
  CHECK(from_config(llama + R"(, "attention_dropout": 0.05})").attention_dropout == 0.05);
}
