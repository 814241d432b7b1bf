// Megatron-LM arguments for layouts, field by field against the options Megatron-LM documents
// in megatron/training/arguments.py (_add_network_size_args, _add_distributed_args,
// _add_training_args, _add_mixed_precision_args).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/export_megatron.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

// Every flag dtplan may write, as arguments.py spells it; the value kind each takes.
const std::map<std::string, bool> kTakesValue{
    {"--num-layers", true},
    {"--hidden-size", true},
    {"--ffn-hidden-size", true},
    {"--num-attention-heads", true},
    {"--kv-channels", true},
    {"--group-query-attention", false},
    {"--num-query-groups", true},
    {"--seq-length", true},
    {"--max-position-embeddings", true},
    {"--position-embedding-type", true},  // learned_absolute, rope, ...
    {"--normalization", true},            // LayerNorm, RMSNorm
    {"--swiglu", false},
    {"--untie-embeddings-and-output-weights", false},
    {"--disable-bias-linear", false},
    {"--add-qkv-bias", false},
    {"--tensor-model-parallel-size", true},
    {"--pipeline-model-parallel-size", true},
    {"--context-parallel-size", true},
    {"--cp-comm-type", true},  // p2p, all_gather, a2a, a2a+p2p
    {"--sequence-parallel", false},
    {"--num-virtual-stages-per-pipeline-rank", true},
    {"--pipeline-model-parallel-layout", true},  // TransformerConfig field, a layout string
    {"--decoder-first-pipeline-num-layers", true},
    {"--decoder-last-pipeline-num-layers", true},
    {"--account-for-embedding-in-pipeline-split", false},
    {"--account-for-loss-in-pipeline-split", false},
    {"--micro-batch-size", true},
    {"--global-batch-size", true},
    {"--recompute-granularity", true},  // full, selective
    {"--recompute-method", true},       // uniform, block
    {"--recompute-num-layers", true},
    {"--bf16", false},
    {"--fp16", false},
    {"--use-distributed-optimizer", false},
    {"--overlap-grad-reduce", false},  // arguments.py, store_true
    {"--overlap-param-gather", false},
    {"--ddp-bucket-size", true},       // type=int
    {"--grad-reduce-in-bf16", false},  // store_true
    {"--fp8-param-gather", false},     // store_true
    {"--optimizer-cpu-offload", false},
    {"--optimizer-offload-fraction", true},
    {"--use-precision-aware-optimizer", false},
    {"--optimizer", true},  // adam, sgd
    {"--sgd-momentum", true},
    {"--rotary-base", true},
    // The fields of TransformerConfig (megatron/core/transformer/transformer_config.py), which
    // arguments.py turns into flags (ArgumentGroupFactory): booleans as switches.
    {"--attention-dropout", true},
    {"--hidden-dropout", true},
    {"--qk-layernorm", false},
    {"--window-size", true},            // "left,right"
    {"--window-attn-skip-freq", true},  // megatron/training/arguments.py: N or a list
    // Latent attention and DeepSeek's router (megatron/core/transformer/transformer_config.py
    // fields, exposed by arguments.py's ArgumentGroupFactory, and arguments.py's own MLA flags).
    {"--multi-latent-attention", false},
    {"--q-lora-rank", true},
    {"--kv-lora-rank", true},
    {"--qk-head-dim", true},
    {"--qk-pos-emb-head-dim", true},
    {"--v-head-dim", true},
    {"--moe-layer-freq", true},
    {"--moe-router-score-function", true},
    {"--moe-router-enable-expert-bias", false},
    {"--moe-router-num-groups", true},
    {"--moe-router-group-topk", true},
    {"--moe-router-topk-scaling-factor", true},
    {"--mtp-num-layers", true},
    {"--overlap-moe-expert-parallel-comm", false},  // transformer_config.py fields
    {"--delay-wgrad-compute", false},
    {"--moe-flex-dispatcher-backend", true},
    {"--num-experts", true},
    {"--moe-router-topk", true},
    {"--moe-ffn-hidden-size", true},
    {"--moe-shared-expert-intermediate-size", true},
    {"--moe-shared-expert-gate", false},
    {"--moe-router-pre-softmax", false},
    {"--moe-router-load-balancing-type", true},
    {"--moe-aux-loss-coeff", true},
    {"--moe-grouped-gemm", false},
    // ModelParallelConfig (megatron/core/model_parallel_config.py) and TransformerConfig
    // fields; the MoE README's table lists the flags.
    {"--expert-model-parallel-size", true},
    {"--expert-tensor-parallel-size", true},
    {"--moe-token-dispatcher-type", true},  // allgather, alltoall, flex
    {"--moe-expert-capacity-factor", true},
    {"--moe-pad-expert-input-to-capacity", false},
    {"--fp8-format", true},  // e4m3, hybrid
    {"--fp8-recipe", true},  // delayed, tensorwise, blockwise, mxfp8, custom
};

// The arguments as flag -> value ("" for switches), checking each flag is documented and
// takes a value exactly when Megatron-LM's parser expects one.
std::map<std::string, std::string> parsed(const std::vector<std::string>& args) {
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    INFO(args[i]);
    REQUIRE(kTakesValue.count(args[i]) == 1);
    REQUIRE(out.count(args[i]) == 0);
    if (kTakesValue.at(args[i])) {
      REQUIRE(i + 1 < args.size());
      out[args[i]] = args[i + 1];
      ++i;
    } else {
      out[args[i]] = "";
    }
  }
  return out;
}

ModelDesc llama_3_8b() {
  return load_model("llama-3-8b", resolve_data_dir("") / "models");
}

cost::Layout3D layout(std::int64_t tp, std::int64_t cp, std::int64_t pp, std::int64_t dp) {
  cost::Layout3D l;
  l.tp = tp;
  l.cp = cp;
  l.pp = pp;
  l.dp = dp;
  l.seq_len = 8192;
  l.micro_batch = 1;
  l.micro_batches = 16;
  return l;
}

}  // namespace

TEST_CASE("Megatron-LM arguments: Llama 3 8B shapes, tp x cp, sequence parallel, bf16") {
  auto l = layout(2, 8, 1, 2);
  l.seq_len = 131072;
  l.sequence_parallel = true;
  const auto a = parsed(planner::megatron_arguments(llama_3_8b(), l));
  // Llama 3 8B (config.json): 32 layers, hidden 4096, MLP 14336, 32 heads, 8 KV heads, RoPE,
  // RMSNorm, SwiGLU, untied head, no biases.
  CHECK(a.at("--num-layers") == "32");
  CHECK(a.at("--hidden-size") == "4096");
  CHECK(a.at("--ffn-hidden-size") == "14336");
  CHECK(a.at("--num-attention-heads") == "32");
  CHECK(a.count("--kv-channels") == 0);  // 4096 / 32 = 128, Megatron's default
  CHECK(a.count("--group-query-attention") == 1);
  CHECK(a.at("--num-query-groups") == "8");
  CHECK(a.at("--seq-length") == "131072");
  CHECK(a.at("--max-position-embeddings") == "131072");
  CHECK(a.at("--position-embedding-type") == "rope");
  CHECK(a.at("--normalization") == "RMSNorm");
  CHECK(a.count("--swiglu") == 1);
  CHECK(a.count("--untie-embeddings-and-output-weights") == 1);
  CHECK(a.count("--disable-bias-linear") == 1);
  CHECK(a.at("--rotary-base") == "500000");   // rope_theta 500000.0; an int for Megatron-LM
  CHECK(a.at("--attention-dropout") == "0");  // Llama has none; Megatron-LM defaults to 0.1
  CHECK(a.at("--hidden-dropout") == "0");
  CHECK(a.count("--num-experts") == 0);
  CHECK(a.at("--tensor-model-parallel-size") == "2");
  CHECK(a.at("--context-parallel-size") == "8");
  CHECK(a.at("--cp-comm-type") == "p2p");
  CHECK(a.at("--pipeline-model-parallel-size") == "1");
  CHECK(a.count("--sequence-parallel") == 1);
  CHECK(a.at("--micro-batch-size") == "1");
  CHECK(a.at("--global-batch-size") == "32");  // 1 x 16 x dp 2
  CHECK(a.count("--bf16") == 1);
  CHECK(a.count("--use-distributed-optimizer") == 1);
  CHECK(a.count("--recompute-granularity") == 0);
  CHECK(a.count("--overlap-grad-reduce") == 0);  // Megatron-LM's default: reduced after backward
  l.overlap_grad_reduce = l.overlap_param_gather = true;
  const auto overlapped = parsed(planner::megatron_arguments(llama_3_8b(), l));
  CHECK(overlapped.count("--overlap-grad-reduce") == 1);
  CHECK(overlapped.count("--overlap-param-gather") == 1);
  CHECK(overlapped.count("--ddp-bucket-size") == 0);  // Megatron-LM's own default
  CHECK(overlapped.count("--grad-reduce-in-bf16") == 0);
  l.ddp_bucket_params = 134217728;
  l.grad_reduce_bf16 = true;
  const auto sized = parsed(planner::megatron_arguments(llama_3_8b(), l));
  CHECK(sized.at("--ddp-bucket-size") == "134217728");
  CHECK(sized.count("--grad-reduce-in-bf16") == 1);
  CHECK(sized.count("--fp8-param-gather") == 0);
  l.fp8 = Fp8Recipe::tensorwise;
  l.fp8_param_gather = true;
  CHECK(parsed(planner::megatron_arguments(llama_3_8b(), l)).count("--fp8-param-gather") == 1);
}

TEST_CASE("Megatron-LM arguments: interleaving, full recompute, fp16, GPT-2 shapes") {
  const auto data = resolve_data_dir("");
  const auto gpt2 = load_model("gpt2", data / "models");
  auto l = layout(1, 1, 4, 2);
  l.seq_len = 1024;
  l.interleave = 3;  // 12 layers over 4 stages x 3 chunks
  l.recompute = Checkpointing::full;
  l.precision = Precision::fp16;
  l.sharding = cost::DpSharding::none;
  const auto a = parsed(planner::megatron_arguments(gpt2, l));
  CHECK(a.at("--num-virtual-stages-per-pipeline-rank") == "3");
  CHECK(a.at("--recompute-granularity") == "full");
  CHECK(a.at("--recompute-method") == "uniform");
  CHECK(a.at("--recompute-num-layers") == "1");
  CHECK(a.count("--fp16") == 1);
  CHECK(a.count("--bf16") == 0);
  CHECK(a.count("--use-distributed-optimizer") == 0);
  // GPT-2: learned positions, LayerNorm, biases everywhere, tied head, 12 heads of 64.
  CHECK(a.at("--position-embedding-type") == "learned_absolute");
  CHECK(a.at("--normalization") == "LayerNorm");
  CHECK(a.count("--disable-bias-linear") == 0);
  CHECK(a.count("--untie-embeddings-and-output-weights") == 0);
  CHECK(a.count("--group-query-attention") == 0);
  CHECK(a.at("--max-position-embeddings") == "1024");
  // GPT-2's dropouts are 0.1, Megatron-LM's defaults: nothing to say. Other values are said.
  CHECK(a.count("--attention-dropout") == 0);
  CHECK(a.count("--hidden-dropout") == 0);
  auto other = gpt2;
  other.transformer->attention_dropout = 0.05;
  const auto b = parsed(planner::megatron_arguments(other, l));
  CHECK(b.at("--attention-dropout") == "0.05");
  CHECK(b.count("--hidden-dropout") == 0);
}

TEST_CASE("Megatron-LM arguments: uneven stages as the embedding-and-loss rule or first/last") {
  auto spec = *llama_3_8b().transformer;
  spec.num_layers = 126;  // Llama 3 405B's depth over 16 stages: 7, 8 x 14, 7
  const auto deep = model_from_transformer(spec, "llama-126", "test");
  auto l = layout(8, 1, 16, 1);
  const auto a = parsed(planner::megatron_arguments(deep, l));
  CHECK(a.count("--account-for-embedding-in-pipeline-split") == 1);
  CHECK(a.count("--account-for-loss-in-pipeline-split") == 1);
  CHECK(a.count("--decoder-first-pipeline-num-layers") == 0);
  // Splits of the user's over 12 stages: 3 + 10 x 12 + 3 = 126 is Megatron's first/last
  // form; an uneven middle (9, 11, 12 x 7, 16) is its pipeline layer layout, stage by stage.
  l.pp = 12;
  l.stage_layers = {3, 9, 11, 12, 12, 12, 12, 12, 12, 12, 16, 3};
  std::string layer_layout = "E";
  for (std::size_t i = 0; i < l.stage_layers.size(); ++i)
    layer_layout +=
        std::string(static_cast<std::size_t>(l.stage_layers[i]), 't') + (i < 11 ? "|" : "L");
  CHECK(parsed(planner::megatron_arguments(deep, l)).at("--pipeline-model-parallel-layout") ==
        layer_layout);
  l.stage_layers = {3, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 3};
  const auto b = parsed(planner::megatron_arguments(deep, l));
  CHECK(b.at("--decoder-first-pipeline-num-layers") == "3");
  CHECK(b.at("--decoder-last-pipeline-num-layers") == "3");
  CHECK(b.count("--account-for-embedding-in-pipeline-split") == 0);
}

TEST_CASE("Megatron-LM arguments: the optimizer, adam or sgd with its momentum") {
  const auto m = load_model("llama-3-8b", resolve_data_dir("") / "models");
  auto l = layout(2, 1, 1, 4);
  CHECK(parsed(planner::megatron_arguments(m, l)).at("--optimizer") == "adam");  // AdamW
  l.optimizer = Optimizer::sgd_momentum;  // Megatron-LM's --sgd-momentum defaults to 0.9
  auto a = parsed(planner::megatron_arguments(m, l));
  CHECK(a.at("--optimizer") == "sgd");
  CHECK(a.count("--sgd-momentum") == 0);
  l.optimizer = Optimizer::sgd;  // no momentum buffer
  a = parsed(planner::megatron_arguments(m, l));
  CHECK(a.at("--optimizer") == "sgd");
  CHECK(a.at("--sgd-momentum") == "0");
  CHECK(a.count("--optimizer-cpu-offload") == 0);
  // The optimizer on the CPU: Megatron Core's offload flags, the whole optimizer on the host.
  l.optimizer = Optimizer::adamw;
  l.offload = Offload::optimizer;
  a = parsed(planner::megatron_arguments(m, l));
  CHECK(a.count("--optimizer-cpu-offload") == 1);
  CHECK(a.at("--optimizer-offload-fraction") == "1.0");
  CHECK(a.count("--use-precision-aware-optimizer") == 1);
}

TEST_CASE("Megatron-LM arguments: schedules it does not run are refused, the file is bash") {
  auto l = layout(1, 1, 4, 1);
  l.schedule = cost::PipelineSchedule::zb_h1;
  CHECK_THROWS_WITH(planner::megatron_arguments(llama_3_8b(), l),
                    Contains("Megatron-LM runs 1F1B and interleaved 1F1B"));
  l.schedule.reset();
  const auto file = planner::megatron_args_file(llama_3_8b(), l);
  CHECK_THAT(file, Contains("DTPLAN_MEGATRON_ARGS=(\n"));
  CHECK_THAT(file, Contains("\n  --tensor-model-parallel-size 1\n"));
  CHECK_THAT(file, Contains("\n  --swiglu\n"));
  CHECK(file.substr(file.size() - 2) == ")\n");
}

TEST_CASE("Megatron-LM arguments: a mixture of experts as Qwen1.5-MoE-A2.7B configures it") {
  // config.json: 60 experts of 1408, 4 per token, a gated shared expert of 5632, q/k/v biases,
  // norm_topk_prob false (softmax over all 60, the top 4 not renormalised: Megatron-LM's
  // pre-softmax routing), router_aux_loss_coef 0.001, rope_theta 1e6, a 32768-token window
  // that use_sliding_window false leaves off.
  const auto m = load_model("qwen1.5-moe-a2.7b", resolve_data_dir("") / "models");
  auto l = layout(2, 1, 1, 4);
  l.seq_len = 4096;
  const auto a = parsed(planner::megatron_arguments(m, l));
  CHECK(a.at("--num-experts") == "60");
  CHECK(a.at("--moe-router-topk") == "4");
  CHECK(a.at("--moe-ffn-hidden-size") == "1408");
  CHECK(a.at("--moe-shared-expert-intermediate-size") == "5632");
  CHECK(a.count("--moe-shared-expert-gate") == 1);
  CHECK(a.count("--moe-router-pre-softmax") == 1);
  CHECK(a.at("--moe-router-load-balancing-type") == "aux_loss");
  CHECK(a.at("--moe-aux-loss-coeff") == "0.001");
  CHECK(a.count("--moe-grouped-gemm") == 1);
  CHECK(a.count("--add-qkv-bias") == 1);
  CHECK(a.at("--rotary-base") == "1000000");
  CHECK(a.count("--window-size") == 0);
  // Qwen3-30B-A3B renormalises its top 8 (norm_topk_prob true) and norms q and k.
  const auto q3 = parsed(
      planner::megatron_arguments(load_model("qwen3-30b-a3b", resolve_data_dir("") / "models"), l));
  CHECK(q3.count("--moe-router-pre-softmax") == 0);
  CHECK(q3.count("--qk-layernorm") == 1);
  CHECK(q3.at("--kv-channels") == "128");  // 32 heads x 128 = 4096 against hidden 2048
  // Phi-3-mini's 2047-token window at 4096 tokens: Transformer Engine's (2046, 0).
  const auto phi = parsed(
      planner::megatron_arguments(load_model("phi-3-mini", resolve_data_dir("") / "models"), l));
  CHECK(phi.at("--window-size") == "2046,0");
  CHECK(phi.count("--window-attn-skip-freq") == 0);  // every layer windowed
  // The same window with full attention on every second layer (as Gemma 2 and gpt-oss lay
  // theirs out): Megatron-LM's --window-attn-skip-freq 2 makes layers 2, 4, ... full.
  auto alternating = load_model("phi-3-mini", resolve_data_dir("") / "models");
  alternating.transformer->full_attention_every = 2;
  CHECK(parsed(planner::megatron_arguments(alternating, l)).at("--window-attn-skip-freq") == "2");
  // Gemma 2's GeGLU, output norms and soft-caps, and gpt-oss's sinks and router bias, have no
  // Megatron-LM argument: exporting would train another model, so the export says what is
  // missing.
  CHECK_THROWS_WITH(
      planner::megatron_arguments(load_model("gemma-2-9b", resolve_data_dir("") / "models"), l),
      Contains("export_megatron") && Contains("a GeGLU MLP") &&
          Contains("norms on the sub-layers' outputs") && Contains("tanh soft-capping"));
  CHECK_THROWS_WITH(
      planner::megatron_arguments(load_model("gpt-oss-20b", resolve_data_dir("") / "models"), l),
      Contains("attention sinks") && Contains("a router with a bias"));
}

TEST_CASE("Megatron-LM arguments: expert parallelism folded beside tensor parallelism") {
  // Mixtral 8x7B at tp 2 x dp 8 with its 8 experts over ep 8, each whole (etp 1): tokens go
  // to the experts by all-to-all, Megatron-LM's alltoall dispatcher (its default, allgather,
  // gathers every token over tp x ep); a MoE layer under tp needs sequence parallelism.
  const auto m = load_model("mixtral-8x7b", resolve_data_dir("") / "models");
  auto l = layout(2, 1, 1, 8);
  l.seq_len = 4096;
  l.sequence_parallel = true;
  l.ep = 8;
  l.etp = 1;
  const auto a = parsed(planner::megatron_arguments(m, l));
  CHECK(a.at("--expert-model-parallel-size") == "8");
  CHECK(a.at("--expert-tensor-parallel-size") == "1");
  CHECK(a.at("--moe-token-dispatcher-type") == "alltoall");
  CHECK(a.count("--sequence-parallel") == 1);
  CHECK_THAT(planner::megatron_args_file(m, l), Contains("experts ep 8 x etp 1"));
  CHECK(a.count("--moe-expert-capacity-factor") == 0);  // dropless
  l.capacity_factor = 1.25;
  const auto padded = parsed(planner::megatron_arguments(m, l));
  CHECK(padded.at("--moe-expert-capacity-factor") == "1.25");
  CHECK(padded.count("--moe-pad-expert-input-to-capacity") == 1);
  l.capacity_factor = 0;
  // Without expert parallelism the experts split over tp, gathered as Megatron-LM's default.
  l.ep = 1;
  l.etp = 0;
  const auto plain = parsed(planner::megatron_arguments(m, l));
  CHECK(plain.at("--expert-model-parallel-size") == "1");
  CHECK(plain.at("--expert-tensor-parallel-size") == "2");
  CHECK(plain.count("--moe-token-dispatcher-type") == 0);
}

TEST_CASE("Megatron-LM arguments: an FP8 recipe as Transformer Engine runs it") {
  // --fp8-format hybrid (E4M3 forward, E5M2 gradients) and the recipe by Megatron-LM's name;
  // torchao's rowwise is refused for Megatron-LM by the layout's own check.
  const auto m = llama_3_8b();
  auto l = layout(2, 1, 1, 4);
  l.sequence_parallel = true;
  CHECK(parsed(planner::megatron_arguments(m, l)).count("--fp8-format") == 0);
  for (const auto recipe : {Fp8Recipe::delayed, Fp8Recipe::tensorwise, Fp8Recipe::blockwise}) {
    l.fp8 = recipe;
    const auto a = parsed(planner::megatron_arguments(m, l));
    CHECK(a.at("--fp8-format") == "hybrid");
    CHECK(a.at("--fp8-recipe") == std::string(name_of(recipe)));
  }
}

TEST_CASE("Megatron-LM arguments: DeepSeek-V3's latent attention, router and MTP") {
  // config.json: q_lora_rank 1536, kv_lora_rank 512, qk_nope/rope/v head dims 128/64/128;
  // 3 dense blocks then 58 sparse (Megatron-LM's --moe-layer-freq list); sigmoid scores with
  // the per-expert bias (noaux_tc), 8 groups of which a token uses 4, routed_scaling_factor
  // 2.5, seq_aux with aux_loss_alpha 0.001; one MTP module.
  const auto m = load_model("deepseek-v3", resolve_data_dir("") / "models");
  auto l = layout(1, 1, 1, 8);
  l.seq_len = 4096;
  l.ep = 8;
  const auto a = parsed(planner::megatron_arguments(m, l));
  CHECK(a.count("--multi-latent-attention") == 1);
  CHECK(a.at("--q-lora-rank") == "1536");
  CHECK(a.at("--kv-lora-rank") == "512");
  CHECK(a.at("--qk-head-dim") == "128");
  CHECK(a.at("--qk-pos-emb-head-dim") == "64");
  CHECK(a.at("--v-head-dim") == "128");
  CHECK(a.count("--group-query-attention") == 0);  // exclusive with MLA in Megatron-LM
  CHECK(a.count("--kv-channels") == 0);
  CHECK(a.at("--moe-layer-freq") == "([0]*3+[1]*58)");
  CHECK(a.at("--moe-router-score-function") == "sigmoid");
  CHECK(a.count("--moe-router-enable-expert-bias") == 1);
  CHECK(a.at("--moe-router-num-groups") == "8");
  CHECK(a.at("--moe-router-group-topk") == "4");
  CHECK(a.at("--moe-router-topk-scaling-factor") == "2.5");
  CHECK(a.at("--moe-router-load-balancing-type") == "seq_aux_loss");
  CHECK(a.at("--moe-aux-loss-coeff") == "0.001");
  CHECK(a.at("--moe-shared-expert-intermediate-size") == "2048");
  CHECK(a.at("--ffn-hidden-size") == "18432");
  CHECK(a.at("--mtp-num-layers") == "1");
  CHECK(a.count("--overlap-moe-expert-parallel-comm") == 0);
  // Overlapped all-to-alls: Megatron-LM's flag and the delayed weight gradients it pairs with.
  l.overlap_ep_comm = true;
  const auto overlapped = parsed(planner::megatron_arguments(m, l));
  CHECK(overlapped.count("--overlap-moe-expert-parallel-comm") == 1);
  CHECK(overlapped.count("--delay-wgrad-compute") == 1);
  l.overlap_ep_comm = false;
  // DeepEP: the flex dispatcher with its DeepEP backend in place of alltoall.
  l.deepep = true;
  const auto deepep = parsed(planner::megatron_arguments(m, l));
  CHECK(deepep.at("--moe-token-dispatcher-type") == "flex");
  CHECK(deepep.at("--moe-flex-dispatcher-backend") == "deepep");
  l.deepep = false;
  // The args file is bash: the layer pattern's parentheses are quoted.
  CHECK_THAT(planner::megatron_args_file(m, l),
             Contains("\n  --moe-layer-freq '([0]*3+[1]*58)'\n"));
}

TEST_CASE("Megatron-LM arguments: recompute modules as its nargs list") {
  // DeepSeek-V3's H100 recipe (Megatron-Bridge perf_recipes/deepseek/h100/deepseek_v3.py):
  // selective recomputation of mla_up_proj and mlp, given as `--recompute-modules mla_up_proj
  // mlp` (TransformerConfig.recompute_modules, a list: nargs "+").
  const auto m = load_model("deepseek-v3", resolve_data_dir("") / "models");
  auto l = layout(1, 1, 1, 8);
  l.seq_len = 4096;
  l.ep = 8;
  l.recompute = Checkpointing::selective;
  l.recompute_modules = parse_recompute_modules("mlp,mla_up_proj");
  const auto a = planner::megatron_arguments(m, l);
  const auto at = std::find(a.begin(), a.end(), "--recompute-modules");
  REQUIRE(at != a.end());
  REQUIRE(a.end() - at >= 3);
  CHECK(*(at + 1) == "mla_up_proj");
  CHECK(*(at + 2) == "mlp");
  CHECK((at + 3 == a.end() || (at + 3)->rfind("--", 0) == 0));
  CHECK(std::count(a.begin(), a.end(), "selective") == 1);
  // The default set is Megatron-LM's own default: no list; no module at all is no
  // recomputation (its list cannot be empty).
  l.recompute_modules = RecomputeModules{};
  const auto plain = parsed(planner::megatron_arguments(m, l));
  CHECK(plain.at("--recompute-granularity") == "selective");
  l.recompute_modules = RecomputeModules::empty();
  CHECK(parsed(planner::megatron_arguments(m, l)).count("--recompute-granularity") == 0);
}

TEST_CASE("Megatron-LM arguments: uneven interleaved stages as a pipeline layer layout") {
  // DeepSeek-V3 at pp 8 x v 4 over 7, 8 x 6, 6 layers: 7 and 6 do not divide into 4 chunks,
  // which --decoder-first/last-pipeline-num-layers require of an interleaved pipeline, so the
  // export writes Megatron-LM's layout, chunk r x pp + k on stage k: stage 0's 7 layers as
  // 1, 2, 2, 2 (the shortfall on its first chunk), stage 7's 6 as 2, 2, 1, 1 (on its last),
  // the others' 8 as 2 each; the embedding first, the MTP module and the loss last.
  const auto m = load_model("deepseek-v3", resolve_data_dir("") / "models");
  auto l = layout(1, 1, 8, 1);
  l.seq_len = 4096;
  l.interleave = 4;
  l.micro_batches = 8;
  l.stage_layers = {7, 8, 8, 8, 8, 8, 8, 6};
  const auto a = parsed(planner::megatron_arguments(m, l));
  std::string expected = "Et|";
  for (int r = 0; r < 4; ++r) {
    for (int k = r == 0 ? 1 : 0; k < 8; ++k) {
      const bool short_last = r >= 2 && k == 7;
      expected += short_last ? "t" : "tt";
      expected += r == 3 && k == 7 ? "mL" : "|";
    }
  }
  CHECK(a.at("--pipeline-model-parallel-layout") == expected);
  CHECK(expected.size() == 1 + 61 + 31 + 2);  // E, 61 layers, 31 bars, m and L
  // The layout implies the virtual stages; Megatron-LM refuses the flags beside it.
  CHECK(a.count("--num-virtual-stages-per-pipeline-rank") == 0);
  CHECK(a.count("--decoder-first-pipeline-num-layers") == 0);
  // Without interleaving the first and last stages' layers say it.
  l.interleave = 1;
  const auto flat = parsed(planner::megatron_arguments(m, l));
  CHECK(flat.at("--decoder-first-pipeline-num-layers") == "7");
  CHECK(flat.at("--decoder-last-pipeline-num-layers") == "6");
  CHECK(flat.count("--pipeline-model-parallel-layout") == 0);
  // The args file quotes the layout's bars for bash.
  l.interleave = 4;
  CHECK_THAT(planner::megatron_args_file(m, l),
             Contains("--pipeline-model-parallel-layout '" + expected + "'"));
}
