// Tests for the Gemma and gpt-oss readers of model/src/transformer.cpp: exact parameter counts
// against the published ones, and the layer patterns of windowed and full attention.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/transformer.hpp"
#include "hf_config_test.hpp"

using namespace dtplan;
using Catch::Contains;

using test::error_of;
using test::from_config;

namespace {
std::string with(std::string json, const std::string& from, const std::string& to) {
  const auto at = json.find(from);
  REQUIRE(at != std::string::npos);
  return json.replace(at, from.size(), to);
}
std::int64_t tensors_sum(const TransformerSpec& s) {
  std::int64_t sum = 0;
  for (const auto t : layer_parameter_tensors(s))
    sum += t;
  return sum;
}

// google/gemma-2-9b's config.json, the keys that count (the file has no layer_types: Gemma 2
// alternates windowed and global layers, the first windowed).
constexpr const char* kGemma2 =
    R"({"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
        "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
        "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
        "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096,
        "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
        "query_pre_attn_scalar": 256})";

// openai/gpt-oss-20b's config.json, the keys that count.
std::string gpt_oss(int layers, int experts) {
  std::string types;
  for (int i = 0; i < layers; ++i)
    types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  return R"({"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
      "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
      "num_hidden_layers": )" +
         std::to_string(layers) + R"(, "num_local_experts": )" + std::to_string(experts) +
         R"(, "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 201088,
      "max_position_embeddings": 131072, "sliding_window": 128, "attention_bias": true,
      "tie_word_embeddings": false, "router_aux_loss_coef": 0.9, "swiglu_limit": 7.0,
      "quantization_config": {"quant_method": "mxfp4"}, "layer_types": [)" +
         types + "]}";
}
}  // namespace

TEST_CASE("Gemma 2: GeGLU, four norms per block, tied embeddings") {
  const auto s = from_config(kGemma2);
  CHECK(s.mlp == MlpKind::geglu);
  CHECK(s.norms_per_layer == 4);
  CHECK(s.tied_embeddings);
  const auto p = count_parameters(s);
  // Per block: q 3584 x 4096, k and v 3584 x 2048 each, o 4096 x 3584 = 44,040,192; GeGLU
  // 3 x 3584 x 14336 = 154,140,672; four RMSNorms 4 x 3584.
  CHECK(p.per_layer == 44'040'192 + 154'140'672 + 14'336);
  // keras-hub's gemma2_9b_en preset and the Hugging Face safetensors total: 9,241,705,984.
  CHECK(p.total() == 9'241'705'984);
  CHECK(tensors_sum(s) == p.per_layer);
  // 2B (hidden 2304, 26 layers, 8 heads / 4 kv of 256, MLP 9216) and 27B (hidden 4608,
  // 46 layers, 32 heads / 16 kv of 128, MLP 36864): keras-hub 2,614,341,888 and 27,227,128,320.
  const auto two = with(with(with(with(with(with(kGemma2, "3584", "2304"), "14336", "9216"),
                                       "\"num_attention_heads\": 16", "\"num_attention_heads\": 8"),
                                  "\"num_hidden_layers\": 42", "\"num_hidden_layers\": 26"),
                             "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 4"),
                        "max_position_embeddings", "max_position_embeddings");
  CHECK(count_parameters(from_config(two)).total() == 2'614'341'888);
  const auto big =
      with(with(with(with(with(with(kGemma2, "3584", "4608"), "14336", "36864"),
                          "\"num_attention_heads\": 16", "\"num_attention_heads\": 32"),
                     "\"num_hidden_layers\": 42", "\"num_hidden_layers\": 46"),
                "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 16"),
           "\"head_dim\": 256", "\"head_dim\": 128");
  CHECK(count_parameters(from_config(big)).total() == 27'227'128'320);
  // Gemma (1) 7B: two norms per block, 16 heads of 256, MLP 24576: keras-hub 8,537,680,896.
  const auto gemma7b = from_config(
      R"({"model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576,
          "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 16,
          "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
          "hidden_act": "gelu"})");
  CHECK(count_parameters(gemma7b).total() == 8'537'680'896);
}

TEST_CASE("Gemma 2: windowed and global layers alternate, soft-caps are read") {
  const auto s = from_config(kGemma2);
  CHECK(s.sliding_window == 4096);
  CHECK(s.full_attention_every == 2);
  CHECK(s.windowed_layers(42) == 21);
  CHECK(s.windowed_share() == 0.5);
  CHECK(s.attn_logit_softcap == 50.0);
  CHECK(s.final_logit_softcap == 30.0);
  // transformers 4.53 and later write the pattern out as layer_types: the same model.
  std::string types;
  for (int i = 0; i < 42; ++i)
    types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  const auto listed = from_config(with(kGemma2, "\"sliding_window\": 4096",
                                       "\"sliding_window\": 4096, "
                                       "\"layer_types\": [" +
                                           types + "]"));
  CHECK(listed.full_attention_every == 2);
  // A pattern that is not full attention every N layers is refused, as is a wrong length.
  const auto broken = with(types, "\"sliding_attention\", \"full_attention\", \"sliding",
                           "\"full_attention\", \"full_attention\", \"sliding");
  CHECK_THAT(error_of(with(kGemma2, "\"sliding_window\": 4096",
                           "\"sliding_window\": 4096, \"layer_types\": [" + broken + "]")),
             Contains("/layer_types: layer index 2 breaks the pattern of full attention every 1"));
  CHECK_THAT(error_of(with(kGemma2, "\"sliding_window\": 4096",
                           "\"sliding_window\": 4096, \"layer_types\": [\"full_attention\"]")),
             Contains("/layer_types: lists 1 layers, num_hidden_layers is 42"));
  CHECK_THAT(error_of(with(kGemma2, "\"sliding_window\": 4096",
                           "\"sliding_window\": 4096, \"layer_types\": [" +
                               with(types, "\"full_attention\"", "\"chunked_attention\"") + "]")),
             Contains("'chunked_attention' is not modelled"));
  CHECK_THAT(error_of(with(kGemma2, "gelu_pytorch_tanh", "silu")),
             Contains("/hidden_activation: 'silu' is not modelled for Gemma"));
}

TEST_CASE("Gemma 3: q/k norms, five windowed layers to one global, the image model refused") {
  // google/gemma-3-1b-pt: hidden 1152, 26 layers, 4 heads / 1 kv of 256, MLP 6912, vocabulary
  // 262,144, a 512-token window with sliding_window_pattern 6.
  const std::string g3 =
      R"({"model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912,
          "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
          "head_dim": 256, "vocab_size": 262144, "max_position_embeddings": 32768,
          "sliding_window": 512, "sliding_window_pattern": 6,
          "attn_logit_softcapping": null, "final_logit_softcapping": null})";
  const auto s = from_config(g3);
  CHECK(s.qk_norm);
  CHECK(s.attn_logit_softcap == 0);
  // Per block: q and o 1152 x 1024 each, k and v 1152 x 256 each = 2,949,120; GeGLU
  // 3 x 1152 x 6912 = 23,887,872; four norms 4 x 1152 and the q/k norms 2 x 256.
  CHECK(count_parameters(s).per_layer == 2'949'120 + 23'887'872 + 4'608 + 512);
  CHECK(count_parameters(s).total() == 999'885'952);  // keras-hub's gemma3_1b preset
  // Global layers 6, 12, 18, 24 (1-based): 22 of 26 windowed.
  CHECK(s.windowed_layers(26) == 22);
  CHECK_THAT(error_of(with(g3, "\"gemma3_text\"", "\"gemma3\"")),
             Contains("/model_type: 'gemma3' is Gemma 3's image-and-text model") &&
                 Contains("text_config"));
  CHECK_THAT(error_of(with(g3, "\"sliding_window_pattern\": 6", "\"sliding_window_pattern\": 0")),
             Contains("/sliding_window_pattern: must be a positive number of layers"));
  // A model shorter than the period has no full-attention layer: every layer is windowed.
  const auto short_model =
      from_config(with(g3, "\"num_hidden_layers\": 26", "\"num_hidden_layers\": 4"));
  CHECK(short_model.windowed_layers(4) == 4);
}

TEST_CASE("gpt-oss: experts with biases, a router bias, a sink per head") {
  const auto s = from_config(gpt_oss(24, 32));
  CHECK(s.attention_sinks);
  CHECK(s.moe.router_bias);
  CHECK(s.full_attention_every == 2);
  const auto p = count_parameters(s);
  // Attention: q and o 2880 x 4096, k and v 2880 x 512, biases 4096 + 2 x 512 + 2880, 64
  // sinks = 26,550,144. One expert: 3 x 2880 x 2880 + biases 2 x 2880 + 2880 = 24,891,840;
  // router 2880 x 32 + 32.
  CHECK(p.attention == 24 * 26'550'144LL);
  CHECK(p.mlp == 24 * (32 * 24'891'840LL + 92'192));
  // The GGUF conversion's general.parameter_count, and the model card's 20.91B.
  CHECK(p.total() == 20'914'757'184);
  // The model card's 3.61B active leaves out the input embedding (a lookup, 201088 x 2880).
  CHECK(p.active - 579'133'440 == 3'608'307'264);
  CHECK(tensors_sum(s) == p.per_layer);
  // 2 norms, q, k, v, o, sinks, the router, one module of every expert's 4 tensors.
  CHECK(layer_submodules(s).size() == 2 + 4 + 1 + 1 + 1);
  // gpt-oss-120b: 36 layers of 128 experts; the card's 116.83B total.
  CHECK(count_parameters(from_config(gpt_oss(36, 128))).total() == 116'829'156'672);
}

TEST_CASE("gpt-oss: the MXFP4 release is read, other quantizations and mismatches refused") {
  const auto json = gpt_oss(24, 32);
  CHECK_THAT(error_of(with(json, "\"mxfp4\"", "\"bitsandbytes\"")),
             Contains("/quantization_config: quantized checkpoints are not supported"));
  CHECK_THAT(error_of(with(json, "\"experts_per_token\": 4", "\"experts_per_token\": 2")),
             Contains("/experts_per_token: differs from num_experts_per_tok 4"));
  // MXFP4 is gpt-oss's release format only; a Llama config with it stays refused.
  CHECK_THAT(error_of(R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
                          "intermediate_size": 11008, "num_hidden_layers": 32,
                          "num_attention_heads": 32, "max_position_embeddings": 4096,
                          "quantization_config": {"quant_method": "mxfp4"}})"),
             Contains("/quantization_config"));
}

namespace {
// deepseek-ai/DeepSeek-V3's config.json, the keys that count (its quantization_config states
// the release's block-scaled FP8 weights).
constexpr const char* kDeepseekV3 =
    R"({"model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168,
        "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
        "num_nextn_predict_layers": 1, "num_attention_heads": 128, "num_key_value_heads": 128,
        "n_shared_experts": 1, "n_routed_experts": 256, "kv_lora_rank": 512,
        "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "qk_nope_head_dim": 128, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
        "num_experts_per_tok": 8, "moe_layer_freq": 1, "first_k_dense_replace": 3,
        "norm_topk_prob": true, "max_position_embeddings": 163840,
        "tie_word_embeddings": false, "attention_bias": false,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})";
}  // namespace

TEST_CASE("DeepSeek-V3: latent attention, dense first layers, shared expert, MTP module") {
  const auto s = from_config(kDeepseekV3);
  CHECK(s.mla.active());
  CHECK(s.head_dim == 192);
  CHECK(s.v_dim() == 128);
  CHECK(s.moe.first_dense_layers == 3);
  CHECK(s.moe.shared_ffn_size == 2048);
  CHECK(s.moe.router_bias);  // e_score_correction_bias
  CHECK(s.moe.groups == 8);
  CHECK(s.moe.groups_per_token == 4);
  const auto p = count_parameters(s);
  // Attention: q_a 7168 x 1536, its norm 1536, q_b 1536 x 128 x 192; kv_a 7168 x (512 + 64),
  // its norm 512, kv_b 512 x 128 x (128 + 128); o 128 x 128 x 7168: 187,107,328 per layer.
  CHECK(p.attention == 61 * 187'107'328LL);
  // A dense block: MLP 3 x 7168 x 18432; a sparse one: router 256 x 7168 and its 256 biases,
  // 256 experts and one shared of 3 x 7168 x 2048 each.
  CHECK(p.mlp == 3 * 396'361'728LL + 58 * (1'835'008LL + 256 + 257 * 44'040'192LL));
  // The model as released, the multi-token prediction module aside: 671,026,419,200, the
  // checkpoint's main-model count (DeepSeek's "671B total").
  CHECK(p.total() - p.mtp == 671'026'419'200);
  // MTP: a sparse block (11,507,286,272), eh_proj 2 x 7168 x 7168, enorm, hnorm and the output
  // norm; the embedding and head are shared (the checkpoint stores copies for layer 61).
  CHECK(p.mtp == 11'507'286'272LL + 102'760'448 + 3 * 7168);
  // Active per token: 8 of the 256 experts (the dense layers, the shared expert, the router
  // and the rest whole): 37,552,297,472 in the model, DeepSeek's "37B activated".
  const std::int64_t idle = 248 * 44'040'192LL;
  CHECK(p.active - (p.mtp - idle) == 37'552'297'472);
  // Blocks by kind: 3 dense, then 58 sparse; the modules of each sum to its count.
  const auto runs = block_runs(s);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].layers == 3);
  CHECK_FALSE(runs[0].block.moe.active());
  CHECK(runs[1].layers == 58);
  CHECK(blocks_params(s) == p.attention + p.mlp + p.norms - 7168);
  for (const auto& run : runs) {
    std::int64_t sum = 0;
    for (const auto t : layer_parameter_tensors(run.block))
      sum += t;
    CHECK(sum == count_parameters(run.block).per_layer);
  }
  // Kimi K2's config names its own model_type over DeepSeek-V3's architecture.
  CHECK(
      count_parameters(from_config(with(kDeepseekV3, "\"deepseek_v3\"", "\"kimi_k2\""))).total() ==
      p.total());
  // A stage from layer 2 on: one dense block, then sparse ones.
  const auto stage = block_runs(s, 2, 4);
  REQUIRE(stage.size() == 2);
  CHECK(stage[0].layers == 1);
  CHECK(stage[1].layers == 3);
}

TEST_CASE("DeepSeek-V2-Lite: no query bottleneck, two shared experts, no router bias") {
  // deepseek-ai/DeepSeek-V2-Lite: hidden 2048, 27 layers (the first dense, MLP 10944), 16
  // heads, q_lora_rank null, 64 experts of 1408 (6 per token) and 2 shared, vocabulary 102400:
  // 15,706,484,224, the count its model page and serving logs give.
  const auto s = from_config(
      R"({"model_type": "deepseek_v2", "vocab_size": 102400, "hidden_size": 2048,
          "intermediate_size": 10944, "moe_intermediate_size": 1408, "num_hidden_layers": 27,
          "num_attention_heads": 16, "num_key_value_heads": 16, "n_shared_experts": 2,
          "n_routed_experts": 64, "kv_lora_rank": 512, "q_lora_rank": null,
          "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
          "topk_method": "greedy", "num_experts_per_tok": 6, "first_k_dense_replace": 1,
          "max_position_embeddings": 163840})");
  CHECK_FALSE(s.moe.router_bias);
  CHECK(s.mla.q_lora_rank == 0);
  CHECK(count_parameters(s).total() == 15'706'484'224);
}

TEST_CASE("DeepSeek configs that cannot be counted faithfully are refused") {
  CHECK_THAT(error_of(with(kDeepseekV3, "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2")),
             Contains("/moe_layer_freq: dense layers between sparse ones"));
  CHECK_THAT(
      error_of(with(kDeepseekV3, "\"first_k_dense_replace\": 3", "\"first_k_dense_replace\": 62")),
      Contains("/first_k_dense_replace: must be between 0 and the 61 layers"));
  CHECK_THAT(error_of(with(kDeepseekV3, "\"n_group\": 8", "\"n_group\": 7")),
             Contains("/n_group: must divide the 256 routed experts"));
  CHECK_THAT(error_of(with(kDeepseekV3, "\"quant_method\": \"fp8\"", "\"quant_method\": \"awq\"")),
             Contains("/quantization_config"));
  // Latent-attention keys under a dense model_type are refused, never skipped.
  const auto unquantized =
      with(kDeepseekV3, "{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}", "null");
  CHECK_THAT(error_of(with(unquantized, "\"deepseek_v3\"", "\"llama\"")),
             Contains("/n_routed_experts: changes the parameter count"));
}
