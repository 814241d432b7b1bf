// Tests for cost/src/eager_layers.cpp: the element-wise traffic of a GPT-2 block and of a
// Llama block in eager PyTorch under autocast and with one type (fp32, bf16), counted op by op by
// hand from the modules of transformers (GPT2Block with NewGELUActivation; LlamaDecoderLayer) and
// autograd's derivatives, and how compute_time prices it.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "dtplan/cost/activations.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/model/error.hpp"
#include "small_transformer.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;

TransformerSpec gpt2_block() {
  auto t = test::gpt2_style_block(50264);
  t.hidden_dropout = 0.1;
  t.gelu_as_tensor_ops = true;  // "gelu_new", GPT-2's default
  return t;
}

// DDP under bf16 autocast on sequences of 1024 tokens.
TrainingConfig ddp_amp_bf16(std::int64_t micro_batch) {
  TrainingConfig c;
  c.strategy = Strategy::ddp;
  c.precision = Precision::amp_bf16;
  c.micro_batch = micro_batch;
  c.seq_len = 1024;
  return c;
}

// Llama 3.2 1B's block: hidden 2048, 32 query heads and 8 key/value heads of 64, SwiGLU 8192.
TransformerSpec llama_block() {
  return test::llama_style_block(2048, 32, 8, 64, 8192, 128256);
}
}  // namespace

TEST_CASE("eager autocast: a GPT-2 block's element-wise bytes and kernels, op by op") {
  const double h = 768, f = 3072, m = 8192;
  // Its weights and biases, cast to 16 bits once a forward (read 4, write 2 bytes) and their
  // gradients widened once a backward: c_attn 768 x 2304 + 2304, c_proj 768 x 768 + 768, c_fc
  // 768 x 3072 + 3072, mlp c_proj 3072 x 768 + 768 = 7,084,800 elements.
  const double weights = 6.0 * 7'084'800;
  const auto b = eager_autocast_block(gpt2_block(), m);
  // Forward, per token. Same-type: two fp32 LayerNorms (8h each), autocast's copies of the
  // fp32 inputs of c_attn and c_fc (6h each) and of the fp32 GELU output into c_proj (6f), two
  // 16-bit dropouts with their masks (5h each), and the GELU's fp32 pow, two scalings, tanh and
  // 1 + (8f each) and 0.5 x in 16 bits (4f): 38h + 50f. Widening: x to fp32 for pow (6f).
  // Mixed: the two residual adds and the GELU's x + t and last product (10 bytes each).
  CHECK(b.forward.same_type_bytes == Approx(m * (38 * h + 50 * f) + weights));
  CHECK(b.forward.widening_bytes == Approx(m * 6 * f));
  CHECK(b.forward.mixed_type_bytes == Approx(m * (20 * h + 20 * f)));
  // 2 norms + 3 casts + 2 dropouts + 9 GELU ops + 2 adds + 4 weights + 4 biases.
  CHECK(b.forward.kernels == 26);
  // Backward. Same-type: LayerNorm's input gradient (12h) and weight/bias gradients (8h) twice;
  // each residual's narrowing of the gradient (6h) and the fp32 sum of the stream's two paths
  // (12h); the dropouts (5h each); the GELU's 102f; the four bias gradients, sums of 16-bit
  // output gradients (2 x (2304 + 768 + 3072 + 768) per token). Widening: the three cast
  // inputs' gradients (6h, 6h, 6f) and the weights'. Mixed: the last product's gradient into
  // fp32 (10f).
  CHECK(b.backward.same_type_bytes ==
        Approx(m * (40 * h + 36 * h + 10 * h + 102 * f + 2.0 * (2304 + 768 + 3072 + 768))));
  CHECK(b.backward.widening_bytes == Approx(m * (12 * h + 6 * f) + weights));
  CHECK(b.backward.mixed_type_bytes == Approx(m * 10 * f));
  // 4 norm + 4 residual + 2 dropout + 14 GELU + 3 casts + 8 weight/bias widenings + 4 bias sums.
  CHECK(b.backward.kernels == 39);
}

TEST_CASE("eager autocast: a Llama block with RMSNorm as five ops, rotary and SwiGLU") {
  const double h = 2048, f = 8192, q = 2048, kv = 512, m = 4096;
  const double weights = 6.0 * (2048.0 * 2048 * 2 + 2048.0 * 512 * 2 + 3 * 2048.0 * 8192);
  const auto b = eager_autocast_block(llama_block(), m);
  // Forward, per token: LlamaRMSNorm twice (pow 8h, mean 4h, x r 8h, weight y 8h); the normed
  // stream copied to 16 bits for q, k and v_proj and for gate and up_proj (6h each: autocast
  // does not cache activations); rotary on q and k (negation 2, cat 4, fp32 sum 12, the
  // narrowing for attention 6 bytes an element); silu and the product (4f + 6f).
  CHECK(b.forward.same_type_bytes ==
        Approx(m * (2 * 28 * h + 5 * 6 * h + 24 * (q + kv) + 10 * f) + weights));
  CHECK(b.forward.widening_bytes == 0);
  // q cos and rotate_half(q) sin read 16 bits and fp32 (6 bytes each); the two residual adds.
  CHECK(b.forward.mixed_type_bytes == Approx(m * (12 * (q + kv) + 20 * h)));
  // 2 x 6 norm ops, 5 casts, 2 x 6 rotary ops, 2 MLP ops, 2 adds, 7 weights.
  CHECK(b.forward.kernels == 40);
  // Backward: the norms' 84h each; autograd sums the three fp32 gradients of the attention's
  // input (two adds of 12h) and the two of the MLP's (one); rotary 36 bytes an element; the
  // MLP's 18f; each residual 18h.
  CHECK(b.backward.same_type_bytes ==
        Approx(m * (2 * 84 * h + 3 * 12 * h + 36 * (q + kv) + 18 * f + 2 * 18 * h)));
  // The five input casts' gradients, rotary's widened attention-input gradients, the weights.
  CHECK(b.backward.widening_bytes == Approx(m * (30 * h + 6 * (q + kv)) + weights));
  CHECK(b.backward.mixed_type_bytes == 0);
  CHECK(b.backward.kernels == 24 + 3 + 5 + 14 + 3 + 4 + 7);
}

TEST_CASE("eager autocast: mixtures and latent attention keep the fused pricing") {
  auto t = llama_block();
  CHECK(eager_inventory_covers(t));
  t.moe.experts = 8;
  t.moe.experts_per_token = 2;
  t.moe.expert_ffn_size = 1024;
  CHECK_FALSE(eager_inventory_covers(t));
}

TEST_CASE("eager autocast: compute prices each class at its bandwidth") {
  // One GPT-2 block on an A100 (2.039 TB/s) with round efficiencies, so that every class
  // differs: same-type 0.5, widening 0.25, mixed 0.4, 10 us a kernel. The difference between
  // eager and fused kernels is in the block's element-wise work only.
  ComputeConstants k;
  k.gemm_efficiency = 0.5;
  k.attention_efficiency = 0.5;
  k.memory_efficiency = 0.5;
  k.widening_copy_memory_efficiency = 0.25;
  k.mixed_type_memory_efficiency = 0.4;
  k.kernel_overhead_s = 1e-5;
  k.elementwise_kernels_per_layer = 10;
  const auto a100 = GpuCatalog::load(kData / "gpus.json").find("A100-80GB");
  const double hbm = 2.039e12;
  TrainingConfig c = ddp_amp_bf16(8);
  const auto model = model_from_transformer(gpt2_block(), "gpt2 block", "test");
  const auto eager = estimate_compute(model, c, a100, k);
  c.layer_kernels = LayerKernels::fused;
  const auto fused = estimate_compute(model, c, a100, k);
  const double m = 8192, h = 768, f = 3072;
  const auto ops = eager_autocast_block(gpt2_block(), m);
  const auto price = [&](const EagerTraffic& t) {
    return t.same_type_bytes / (hbm * 0.5) + t.widening_bytes / (hbm * 0.25) +
           t.mixed_type_bytes / (hbm * 0.4) + t.kernels * 1e-5;
  };
  // Fused: the GELU reads and writes f (2 x 2 bytes), two norms (2 x 2 x 2h), two residual
  // adds (2 x 3 x 2h), two dropouts (2 x (2 x 2h + h)): 4f + 30h bytes a token in 10 kernels;
  // its backward twice that.
  const double fused_block = m * (4 * f + 30 * h) / (hbm * 0.5) + 10 * 1e-5;
  CHECK(eager.forward_s - fused.forward_s == Approx(price(ops.forward) - fused_block));
  CHECK(eager.backward_s - fused.backward_s == Approx(price(ops.backward) - 2 * fused_block));
  CHECK(eager.gemm_s == Approx(fused.gemm_s));
}

TEST_CASE("eager layers: the framework default, one type without autocast, and FP8") {
  TrainingConfig c;
  c.precision = Precision::amp_bf16;
  REQUIRE(eager_layers(c));  // autocast runs in eager PyTorch
  CHECK(eager_layers(c)->autocast);
  CHECK(eager_layers(c)->stream_bytes() == 4);
  c.precision = Precision::amp_fp16;
  CHECK(eager_layers(c));
  c.layer_kernels = LayerKernels::fused;  // FlashAttention's training kernels, torch.compile
  CHECK_FALSE(eager_layers(c));
  c.precision = Precision::bf16;  // Megatron-LM, DeepSpeed: fused unless asked
  c.layer_kernels = LayerKernels::framework;
  CHECK_FALSE(eager_layers(c));
  c.layer_kernels = LayerKernels::eager;  // FSDP2's MixedPrecisionPolicy(param_dtype=bf16)
  REQUIRE(eager_layers(c));
  CHECK_FALSE(eager_layers(c)->autocast);
  CHECK(eager_layers(c)->element_bytes == 2);
  CHECK(eager_layers(c)->stream_bytes() == 2);
  c.precision = Precision::fp32;
  CHECK(eager_layers(c)->element_bytes == 4);
  c.precision = Precision::bf16;
  c.fp8 = Fp8Recipe::tensorwise;
  CHECK_THROWS_WITH(eager_layers(c), Catch::Contains("{layer-kernels} eager is not modelled") &&
                                         Catch::Contains("{fp8_recipe} tensorwise"));
}

TEST_CASE("eager autocast: what autograd keeps of a block, tensor by tensor") {
  // GPT-2, per token: two LayerNorm inputs in fp32 with a mean and rstd (4h + 8 each); c_attn's
  // and c_fc's own bf16 input copies (2h each); Q, K and V (views of c_attn's output, 6h) and
  // attention's output (2h); two dropout masks (h each); NewGELUActivation's fp32 x, tanh
  // output and 1 + tanh (4f each), 0.5 x (2f) and c_proj's bf16 copy of the result (2f).
  const double h = 768, f = 3072;
  CHECK(eager_autocast_saved_bytes_per_token(gpt2_block()) ==
        Approx(2 * (4 * h + 8) + 4 * h + 6 * h + 2 * h + 2 * h + 16 * f));
  // Llama 3.2 1B: two RMSNorms (fp32 x and normed x, 8h, and a 4-byte rsqrt a row); q, k,
  // v_proj's and gate, up_proj's five input copies (2h each); Q, K, V and the output (2q + 2kv
  // + 2kv + 2q: rotary keeps only cos and sin); SwiGLU's four 16-bit tensors (8f).
  const double lh = 2048, q = 2048, kv = 512, lf = 8192;
  CHECK(eager_autocast_saved_bytes_per_token(llama_block()) ==
        Approx(2 * (8 * lh + 4) + 5 * 2 * lh + 4 * q + 4 * kv + 8 * lf));
}

TEST_CASE("eager autocast: a block's activations are its saved tensors, its checkpoint fp32") {
  // One GPT-2 block at micro-batch 8 x 1024: 8192 tokens of the saved bytes above, and the
  // fp32 residual stream (4 x 8192 x 768) as the checkpoint full recomputation keeps.
  ActivationShape a;
  a.micro_batch = 8;
  a.tokens = 1024;
  a.precision = Precision::amp_bf16;
  a.layers = 1;
  a.eager = EagerFlow{true, 2};
  const auto block = block_activations(gpt2_block(), a);
  CHECK(block.linear.value ==
        std::llround(8192 * eager_autocast_saved_bytes_per_token(gpt2_block())));
  CHECK(block.input.value == 4LL * 8192 * 768);
  // Fused kernels keep Korthikanti's 34 bytes a token-hidden (cost/test_activations.cpp).
  a.eager.reset();
  CHECK(block_activations(gpt2_block(), a).linear.value == 34LL * 8192 * 768);
}

TEST_CASE("eager, one type: a GPT-2 block in fp32, op by op") {
  const double h = 768, f = 3072, m = 8192, e = 4;
  const auto b = eager_uniform_block(gpt2_block(), m, e);
  // Forward, per token, all of one type: two LayerNorms (read and write, 2eh each), two
  // dropouts with one-byte masks ((2e + 1)h each), two residual adds (3eh each) and
  // NewGELUActivation's eight ops (pow, the two scalings, tanh, 1 + and 0.5 x read and write
  // 2ef each; x + t and the product 3ef each): no casts around the Linears.
  CHECK(b.forward.same_type_bytes ==
        Approx(m * ((4 * e + 2 * (2 * e + 1) + 6 * e) * h + 18 * e * f)));
  CHECK(b.forward.widening_bytes == 0);
  CHECK(b.forward.mixed_type_bytes == 0);
  CHECK(b.forward.kernels == 2 + 2 + 2 + 8);
  // Backward: LayerNorm's input gradient (3eh) and weight and bias gradients (2eh) twice, the
  // dropouts, the stream's two gradients summed at each residual (3eh), the GELU's (the
  // product's two 3ef, 0.5 x's 2ef, tanh's 3ef, the scalings' 2ef twice, pow's 2ef + 2ef + 3ef,
  // x's three paths summed 3ef twice: 28ef), and the four bias gradients, sums over the tokens
  // of e-byte output gradients (2304 + 768 + 3072 + 768 wide). c_attn reads one tensor: no sum.
  CHECK(b.backward.same_type_bytes == Approx(m * ((10 * e + 2 * (2 * e + 1) + 6 * e) * h +
                                                  28 * e * f + e * (2304 + 768 + 3072 + 768))));
  CHECK(b.backward.widening_bytes == 0);
  CHECK(b.backward.kernels == 4 + 2 + 2 + 11 + 4);
}

TEST_CASE("eager, one type: a Llama block in bf16, RMSNorm widening to fp32 and back") {
  const double h = 2048, f = 8192, q = 2048, kv = 512, m = 4096, e = 2;
  const auto b = eager_uniform_block(llama_block(), m, e);
  // Forward, per token: LlamaRMSNorm twice, widening the bf16 stream (6h, widening class),
  // pow 8h, mean 4h, x r 8h in fp32, narrowing (6h) and weight y in bf16 (2eh); rotary on q
  // and k (x cos and rotate_half(x) sin 3e, negation e, cat 2e, sum 3e bytes an element);
  // SwiGLU's silu (2ef) and product (3ef); the two residual adds (3eh each).
  CHECK(b.forward.same_type_bytes == Approx(m * (2 * (20 * h + 6 * h + 2 * e * h) +
                                                 12 * e * (q + kv) + 5 * e * f + 2 * 3 * e * h)));
  CHECK(b.forward.widening_bytes == Approx(m * 2 * 6 * h));
  CHECK(b.forward.mixed_type_bytes == 0);
  CHECK(b.forward.kernels == 2 * 8 + 2 * 5 + 2 + 2);
  // Backward: each norm's weight part in bf16 (dy weight 2eh, dy y 3eh, its sum eh), the
  // gradient widened (6h), the fp32 part (60h, as under autocast), narrowed (6h); q, k and
  // v_proj's input gradients summed (two adds of 3eh), gate and up_proj's (one); rotary's g cos,
  // g sin (3e each), negation (e) and sum (3e); SwiGLU's 9ef; the residuals' sums (3eh each).
  CHECK(b.backward.same_type_bytes == Approx(m * (2 * (6 * e * h + 60 * h + 6 * h) + 3 * 3 * e * h +
                                                  10 * e * (q + kv) + 9 * e * f + 2 * 3 * e * h)));
  CHECK(b.backward.widening_bytes == Approx(m * 2 * 6 * h));
  CHECK(b.backward.kernels == 2 * 14 + 3 + 2 * 4 + 3 + 2);
}

TEST_CASE("eager, one type: what autograd keeps, each tensor once") {
  // GPT-2 in fp32, per token: two LayerNorm inputs with a mean and rstd (eh + 8 each); c_attn's
  // and c_fc's inputs (eh each); Q, K and V (views of c_attn's output, 3eh) and the attention's
  // output (eh); two dropout masks (h each); NewGELUActivation's x, tanh output, 1 + tanh, 0.5 x
  // and its result, c_proj's input (5ef).
  const double h = 768, f = 3072;
  CHECK(eager_uniform_saved_bytes_per_token(gpt2_block(), 4) ==
        Approx(2 * (4 * h + 8) + 2 * 4 * h + 4 * 3 * h + 4 * h + 2 * h + 5 * 4 * f));
  // Llama 3.2 1B in bf16: each RMSNorm its fp32 copy of x (4h), rsqrt (4 bytes a row) and the
  // normed bf16 x (2h); the attention's and the MLP's inputs (2h each, one tensor for all their
  // Linears); Q, K, V and the output (2q + 2kv + 2kv + 2q); SwiGLU's four bf16 tensors (8f).
  const double lh = 2048, q = 2048, kv = 512, lf = 8192;
  CHECK(eager_uniform_saved_bytes_per_token(llama_block(), 2) ==
        Approx(2 * (6 * lh + 4) + 2 * 2 * lh + 4 * q + 4 * kv + 8 * lf));
  // A block's checkpoint is the stream in its own type: bf16 here, fp32 under autocast.
  ActivationShape a;
  a.micro_batch = 4;
  a.tokens = 1024;
  a.precision = Precision::bf16;
  a.layers = 1;
  a.eager = EagerFlow{false, 2};
  const auto block = block_activations(llama_block(), a);
  CHECK(block.input.value == 2LL * 4096 * 2048);
  CHECK(block.linear.value ==
        std::llround(4096 * eager_uniform_saved_bytes_per_token(llama_block(), 2)));
}

TEST_CASE("fp32 attention: SDPA's memory-efficient kernel, or the math path for grouped heads") {
  TrainingConfig c;
  c.strategy = Strategy::ddp;
  c.precision = Precision::fp32;
  c.micro_batch = 8;
  c.seq_len = 1024;
  CHECK(attention_as_run(gpt2_block(), c) == Attention::flash);   // 12 heads, 12 key/value
  CHECK(attention_as_run(llama_block(), c) == Attention::eager);  // 32 heads, 8 key/value
  c.precision = Precision::amp_bf16;  // FlashAttention computes in 16 bits
  CHECK(attention_as_run(llama_block(), c) == Attention::flash);
  c.precision = Precision::fp32;
  // One GPT-2 block on an H100 (fp32 peak 67 TFLOP/s) with round fractions: the causal
  // forward does 2 x 8 x 1024^2 x (768 + 768) / 2 FLOPs at 0.25 of the peak, the backward 2.5
  // times that work at 0.5; 10 us a kernel.
  ComputeConstants k;
  k.gemm_efficiency = 0.5;
  k.attention_efficiency = 0.5;
  k.memory_efficiency = 0.5;
  k.kernel_overhead_s = 1e-5;
  k.fp32_attention_forward_efficiency = 0.25;
  k.fp32_attention_backward_efficiency = 0.5;
  const auto h100 = GpuCatalog::load(kData / "gpus.json").find("H100-SXM");
  const auto model = model_from_transformer(gpt2_block(), "gpt2 block", "test");
  const auto time = estimate_compute(model, c, h100, k);
  const double flops = 2.0 * 8 * 1024 * 1024 * 1536 / 2;
  CHECK(time.attention_forward_s == Approx(flops / (67e12 * 0.25) + 1e-5));
  CHECK(time.attention_s - time.attention_forward_s == Approx(2.5 * flops / (67e12 * 0.5) + 1e-5));
  // Llama's block keeps what the math path keeps: its fp32 probabilities, 4 bytes x 32 heads x
  // 1024^2 x 4 sequences, where the flash kernel keeps a 4-byte log-sum-exp per head and row.
  c.micro_batch = 4;
  const auto llama = model_from_transformer(llama_block(), "llama block", "test");
  ActivationShape a;
  a.micro_batch = 4;
  a.tokens = 1024;
  a.precision = Precision::fp32;
  a.attention = Attention::flash;
  CHECK(block_activations(llama_block(), a).scores.value == 4LL * 32 * 1024 * 4);
  // Asking for flash in fp32 gives what asking for eager attention gives.
  auto math = c;
  math.attention = Attention::eager;
  CHECK(estimate_activations(llama, c).total.value ==
        estimate_activations(llama, math).total.value);
  a.attention = Attention::eager;
  CHECK(block_activations(llama_block(), a).scores.value == 4LL * 32 * 1024 * 1024 * 4);
}

TEST_CASE("eager launches: a block's kernels are the inventory's, its GEMMs and its attention") {
  // GPT-2 under autocast: 26 element-wise kernels forward and 39 backward (counted above), four
  // Linears (c_attn, c_proj, c_fc, mlp c_proj: one GEMM forward, two backward) and the
  // attention kernel once each way. The H200 trace lists 35 and 56 a block
  // (data/measurements/h200-torch-profile): key/value cache copies and strided copies around
  // attention are not in the inventory.
  const auto gpt2 = eager_block_launches(gpt2_block(), EagerFlow{true, 2});
  CHECK(gpt2.forward == 26 + 4 + 1);
  CHECK(gpt2.backward == 39 + 8 + 1);
  // Llama 3.2 1B in bf16 without autocast: 30 and 41 element-wise kernels (above), seven Linears
  // (q, k, v, o, gate, up, down).
  const auto llama = eager_block_launches(llama_block(), EagerFlow{false, 2});
  CHECK(llama.forward == 30 + 7 + 1);
  CHECK(llama.backward == 44 + 14 + 1);
}

TEST_CASE("eager launches: the host paces a phase whose kernels are shorter than its launches") {
  // One GPT-2 block with an LM head, bf16 under autocast on an A100. With one second of host
  // time a launch, the host sets both phases: forward, the block's 31 launches and 8 outside it
  // (the token and position lookups and their sum, the final LayerNorm, the LM head and the
  // loss's three kernels); backward, the block's 48 and 9 outside (the two scatter-adds, the
  // norm's two, the head's two gradient GEMMs, the loss's three).
  auto k = load_compute_constants(kData / "compute.json");
  const auto a100 = GpuCatalog::load(kData / "gpus.json").find("A100-80GB");
  TrainingConfig c = ddp_amp_bf16(8);
  const auto model = model_from_transformer(gpt2_block(), "gpt2 block", "test");
  k.eager_forward_host_s_per_kernel = 0;
  k.autograd_backward_host_s_per_kernel = 0;
  const auto gpu_only = estimate_compute(model, c, a100, k);
  CHECK(gpu_only.host_wait_s == 0);
  k.eager_forward_host_s_per_kernel = 1;
  k.autograd_backward_host_s_per_kernel = 1;
  const auto paced = estimate_compute(model, c, a100, k);
  CHECK(paced.forward_s == Approx(39));
  CHECK(paced.backward_s == Approx(57));
  CHECK(paced.host_wait_s ==
        Approx(39 - gpu_only.forward_s + 57 - gpu_only.backward_s).epsilon(1e-12));
  CHECK(paced.gemm_s == Approx(gpu_only.gemm_s));
  CHECK(paced.elementwise_s == Approx(gpu_only.elementwise_s));
  // Full checkpointing runs the block's forward again in backward, in Python: 31 more launches
  // at the forward's host time.
  c.checkpointing = Checkpointing::full;
  CHECK(estimate_compute(model, c, a100, k).backward_s == Approx(57 + 31));
  // Fused kernels (Megatron-LM, torch.compile) are not paced by the host.
  c.layer_kernels = LayerKernels::fused;
  CHECK(estimate_compute(model, c, a100, k).host_wait_s == 0);
}

TEST_CASE("eager FSDP: hooks cost host time per wrapped module, the foreach step per tensor") {
  // One GPT-2 block with its LM head: FSDP wraps the block and the root, two modules. With the
  // launches' host time off and one second per module (forward) and three (backward), the host
  // sets both phases: 2 s and 6 s. Constants and measurements: data/measurements/h200-cuda.
  auto k = load_compute_constants(kData / "compute.json");
  const auto a100 = GpuCatalog::load(kData / "gpus.json").find("A100-80GB");
  const auto model = model_from_transformer(gpt2_block(), "gpt2 block", "test");
  TrainingConfig c = ddp_amp_bf16(8);
  c.strategy = Strategy::fsdp_full;
  k.eager_forward_host_s_per_kernel = 0;
  k.autograd_backward_host_s_per_kernel = 0;
  k.fsdp_forward_host_s_per_module = 1;
  k.fsdp_backward_host_s_per_module = 3;
  k.fsdp_optimizer_host_s_per_tensor = 1;
  const auto paced = estimate_compute(model, c, a100, k);
  CHECK(paced.forward_s == Approx(2));
  CHECK(paced.backward_s == Approx(6));
  // Full checkpointing reruns the block's forward, but not FSDP's pre-forward work: FSDP2's
  // hook returns at once in backward (the pre-backward hook has gathered the block).
  c.checkpointing = Checkpointing::full;
  CHECK(estimate_compute(model, c, a100, k).backward_s == Approx(6));
  c.checkpointing = Checkpointing::none;
  // The parameter tensors: the block's 12 (two LayerNorms' weight and bias, c_attn, c_proj,
  // c_fc and the MLP's c_proj with their biases) and the root's 4 (token and position
  // embeddings, the final LayerNorm's two; the head is tied): 16 s of host at one a tensor.
  CHECK(fsdp_optimizer_host_s(model, c, k) == Approx(16));
  // A fused step, an offloaded one, DDP and fused layer kernels have none of it.
  auto other = c;
  other.optimizer_impl = OptimizerImpl::fused;
  CHECK(fsdp_optimizer_host_s(model, other, k) == 0);
  other = c;
  other.strategy = Strategy::ddp;
  CHECK(fsdp_optimizer_host_s(model, other, k) == 0);
  CHECK(estimate_compute(model, other, a100, k).host_wait_s == 0);
  other = c;
  other.layer_kernels = LayerKernels::fused;
  CHECK(fsdp_optimizer_host_s(model, other, k) == 0);
  CHECK(estimate_compute(model, other, a100, k).host_wait_s == 0);
}
