// The dense stack dtplan-run executes: parameter counts and shapes derived by hand.
#include <catch2/catch.hpp>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/model_desc.hpp"

using namespace dtplan;

TEST_CASE("dense stack of GPT-2 at scale 1 has GPT-2's parameters, norms and positions") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  // GPT-2 small has 124,439,808 parameters (Hugging Face gpt2, sum of p.numel()).
  CHECK(cost::params_of(s) == 124439808);
  // Per block: 2 LayerNorms 2 x 1536, QKV 768 x 2304 + 2304, out 768 x 768 + 768, MLP
  // 2 x 768 x 3072 + 3072 + 768; the embedding unit: tokens 50257 x 768, positions 1024 x 768
  // and the final LayerNorm 1536 (tied head).
  CHECK(cost::units_of(s).at(1).params == 3072 + 1771776 + 590592 + 2362368 + 2360064);
  CHECK(cost::units_of(s).at(0).params == 38597376 + 786432 + 1536);
  // 6 x matrix elements per token (12 blocks x 7,077,888 weights, head 38,597,376) plus the
  // attention products: 12 layers x 6 GEMMs x 2 x 1024 x 64 x 12 heads per token.
  CHECK(cost::flops_per_token(s) ==
        Approx(6.0 * (12 * 7077888.0 + 38597376.0) + 12 * 6 * 2.0 * 1024 * 64 * 12));
}

TEST_CASE("dense stack of Llama 3.2 1B at scale 1 has its 1,235,814,400 parameters") {
  const auto m = load_model("llama-3.2-1b", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 1.0, 2048);
  // PyTorch's count of meta-llama/Llama-3.2-1B (data/measurements/h100-torch): 16 blocks of
  // 2 RMSNorms 2 x 2048, QKV 2048 x 3072, out 2048 x 2048, MLP 3 x 2048 x 8192, no biases;
  // tokens 128256 x 2048 tied, the final RMSNorm 2048, rotary positions (no table).
  CHECK(cost::params_of(s) == 1235814400);
  CHECK(s.positions == cost::StackPositions::rotary);
  CHECK(s.rope_theta == 500000.0);
  CHECK(s.norm == cost::StackNorm::rmsnorm);
  CHECK(cost::units_of(s).at(1).params == 4096 + 6291456 + 4194304 + 50331648);
}

TEST_CASE("stored and scratch elements of the causal workload, by hand") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  // Per block and token: input 768, norm 768 + 2, QKV 2304, probabilities 12 x 1024, output
  // 768, residual 768, norm 768 + 2, MLP 2 x 3072; then x(L) 768, final norm 770, logits 50257.
  const std::int64_t block = 768 + 770 + 2304 + 12288 + 768 + 768 + 770 + 6144;
  CHECK(cost::stored_elements_per_token(s) == 12 * block + 768 + 770 + 50257);
  // Backward temporaries per token: dQKV 2304, three of 768, MLP 2 x 3072, attention output
  // 768, and (GPT-2's resid_pdrop 0.1) a projection's gradient through its dropout mask 768;
  // the attention workspace, one 1024 x 1024 square.
  CHECK(cost::scratch_elements(s, 2048) ==
        2048 * (2304 + 3 * 768 + 6144 + 768 + 768) + 1024 * 1024);
}

TEST_CASE("a tensor-parallel share, by hand, and the dimensions it must divide") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto whole = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  const auto s = cost::tensor_parallel_share(whole, 4);
  // 12 heads, 3,072 MLP columns and 50,257 tokens (padded to 50,260) over 4 ranks.
  CHECK(s.heads == 3);
  CHECK(s.kv_heads == 3);
  CHECK(s.ffn == 768);
  CHECK(s.vocab == 12565);
  CHECK(s.hidden == 768);
  CHECK(cost::whole_of(s).vocab == 50260);
  CHECK(cost::whole_of(s).heads == 12);
  // A block on one rank: norms 2 x 1,536, QKV 576 x 768 + 576, output 768 x 192 + 768 (whole
  // bias), MLP 768 x 768 + 768 and 768 x 768 + 768 (whole bias).
  const std::int64_t block = 2 * 1536 + 576 * 769 + 768 * 192 + 768 + 768 * 769 + 768 * 769;
  CHECK(cost::units_of(s)[1].params == block);
  // Scratch of 2,048 tokens: dQKV 576, three of 768, MLP 2 x 768, attention output 192, the
  // hidden-sized temporary 768 (GPT-2's hidden dropout needs it anyway), the 1024 x 1024
  // attention square, and the vocab-parallel loss's 3 per token.
  CHECK(cost::scratch_elements(s, 2048) ==
        2048 * (576 + 3 * 768 + 2 * 768 + 192 + 768) + 1024 * 1024 + 3 * 2048);
  CHECK_THROWS_WITH(cost::tensor_parallel_share(whole, 5), Catch::Contains("heads 12"));
  auto odd_mlp = whole;
  odd_mlp.ffn = 3070;
  CHECK_THROWS_WITH(cost::tensor_parallel_share(odd_mlp, 4), Catch::Contains("ffn 3070"));
  CHECK_THROWS_WITH(cost::tensor_parallel_share(s, 2), Catch::Contains("already a share"));
  // The share travels with its JSON (measurements record it).
  const auto j = cost::to_json(s);
  CHECK(cost::dense_stack_from_json(ObjectReader::root(parse_json(j.dump(), "share.json"))).tp ==
        4);
}

TEST_CASE("pipeline stages, by hand: who holds the embedding, the head and the tied copy") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto whole = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  const std::int64_t table = 50257 * 768, positions = 1024 * 768, norm = 2 * 768;
  const std::int64_t block = cost::units_of(whole)[1].params;
  // The whole tied model: one embedding unit with the final norm, 12 blocks.
  REQUIRE(cost::units_of(whole).size() == 13u);
  const auto first = cost::pipeline_stage(whole, 4, 0);
  const auto middle = cost::pipeline_stage(whole, 4, 1);
  const auto last = cost::pipeline_stage(whole, 4, 3);
  CHECK(first.layers == 3);
  CHECK(last.first_layer == 9);
  // Stage 0: the embedding (matrix and positions; the final norm is the head's) and 3 blocks.
  CHECK(cost::units_of(first).size() == 4u);
  CHECK(cost::units_of(first)[0].params == table + positions);
  CHECK(cost::params_of(middle) == 3 * block);
  // The last stage: 3 blocks and its copy of the tied matrix with the final norm.
  CHECK(cost::units_of(last).back().params == table + norm);
  CHECK(cost::unit_kind(last, 3) == cost::UnitKind::head);
  CHECK(cost::unit_kind(middle, 0) == cost::UnitKind::block);
  CHECK(cost::unit_kind(first, 0) == cost::UnitKind::embedding);
  // Activations per token: a middle stage keeps its blocks and its output, no logits.
  auto one = cost::pipeline_stage(whole, 12, 5);
  one.attention_dropout = one.hidden_dropout = one.embedding_dropout = 0;
  const std::int64_t per_block = 768 + 770 + 2304 + 12288 + 768 + 768 + 770 + 6144;
  CHECK(cost::stored_elements_per_token(one) == per_block + 768);
  CHECK(cost::pipeline_whole_of(last).layers == 12);
  CHECK_THROWS_WITH(cost::pipeline_stage(whole, 5, 0), Catch::Contains("layers 12"));
  CHECK_THROWS_WITH(cost::pipeline_stage(whole, 4, 4), Catch::Contains("stage 4 of 4"));
  const auto j = cost::to_json(last);
  const auto back = cost::dense_stack_from_json(ObjectReader::root(parse_json(j.dump(), "s.json")));
  CHECK(back.stage == 3);
  CHECK(back.first_layer == 9);
  CHECK(cost::params_of(back) == cost::params_of(last));
}

TEST_CASE("dropout masks kept for backward, by hand, with and without recomputation") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  auto s = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  // GPT-2's config: attn_pdrop, resid_pdrop, embd_pdrop all 0.1.
  CHECK(s.attention_dropout == 0.1);
  CHECK(s.hidden_dropout == 0.1);
  CHECK(s.embedding_dropout == 0.1);
  // One byte an element, per token: per block the probabilities' 12 heads x 1024 and the two
  // projections' 2 x 768; the embeddings' 768.
  CHECK(cost::mask_bytes_per_token(s) == 12 * (12288 + 1536) + 768);
  s.recompute = Checkpointing::selective;  // one block's probability mask
  CHECK(cost::mask_bytes_per_token(s) == 12 * 1536 + 12288 + 768);
  s.recompute = Checkpointing::full;  // one block's masks
  CHECK(cost::mask_bytes_per_token(s) == 12288 + 1536 + 768);
  s.attention_dropout = s.hidden_dropout = s.embedding_dropout = 0;
  CHECK(cost::mask_bytes_per_token(s) == 0);
  // Llama 3.2 1B trains without dropout (attention_dropout 0.0).
  const auto llama = load_model("llama-3.2-1b", std::string(DTPLAN_DATA_DIR) + "/models");
  CHECK(cost::mask_bytes_per_token(cost::dense_stack_of(*llama.transformer, 1.0, 2048)) == 0);
}

TEST_CASE("dropout's draws and passes in one micro-step, by hand") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  auto s = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  // 2 sequences of 1024 tokens (T = 2048), 12 heads, hidden 768, 12 layers, p = 0.1 everywhere.
  const double T = 2048, h = 768, S = 1024, heads = 2 * 12, L = 12;
  const double squares = heads * S * (S + 1) / 2;  // drawn on and below the diagonal
  auto sum = [](const cost::DropoutWork& w, bool backward) {
    double bytes = 0;
    for (const auto& p : w.passes)
      bytes += p.backward == backward ? p.bytes * p.count : 0;
    return bytes;
  };
  auto w = cost::dropout_work(s, 2048);
  // Per layer two hidden masks and the probabilities' squares; then the embeddings'.
  CHECK(w.forward_draws == L * (2 * T * h + squares) + T * h);
  CHECK(w.backward_draws == 0);
  // fp32 forward, per layer: two projections dropped (9 B) and added to the residual (12 B);
  // each square copied (8 B) and dropped (9 B), the rest of it zeroed (1 B above the diagonal).
  // Then the embeddings dropped (9 B).
  const double square_fwd = 17 * S * S + S * (S - 1) / 2;
  CHECK(sum(w, false) == Approx(L * (2 * 21 * T * h + heads * square_fwd) + 9 * T * h));
  // fp32 backward: two gradients copied and dropped (17 B); each square copied and dropped
  // for dv (17 B), dp dropped (9 B); the embeddings' gradient dropped.
  CHECK(sum(w, true) == Approx(L * (2 * 17 * T * h + heads * 26 * S * S) + 9 * T * h));
  // Full recomputation redraws every block's masks in backward and reruns its passes;
  // selective only the squares.
  s.recompute = Checkpointing::full;
  CHECK(cost::dropout_work(s, 2048).backward_draws == L * (2 * T * h + squares));
  s.recompute = Checkpointing::selective;
  CHECK(cost::dropout_work(s, 2048).backward_draws == L * squares);
  // 16-bit compute rounds after each drop (8 B) where fp32 copied or added.
  s.recompute = Checkpointing::none;
  s.compute = cost::ElementType::bf16;
  w = cost::dropout_work(s, 2048);
  CHECK(sum(w, false) ==
        Approx(L * (2 * 17 * T * h + heads * (17 * S * S + S * (S - 1) / 2)) + 9 * T * h));
  CHECK(sum(w, true) == Approx(L * (2 * 17 * T * h + heads * 34 * S * S) + 9 * T * h));
  // No dropout, no work.
  s.attention_dropout = s.hidden_dropout = s.embedding_dropout = 0;
  w = cost::dropout_work(s, 2048);
  CHECK(w.forward_draws == 0);
  CHECK(w.passes.empty());
}

TEST_CASE("dropout probabilities travel with the workload, and older files ran without") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  auto s = cost::dense_stack_of(*m.transformer, 0.05, 64);
  s.attention_dropout = 0.25;
  auto j = cost::to_json(s);
  auto read = [](const nlohmann::json& file) {
    return cost::dense_stack_from_json(ObjectReader::root(parse_json(file.dump(), "w.json")));
  };
  CHECK(read(j).attention_dropout == 0.25);
  CHECK(read(j).hidden_dropout == 0.1);
  j["dropout"]["hidden"] = 1.0;
  CHECK_THROWS_WITH(read(j), Catch::Contains("hidden") && Catch::Contains("0.99"));
  j.erase("dropout");
  const auto old = read(j);
  CHECK(old.attention_dropout + old.hidden_dropout + old.embedding_dropout == 0);
}

TEST_CASE("16-bit compute's extra scratch and passes, by hand") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  auto s = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  const auto fp32_scratch = cost::scratch_elements(s, 2048);
  CHECK(cost::mixed_precision_elements(s, 2048) == 0);
  CHECK(cost::mixed_precision_passes(s, 2048).empty());
  s.compute = cost::ElementType::bf16;
  // The largest unit, the embedding's 39,385,344; the largest matrix, the tied head's
  // 50257 x 768 = 38,597,376; one hidden-sized temporary, 2048 x 768 (in fp32 GPT-2's hidden
  // dropout has it already); and the attention workspace's head gradient, 1024 x 64.
  CHECK(cost::mixed_precision_elements(s, 2048) == 39385344 + 38597376 + 2048 * 768);
  CHECK(cost::scratch_elements(s, 2048) == fp32_scratch + 39385344 + 38597376 + 1024 * 64);
  // Forward of one micro-step, in bytes: per block the weight copy and its rounding (8 B per
  // parameter each of its 7,087,872), roundings (8 B per element per token) of two norm
  // outputs (768 each), QKV 2304, the up projection and activation 2 x 3072, the attention
  // output 768; each of the 2 sequences x 12 heads' 1024 x 1024 probabilities copied and
  // rounded; two projections' rounding and residual add (8 + 12 B per element of 768). The
  // head's matrix copied and rounded (2 x 8 B per element of 50257 x 768), the final norm's output
  // and the logits rounded (8 B per element of 768 + 50257).
  const double T = 2048;
  const double block = 16.0 * 7087872 + 8 * T * (2 * 768 + 2304 + 2 * 3072 + 768) +
                       16.0 * 1024 * 1024 * 2 * 12 + 2 * 20 * T * 768;
  double forward = 0;
  for (const auto& pass : cost::mixed_precision_passes(s, 2048))
    forward += pass.backward ? 0 : pass.bytes * pass.count;
  CHECK(forward == Approx(12 * block + 16.0 * 38597376 + 8 * T * (768 + 50257)));
  // The element type travels with the workload; a bad one is named.
  auto j = cost::to_json(s);
  CHECK(j["compute"] == "bf16");
  const auto back =
      cost::dense_stack_from_json(ObjectReader::root(parse_json(j.dump(), "workload.json")));
  CHECK(back.compute == cost::ElementType::bf16);
  j["compute"] = "fp8";
  CHECK_THROWS_WITH(
      cost::dense_stack_from_json(ObjectReader::root(parse_json(j.dump(), "workload.json"))),
      Catch::Contains("compute") && Catch::Contains("not fp32, bf16 or fp16"));
  j.erase("compute");  // files from before 16-bit compute ran in fp32
  CHECK(cost::dense_stack_from_json(ObjectReader::root(parse_json(j.dump(), "w.json"))).compute ==
        cost::ElementType::fp32);
}

TEST_CASE("dense stack refuses what dtplan-run cannot execute, names what it leaves out") {
  const auto dir = std::string(DTPLAN_DATA_DIR) + "/models";
  const auto gpt2 = load_model("gpt2", dir);
  CHECK_THROWS_WITH(
      cost::dense_stack_of(*gpt2.transformer, 1.0, 2048),
      Catch::Contains("sequence length 2048") && Catch::Contains("1024 learned positions"));
  // GPT-2's dropouts (attention, after sub-layers, after the embeddings) are executed.
  CHECK(cost::not_executed(*gpt2.transformer).empty());
  CHECK(cost::not_executed(*load_model("llama-3.2-1b", dir).transformer).empty());
  // Gemma 3 1B: GeGLU, a 512-token window on 5 of 6 layers, QK norms, post-sub-layer norms.
  CHECK(cost::not_executed(*load_model("gemma-3-1b", dir).transformer) ==
        std::vector<std::string>{"GeGLU's GELU gate (it runs SiLU, as SwiGLU)",
                                 "the sliding window (every layer attends to all)",
                                 "query/key norms", "the norms after each sub-layer"});
}

TEST_CASE("a dense stack survives its JSON, and older value_only files still read") {
  const auto m = load_model("llama-3.2-1b", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 0.25, 64);
  const auto j = cost::to_json(s);
  const auto back =
      cost::dense_stack_from_json(ObjectReader::root(parse_json(j.dump(), "workload.json")));
  CHECK(cost::params_of(back) == cost::params_of(s));
  CHECK(back.rope_theta == s.rope_theta);
  CHECK(back.norm == cost::StackNorm::rmsnorm);
  // A workload written before the runtime ran attention and norms: no "attention" key, one
  // "bias". QKV 8 x 24 + out 8 x 8 + MLP 2 x 8 x 16, all with biases (24 + 8 + 16 + 8).
  nlohmann::json old = {{"vocab", 10},
                        {"hidden", 8},
                        {"heads", 2},
                        {"kv_heads", 2},
                        {"head_dim", 4},
                        {"ffn", 16},
                        {"layers", 1},
                        {"seq_len", 4},
                        {"gated", false},
                        {"bias", true},
                        {"tied", true},
                        {"scale", 0.5},
                        {"params", 80 + 192 + 64 + 256 + 56},
                        {"flops_per_token", 1.0}};
  const auto legacy =
      cost::dense_stack_from_json(ObjectReader::root(parse_json(old.dump(), "old.json")));
  CHECK(legacy.attention == cost::StackAttention::value_only);
  CHECK(cost::params_of(legacy) == 648);
  CHECK(cost::attention_gemms_of(legacy, 8).forward.empty());
  old["attention"] = "flash";
  CHECK_THROWS_WITH(
      cost::dense_stack_from_json(ObjectReader::root(parse_json(old.dump(), "old.json"))),
      Catch::Contains("attention") && Catch::Contains("not causal or value_only"));
}

TEST_CASE("scale shrinks head dimension, MLP and vocabulary, keeps heads and layers") {
  const auto m = load_model("llama-2-7b", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 0.05, 64);
  CHECK(s.head_dim == 6);  // round(128 x 0.05 = 6.4)
  CHECK(s.heads == 32);
  CHECK(s.hidden == 192);
  CHECK(s.ffn == 550);     // round(11008 x 0.05 = 550.4)
  CHECK(s.vocab == 1600);  // 32000 x 0.05
  CHECK(s.layers == 32);
  CHECK(s.gated);
  CHECK_FALSE(s.tied);
  CHECK_THROWS_WITH(cost::dense_stack_of(*m.transformer, 1.5, 64),
                    Catch::Contains("scale: 1.5") && Catch::Contains("is not in (0, 1]"));
}
