// Tests for cost/src/activations.cpp. Per-block bytes are checked against Korthikanti et al.,
// "Reducing Activation Recomputation in Large Transformer Models" (2022), eq. 1 and Table 2:
// s*b*h*(34 + 5*a*s/h) without recomputation, 34*s*b*h with selective recomputation; other
// cases are derived term by term in the comments.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/cost/activations.hpp"
#include "dtplan/model/error.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kModels = std::filesystem::path(DTPLAN_DATA_DIR) / "models";

// GPT-3 175B block: h 12288, a 96, f 4h, dropout on, multi-head attention.
TransformerSpec gpt3_block() {
  TransformerSpec t;
  t.model_type = "gpt2";
  t.vocab_size = 51200;
  t.hidden_size = 12288;
  t.num_layers = 96;
  t.num_heads = t.num_kv_heads = 96;
  t.head_dim = 128;
  t.ffn_size = 4 * 12288;
  t.max_positions = 2048;
  t.attention_dropout = t.hidden_dropout = 0.1;
  return t;
}

TrainingConfig config(Precision p, Checkpointing ck, std::int64_t b, std::int64_t s,
                      Attention attn = Attention::eager) {
  TrainingConfig c;
  c.attention = attn;
  c.precision = p;
  c.checkpointing = ck;
  c.micro_batch = b;
  c.seq_len = s;
  return c;
}
}  // namespace

TEST_CASE("Korthikanti eq. 1: 34sbh + 5as^2b per block, 16-bit") {
  const std::int64_t s = 2048, b = 1, h = 12288, a = 96;
  const auto t = gpt3_block();
  CHECK(layer_activation_bytes(t, b, s, Precision::bf16, Attention::eager, true).value ==
        34 * s * b * h + 5 * a * s * s * b);  // 2,868,903,936
  CHECK(layer_activation_bytes(t, b, s, Precision::bf16, Attention::eager, false).value ==
        34 * s * b * h);  // selective recomputation: 855,638,016
  CHECK(layer_activation_bytes(t, 4, s, Precision::fp16, Attention::eager, true).value ==
        4 * (34 * s * h + 5 * a * s * s));  // linear in b
}

TEST_CASE("Llama-style block: SwiGLU, no dropout") {
  // h 4096, f 11008, a 32, s 4096, b 1, bf16 (e = 2):
  // attention 2sbh + 2*2sbh (Q, O in) + 2*2sbh (K, V) = 10sbh; MLP 2sbh + 4*2sbf; norms 4sbh
  // => 16sbh + 8sbf = 268,435,456 + 360,710,144; scores 2as^2b = 1,073,741,824.
  const auto m = load_model("llama-2-7b", kModels);
  const auto& t = *m.transformer;
  CHECK(layer_activation_bytes(t, 1, 4096, Precision::bf16, Attention::eager, true).value ==
        1'702'887'424);
  // FlashAttention: no scores, a fp32 log-sum-exp of 4*a*s*b = 524,288 bytes.
  CHECK(layer_activation_bytes(t, 1, 4096, Precision::bf16, Attention::flash, true).value ==
        629'145'600 + 524'288);
  // fp32 doubles every 16-bit term: 2 * 629,145,600 + 4as^2b.
  CHECK(layer_activation_bytes(t, 1, 4096, Precision::fp32, Attention::eager, true).value ==
        1'258'291'200 + 2'147'483'648);
}

TEST_CASE("Hugging Face eager attention keeps fp32 softmax and repeated K, V") {
  // Llama 3 8B: 32 heads, 8 KV heads of 128. hf-eager saves K and V repeated to 4096 wide
  // (2 x 2 x sb(4096 - 1024) more than flash's 1024), an fp32 softmax output 4as^2b and
  // bf16 probabilities 2as^2b; flash keeps the 4asb log-sum-exp instead of both.
  const auto m = load_model("llama-3-8b", kModels);
  const auto& t = *m.transformer;
  const std::int64_t s = 2048, a = 32;
  const auto flash = layer_activation_bytes(t, 1, s, Precision::bf16, Attention::flash, true);
  const auto hf = layer_activation_bytes(t, 1, s, Precision::bf16, Attention::hf_eager, true);
  CHECK(hf.value - flash.value == 2 * 2 * s * (4096 - 1024) + 6 * a * s * s - 4 * a * s);
  const auto eager = layer_activation_bytes(t, 1, s, Precision::bf16, Attention::eager, true);
  CHECK(eager.value - flash.value == 2 * a * s * s - 4 * a * s);
}

TEST_CASE("whole-model activations by checkpointing mode (Llama 2 7B, b 1, s 4096, bf16)") {
  const auto m = load_model("llama-2-7b", kModels);
  // Outside the blocks: token ids 8sb = 32,768; final-norm input and LM-head input 2sbh each
  // = 67,108,864; logits 2sbv = 262,144,000; their fp32 copy 4sbv and the fp32 log-softmax
  // 4sbv = 1,048,576,000; together 1,377,861,632.
  const std::int64_t outside = 32'768 + 67'108'864 + 262'144'000 + 1'048'576'000;
  const auto none = estimate_activations(m, config(Precision::bf16, Checkpointing::none, 1, 4096));
  CHECK(none.total.value == 32 * 1'702'887'424LL + outside);
  CHECK(none.model_output.value == 262'144'000);
  // Full: each block's 2sbh input kept, one block recomputed at a time.
  const auto full = estimate_activations(m, config(Precision::bf16, Checkpointing::full, 1, 4096));
  CHECK(full.total.value == 32 * 33'554'432LL + 1'702'887'424 + outside);
  // Selective: blocks without scores, scores of one block recomputed.
  const auto sel =
      estimate_activations(m, config(Precision::bf16, Checkpointing::selective, 1, 4096));
  CHECK(sel.total.value == 32 * 629'145'600LL + 1'073'741'824 + outside);
}

TEST_CASE("sequence length defaults to the model maximum and is checked") {
  const auto gpt2 = load_model("gpt2", kModels);
  CHECK(estimate_activations(gpt2, config(Precision::bf16, Checkpointing::none, 1, 0)).seq_len ==
        1024);
  CHECK_THROWS_WITH(
      estimate_activations(gpt2, config(Precision::bf16, Checkpointing::none, 1, 2048)),
      Catch::Contains("longer than the model's 1024 learned positions"));
}

TEST_CASE("layer-list activations count each saved storage once (MNIST ConvNet, fp32)") {
  const auto m = load_model("mnist-convnet", kModels);
  // Saved tensors, fp32, per sample: input 784 (conv1) + conv1 out 12,544 (bn1) + relu1 out
  // 12,544 (relu1 and pool1 share it) + pool1 out 3,136 (conv2) + conv2 out 6,272 (bn2) +
  // relu2 out 6,272 + pool2 out 1,568 (Flatten is a view; Linear saves it) + logits 10
  // = 43,130 elements = 172,520 bytes; int64 pooling indices 8 * (3,136 + 1,568) = 37,632.
  const auto one = estimate_activations(m, config(Precision::fp32, Checkpointing::none, 1, 0));
  CHECK(one.total.value == 172'520 + 37'632);
  const auto batch = estimate_activations(m, config(Precision::fp32, Checkpointing::none, 64, 0));
  CHECK(batch.total.value == 64 * (172'520 + 37'632));
  CHECK(batch.model_output.value == 64 * 10 * 4);
}

TEST_CASE("a bare parameter count has no activation model") {
  const auto m = model_from_param_count(1'000'000'000, "--params");
  const auto a = estimate_activations(m, config(Precision::bf16, Checkpointing::none, 8, 0));
  CHECK_FALSE(a.modelled);
  CHECK(a.total.value == 0);
}

TEST_CASE("a mixture of experts keeps routed copies of every token and the experts' tensors") {
  // Mixtral 8x7B's block (h 4096, 32 heads, 8 key/value heads of 128, 8 experts of 14336,
  // 2 per token), bf16, flash attention, one sequence of s = 4096 tokens, per sb:
  //   replicated: QKV, MLP and two norm inputs         4 x 2 x 4096       = 32,768
  //   Q and the output projection's input, K and V     2 x 2 x (4096 + 1024) = 20,480
  //   router probabilities, fp32, 8 experts            4 x 8              = 32
  //   the experts' inputs and outputs, 2 copies        2 x 2 x 2 x 4096   = 32,768
  //   gate, up, SiLU and product for 2 sb rows         4 x 2 x 2 x 14336  = 229,376
  TransformerSpec t;
  t.model_type = "mixtral";
  t.vocab_size = 32000;
  t.hidden_size = 4096;
  t.num_layers = 32;
  t.num_heads = 32;
  t.num_kv_heads = 8;
  t.head_dim = 128;
  t.ffn_size = 14336;
  t.max_positions = 32768;
  t.mlp = MlpKind::swiglu;
  t.norm = NormKind::rmsnorm;
  t.positions = PositionKind::rotary;
  t.qkv_bias = t.attn_out_bias = t.mlp_bias = false;
  t.moe = {.experts = 8, .experts_per_token = 2, .expert_ffn_size = 14336};
  ActivationShape a;
  a.tokens = 4096;
  a.layers = 32;
  const std::int64_t sb = 4096;
  CHECK(block_activations(t, a).linear.value == sb * (32'768 + 20'480 + 32 + 32'768 + 229'376));
  // Tensor parallelism 2 halves the heads and every expert's width, not the token copies:
  // 32,768 + 10,240 + 32 + 32,768 + 114,688.
  a.tp = 2;
  CHECK(block_activations(t, a).linear.value == sb * (32'768 + 10'240 + 32 + 32'768 + 114'688));
}

TEST_CASE("Gemma 2: four norm inputs per block, soft-capping keeps tanh outputs") {
  // Gemma 2 9B, b 1, s 4096, bf16, no dropout: h 3584, q 16 x 256 = 4096, k 8 x 256 = 2048,
  // f 14336, a 16. Flash: QKV and MLP inputs 2 x 2sbh, four norm inputs 4 x 2sbh, Q and the
  // output projection's input 2 x 2sbq, K and V 2 x 2sbk, GeGLU's four tensors 4 x 2sbf, the
  // fp32 log-sum-exp 4asb:
  //   12 x 4096 x 3584 + 4 x 4096 x 4096 + 4 x 4096 x 2048 + 8 x 4096 x 14336 + 4 x 16 x 4096
  //   = 176,160,768 + 67,108,864 + 33,554,432 + 469,762,048 + 262,144 = 746,848,256.
  const auto m = load_model("gemma-2-9b", kModels);
  const auto& t = *m.transformer;
  const std::int64_t s = 4096, a = 16;
  const auto flash = layer_activation_bytes(t, 1, s, Precision::bf16, Attention::flash, true);
  CHECK(flash.value == 746'848'256);
  // Eager: the bf16 scores (2as^2b) and tanh's output of the soft-capped scores (2as^2b) in
  // place of the log-sum-exp.
  const auto eager = layer_activation_bytes(t, 1, s, Precision::bf16, Attention::eager, true);
  CHECK(eager.value - flash.value == 4 * a * s * s - 4 * a * s);
  // The head: the bf16 logits 2sbv, tanh's output of the soft-capped logits 2sbv, the fp32
  // copy and the fp32 log-softmax 4sbv each (vocabulary 256,000): 12 x 4096 x 256,000.
  const auto all =
      estimate_activations(m, config(Precision::bf16, Checkpointing::full, 1, s, Attention::flash));
  std::int64_t head = 0;
  for (const auto& term : all.terms) {
    if (term.name == "logits" || term.name == "soft-capped logits (tanh output)" ||
        term.name == "fp32 logits for the loss" ||
        term.name == "log-softmax kept by cross-entropy (fp32)")
      head += term.bytes.value;
  }
  CHECK(head == 12LL * 4096 * 256'000);
}

TEST_CASE("latent attention keeps its latents whole and Q, K, V per head") {
  // DeepSeek-V3's dense first block, b 1, s 4096, bf16, flash, tp 1: the block's input and the
  // MLP's input, two norm inputs (4 x 2sbh, h 7168); the query latent's norm and up-projection
  // inputs (2 x 1536) and the key/value latent's (2 x 512) with the rotary key (64), 2sb x 4160;
  // Q and K (128 heads x 192), V and the output projection's input (128 x 128), 2sb x 81,920;
  // SwiGLU's four tensors 4 x 2sb x 18432; the log-sum-exp 4 x 128 x 4096:
  // 8192 x (28,672 + 4,160 + 81,920 + 73,728) + 2,097,152 = 1,546,125,312.
  const auto m = load_model("deepseek-v3", kModels);
  const auto dense = block_runs(*m.transformer).front().block;
  REQUIRE_FALSE(dense.moe.active());
  CHECK(layer_activation_bytes(dense, 1, 4096, Precision::bf16, Attention::flash, true).value ==
        1'546'125'312);
}

TEST_CASE("recompute modules drop what Megatron-LM's selective recomputation discards") {
  // DeepSeek-V3, b 1, s 4096, bf16, flash, tp 1 (figures of the test above). A dense block
  // keeps 2sb x 188,480 + the log-sum-exp 2,097,152. mla_up_proj discards Q, K (128 x 192
  // each) and V (128 x 128): 2sb x 65,536; mlp the MLP's input (7168) and SwiGLU's four
  // tensors (4 x 18432): 2sb x 80,896. Without core_attn the log-sum-exp stays.
  const auto m = load_model("deepseek-v3", kModels);
  const auto runs = block_runs(*m.transformer);
  const auto dense = runs.front().block, sparse = runs.back().block;
  REQUIRE(sparse.moe.active());
  ActivationShape a;
  a.tokens = 4096;
  a.recompute = Checkpointing::selective;
  a.recompute_modules = parse_recompute_modules("mla_up_proj,mlp");
  const std::int64_t sb2 = 8192;
  const auto d = block_activations(dense, a);
  CHECK(d.recomputed.value == sb2 * (65'536 + 80'896));
  // A sparse block per token: the four h-wide tensors and the latents (2 x (28,672 + 4,160)),
  // Q, K, V and the output projection's input (2 x 81,920), the router's fp32 scores (4 x
  // 256), 8 routed copies in and out (2 x 2 x 8 x 7168), the routed SwiGLU tensors (4 x 2 x 8
  // x 2048) and the shared expert's (4 x 2 x 2048): 607,360 bytes. mlp leaves it alone.
  const auto s = block_activations(sparse, a);
  CHECK(s.linear.value == 4096LL * 607'360);
  CHECK(s.recomputed.value == 4096LL * 2 * 65'536);
  // GPT-OSS's recipe, layernorm and moe_act: the latent down-projections' input and the
  // router's (2 x 2 x 7168, both norms run on their own here), and of the routed SwiGLU the
  // activation output and the product (2 x 2 x 8 x 2048).
  a.recompute_modules = parse_recompute_modules("layernorm,moe_act");
  CHECK(block_activations(sparse, a).recomputed.value == 4096LL * (28'672 + 65'536));
  // moe: everything the layer keeps beyond its input, 1,024 + 229,376 + 131,072 + 16,384.
  a.recompute_modules = parse_recompute_modules("moe");
  CHECK(block_activations(sparse, a).recomputed.value == 4096LL * 377'856);
  // A stage of the 3 dense blocks and one sparse block under mla_up_proj and mlp: each block
  // keeps what is not discarded (the log-sum-exp, 2 x 256 per token, included), and the
  // largest block's discarded tensors are rebuilt once in backward.
  a.recompute_modules = parse_recompute_modules("mla_up_proj,mlp");
  a.layers = 4;
  a.dense_layers = 3;
  a.embedding = a.head = false;
  const std::int64_t dense_kept = sb2 * (188'480 - 65'536 - 80'896) + 2'097'152;
  const std::int64_t sparse_kept = 4096LL * (607'360 - 131'072 + 512);
  CHECK(stage_activations(*m.transformer, a).total.value ==
        3 * dense_kept + sparse_kept + sb2 * (65'536 + 80'896));
}

TEST_CASE("torchtitan's per-op policy keeps each block's input and its saved ops' outputs") {
  // Llama 3 8B (h 4096, q 4096, k = v 1024, f 14336, 32 heads), b 1, s 8192, bf16, flash.
  // The block's aten.mm calls in order: wq, wk, wv, wo, w1, w3, w2; the 2nd, 4th and 6th
  // (wk, wo, w3) are recomputed. Kept per token: the input (4096), wq's (4096), wv's (1024),
  // the attention output (4096), w1's (14336) and w2's (4096), 2 bytes each, 63,488 bytes;
  // and the log-sum-exp, 4 x 32 = 128 bytes.
  const auto m = load_model("llama-3-8b", kModels);
  const auto& t = *m.transformer;
  ActivationShape a;
  a.tokens = 8192;
  a.recompute = Checkpointing::selective;
  a.selective_policy = SelectivePolicy::per_op;
  a.layers = t.num_layers;
  a.embedding = a.head = false;
  const std::int64_t sb = 8192;
  const auto block = block_activations(t, a);
  CHECK(block.linear.value - block.recomputed.value == sb * 63'488);
  // 32 blocks keep that, and one block's other tensors are rebuilt during backward.
  const auto est = stage_activations(t, a);
  REQUIRE(est.terms.size() == 2);
  CHECK(est.terms[0].name ==
        "transformer blocks: inputs and the outputs per-op checkpointing saves x 32 layers");
  CHECK(est.terms[0].bytes.value == 32 * sb * (63'488 + 128));
  CHECK(est.terms[1].bytes.value == block.recomputed.value);
  // FP8 Linears run as torch._scaled_mm, all saved: wk's, wo's and w3's outputs too, 2 x
  // (1024 + 4096 + 14336) bytes a token more.
  a.fp8_gemms = true;
  const auto fp8 = block_activations(t, a);
  CHECK(fp8.linear.value - fp8.recomputed.value == sb * (63'488 + 38'912));
  // tp 2 with sequence parallelism: the input split (2048), wq's, wv's, the attention output
  // and w1's halved (2048, 512, 2048, 7168), w2's partial sums whole (4096) and the two
  // reduce-scatters' outputs (2 x 2048): 2 x 22,016 bytes; 16 heads' log-sum-exp, 64 bytes.
  a.fp8_gemms = false;
  a.tp = 2;
  a.sequence_parallel = true;
  CHECK(stage_activations(t, a).terms[0].bytes.value == 32 * sb * (44'032 + 64));
  // Eager attention is not among the saved ops: neither its output (2 x 4096 bytes a token
  // less) nor its scores are kept.
  a.tp = 1;
  a.sequence_parallel = false;
  a.attention = Attention::eager;
  const auto eager = block_activations(t, a);
  CHECK(eager.linear.value - eager.recomputed.value == sb * 55'296);
  CHECK(stage_activations(t, a).terms[0].bytes.value == 32 * sb * 55'296);
}

TEST_CASE("full checkpointing of every Nth block keeps the others whole") {
  // Llama 2 7B, b 1, s 4096, bf16, flash (the Llama-style test above): a block keeps
  // 629,145,600 bytes and the 524,288-byte log-sum-exp, its input 2 x 4096 x 4096 =
  // 33,554,432. Every 2nd of the 32 checkpointed (torchtitan's selective_ac_option "2"): 16
  // blocks whole, 16 inputs, and one block rebuilt in backward; every 3rd: 10 of them.
  const auto m = load_model("llama-2-7b", kModels);
  const auto& t = *m.transformer;
  ActivationShape a;
  a.tokens = 4096;
  a.recompute = Checkpointing::full;
  a.checkpoint_every = 2;
  a.layers = 32;
  a.embedding = a.head = false;
  const std::int64_t block = 629'145'600 + 524'288, input = 33'554'432;
  const auto est = stage_activations(t, a);
  REQUIRE(est.terms.size() == 3);
  CHECK(est.terms[0].name == "transformer blocks kept whole x 16 layers");
  CHECK(est.terms[0].bytes.value == 16 * block);
  CHECK(est.terms[1].name == "block inputs (checkpoints, 1 block in 2) x 16 layers");
  CHECK(est.terms[1].bytes.value == 16 * input);
  CHECK(est.terms[2].bytes.value == block);
  a.checkpoint_every = 3;
  CHECK(stage_activations(t, a).total.value == 22 * block + 10 * input + block);
  // More than the blocks: none checkpointed, nothing rebuilt.
  a.checkpoint_every = 64;
  CHECK(stage_activations(t, a).total.value == 32 * block);
}

TEST_CASE("recompute module names parse, print and are checked") {
  CHECK(text_of(RecomputeModules{}) == "core_attn");
  CHECK(text_of(parse_recompute_modules("moe_act,layernorm")) == "layernorm,moe_act");
  CHECK(parse_recompute_modules("none") == RecomputeModules::empty());
  CHECK_THROWS_WITH(parse_recompute_modules("mla_up_proj,mlp,mlp"),
                    Catch::Contains("'mla_up_proj,mlp,mlp' names mlp twice"));
  CHECK_THROWS_WITH(parse_recompute_modules("moe_actt"),
                    Catch::Contains("unknown recompute module 'moe_actt'") &&
                        Catch::Contains("did you mean: moe_act"));
  CHECK_THROWS_WITH(parse_recompute_modules("core_attn,"), Catch::Contains("empty name"));
}

TEST_CASE("activations with the micro-batches in flight left open add up as stage_activations") {
  // GPT-3's first stage (embedding dropout on), 4 layers, every recompute mode: at(f) must
  // equal the total priced with f in flight, interleaving's fractions included.
  auto t = gpt3_block();
  t.embedding_dropout = 0.1;
  for (const auto recompute :
       {Checkpointing::none, Checkpointing::selective, Checkpointing::full}) {
    ActivationShape a;
    a.tokens = 2047;
    a.layers = 4;
    a.recompute = recompute;
    a.embedding = true;
    a.head = false;
    a.named = false;
    const auto open = stage_activations_in_flight(t, a);
    // blocks, token ids, dropout mask (no embedding norm on GPT-3)
    CHECK(open.terms == 3);
    for (const double f : {1.0, 3.5, 8.0, 2.75}) {
      a.in_flight = f;
      INFO("recompute " << static_cast<int>(recompute) << ", " << f << " in flight");
      CHECK(open.at(f) == stage_activations(t, a).total);
    }
    // Token ids alone: 8 B x 2,047 tokens per micro-batch in flight.
    CHECK(open.per_micro_batch.at(1) == 8 * 2047);
  }
  ActivationShape one;
  one.tokens = 16;
  CHECK_THROWS_WITH(stage_activations_in_flight(t, one).at(0.5),
                    Catch::Matchers::Contains("fewer than one micro-batch in flight"));
}
