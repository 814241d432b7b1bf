// Tests for cli/src/memory_command.cpp (and memory_report.cpp): `dtplan memory` end to end
// through run_cli, JSON figures checked against hand-derived values, and every class of bad
// input giving a one-line error and exit code 1.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

using Catch::Contains;

namespace {
using Result = dtplan::test::CliResult;
Result run(std::vector<std::string> args) {
  return dtplan::test::run_dtplan(std::move(args));
}

std::string bad(const std::string& name) {
  return std::string(DTPLAN_TEST_DATA_DIR) + "/bad/" + name;
}

const nlohmann::json& by_strategy(const nlohmann::json& j, const std::string& s) {
  for (const auto& e : j["estimates"]) {
    if (e["strategy"] == s) return e;
  }
  FAIL("no estimate for " << s);
  return j;
}
}  // namespace

TEST_CASE("the README example compares all strategies for Llama 2 7B") {
  const auto r =
      run({"memory", "--model", "llama-2-7b", "--gpus", "8", "--strategy", "all", "--precision",
           "bf16", "--micro-batch", "1", "--seq-len", "4096", "--gpu", "A100-80GB", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schema_version"] == 1);
  CHECK(j["generated_by"]["command"] == "memory");
  CHECK(j["params"] == 6'738'415'616);
  CHECK(j["estimates"].size() == 9);
  const std::int64_t a = 6'738'415'616;
  const auto& ddp = by_strategy(j, "ddp");
  // 18 B a parameter of states (2 weights, 4 master, 2 gradients, 8 Adam, 2 DDP buckets); the
  // peak is the optimizer step, the activations freed, with foreach Adam's square-root list
  // (4 B a parameter) beside them: 22 B a parameter beyond NCCL's buffers, the gradients row
  // holding what is not in the activations.
  CHECK(ddp["per_gpu"]["model_states"].get<std::int64_t>() +
            ddp["per_gpu"]["activations"].get<std::int64_t>() ==
        22 * a);
  CHECK(ddp["fits"] == false);
  CHECK(ddp["capacity"] == 85'899'345'920);
  const auto& z3 = by_strategy(j, "zero3");
  CHECK(z3["per_gpu"]["weights"] == 2 * (a / 8));
  CHECK(z3["per_gpu"]["model_states"] == 16 * (a / 8));
  // FlashAttention by default: 32 blocks x (629,145,600 + the 524,288-byte log-sum-exp) +
  // 1,377,861,632 outside the blocks (derivations in test_activations.cpp)
  CHECK(z3["per_gpu"]["activations"] == 32 * (629'145'600LL + 524'288) + 1'377'861'632);
  CHECK(z3["fits"] == true);  // 12.5 GiB of states and 20 GiB of activations in 80 GiB
  const auto& g = z3["per_gpu"];
  CHECK(g["total"].get<std::int64_t>() ==
        g["model_states"].get<std::int64_t>() + g["activations"].get<std::int64_t>() +
            g["buffers"].get<std::int64_t>() + g["overhead"].get<std::int64_t>());
  CHECK(z3["margin"].get<std::int64_t>() == 85'899'345'920 - g["total"].get<std::int64_t>());
}

TEST_CASE("the human comparison table names every strategy and a verdict") {
  const auto r = run({"memory", "--model", "llama-2-7b", "--gpus", "8", "--precision", "bf16",
                      "--seq-len", "4096", "--gpu", "A100-80GB", "--checkpointing", "full"});
  REQUIRE(r.code == 0);
  for (const char* s :
       {"dp", "ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-grad-op", "fsdp-hybrid",
        "fsdp-no-shard", "peak total", "fits A100-80GB", "verdict:"}) {
    CHECK_THAT(r.out, Contains(s));
  }
}

TEST_CASE("one strategy in detail explains each component") {
  const auto r = run({"memory", "--params", "1e9", "--gpus", "8", "--strategy", "zero2",
                      "--precision", "fp32", "--optimizer", "adam"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("(1/8 shard)") && Contains("8 B/param") &&
                        Contains("activations and gathered units are not modelled") &&
                        Contains("give --model for layer shapes"));
  const auto j =
      nlohmann::json::parse(run({"memory", "--params", "1e9", "--gpus", "8", "--strategy", "zero2",
                                 "--precision", "fp32", "--optimizer", "adam", "--json"})
                                .out);
  CHECK(j["per_gpu"]["model_states"] == 5'500'000'000);
  // The library marks the field its note names; the CLI shows its flag, in JSON too.
  CHECK_THAT(j["notes"].dump(), Contains("give --model for layer shapes"));
  // FSDP's no_sync with accumulation: the gradients' explanation names the flag that avoids it.
  const auto f =
      nlohmann::json::parse(run({"memory", "--model", "gpt2", "--gpus", "8", "--strategy",
                                 "fsdp-full", "--grad-accum", "4", "--json"})
                                .out);
  CHECK_THAT(f["explain"]["gradients"].get<std::string>(),
             Contains("--sync-every-micro-step avoids it"));
  CHECK(j["fits"].is_null());
  CHECK(j["per_cpu"]["total"] == 0);
}

TEST_CASE("the precision line says where the fp32 weights are") {
  // Autocast keeps fp32 weights that the optimizer updates (no master copy, as the master
  // weights row says); the frameworks' own bf16 keeps an fp32 master beside 16-bit weights.
  const auto amp =
      run({"memory", "--model", "gpt2", "--strategy", "ddp", "--precision", "amp-bf16"});
  REQUIRE(amp.code == 0);
  CHECK_THAT(amp.out, Contains("amp-bf16 mixed precision (fp32 weights, no master copy)"));
  CHECK_THAT(amp.out, !Contains("fp32 master weights)"));
  const auto bf16 =
      run({"memory", "--model", "gpt2", "--strategy", "zero2", "--precision", "bf16"});
  CHECK_THAT(bf16.out, Contains("bf16 mixed precision (fp32 master weights)"));
}

TEST_CASE("layer-list presets and offload through the CLI") {
  const auto r = run({"memory", "--model", "mnist-convnet", "--gpus", "2", "--strategy", "ddp",
                      "--precision", "fp32", "--micro-batch", "64", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["params"] == 29'034);
  CHECK(j["per_gpu"]["activations"] == 64 * (172'520 + 37'632));
  const auto off =
      nlohmann::json::parse(run({"memory", "--params", "8B", "--gpus", "8", "--strategy", "zero3",
                                 "--offload", "optimizer+params", "--json"})
                                .out);
  CHECK(off["per_gpu"]["model_states"] == 0);
  CHECK(off["per_cpu"]["total"] == 18LL * 1'000'000'000);  // (2 + 4 + 8 + 4) B x 8e9 / 8
}

TEST_CASE("overrides of overhead constants are applied and recorded") {
  const auto j = nlohmann::json::parse(
      run({"memory", "--params", "1B", "--gpus", "1", "--strategy", "ddp", "--overhead",
           "cuda_context_bytes=0", "--overhead", "allocator_slack_fraction=0", "--json"})
          .out);
  CHECK(j["overheads"]["cuda_context_bytes"] == 0);
  CHECK(j["per_gpu"]["overhead"] == 0);
  CHECK(j["per_gpu"]["total"] == 18'000'000'000);  // bf16 + AdamW, one GPU: no NCCL buffers
}

TEST_CASE("all-strategies mode skips those that cannot run, with the reason") {
  const auto j = nlohmann::json::parse(
      run({"memory", "--params", "1B", "--gpus", "12", "--gpus-per-node", "8", "--json"}).out);
  bool hybrid_skipped = false, dp_skipped = false;
  for (const auto& s : j["skipped"]) {
    hybrid_skipped |= s["strategy"] == "fsdp-hybrid";
    dp_skipped |= s["strategy"] == "dp";
  }
  CHECK(hybrid_skipped);
  CHECK(dp_skipped);
  CHECK(j["estimates"].size() == 7);
}

TEST_CASE("bad input: one line, exit code 1, names the input and the problem") {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const Case cases[] = {
      {{"--model", "llama-2-7"}, "did you mean: llama-2-7b"},
      {{"--model", bad("malformed.json")}, "malformed.json:7:"},
      {{"--model", bad("unknown_key.json")}, "unknown_key.json:7: /layers/0/paddding: unknown key"},
      {{"--model", bad("zero_size.json")},
       "/layers/0/out_features: must be a positive integer, got 0"},
      {{"--model", bad("hf_bad_type.json")},
       "/num_hidden_layers: expected an integer, got a string"},
      {{"--params", "1B", "--gpus", "0"}, "--gpus: must be a positive integer, got 0"},
      {{"--params", "1B", "--micro-batch", "-2"},
       "--micro-batch: must be a positive integer, got -2"},
      {{"--params", "1B", "--seq-len", "0"}, "--seq-len: must be a positive integer"},
      {{"--params", "1B", "--gpus", "12", "--strategy", "fsdp-hybrid"}, "not a multiple of the 8"},
      {{"--params", "5e18", "--strategy", "ddp"}, "overflows a 64-bit count"},
      {{"--params", "lots"}, "--params 'lots': not a parameter count"},
      {{"--params", "1B", "--model", "gpt2"}, "give one of them, not both"},
      {{"--gpus", "8"}, "no model: give --model"},
      {{"--params", "1B", "--gpu", "A100-81GB"}, "unknown GPU 'A100-81GB'"},
      {{"--params", "1B", "--strategy", "zero4"}, "did you mean: zero1"},
      {{"--params", "1B", "--precision", "fp9"}, "unknown precision 'fp9'"},
      // FP8 is bf16 with FP8 GEMMs, modelled for the layouts only.
      {{"--params", "1B", "--precision", "fp8"},
       "FP8 GEMMs (--precision fp8 or --fp8-recipe; delayed scaling here) are modelled for the "
       "layouts"},
      {{"--params", "1B", "--strategy", "ddp", "--offload", "optimizer"},
       "--offload optimizer needs"},
      {{"--params", "1B", "--overhead", "nccl=1"}, "unknown overhead constant 'nccl'"},
      {{"--model", "gpt2", "--seq-len", "4096"}, "longer than the model's 1024 learned positions"},
      {{"--params", "1B", "--gpus", "99999999999999999999"},
       "--gpus: 9223372036854775807 is beyond"},
      {{"--params", "1.5"}, "not a whole number of parameters"},
      {{"--model", bad("deep.json")}, "deep.json: JSON nested deeper than 64 levels"},
      {{"--model", bad("hf_malformed.json")}, "hf_malformed.json:4:"},
      {{"--params", "1B", "--strategy", "zero2", "--precision", "amp-bf16"},
       "modelled for dp and ddp"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"memory"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run(args);
    INFO(c.expected);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Contains(c.expected));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("command-line syntax errors: one line, exit code 2, --help exits 0") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"memory", "--gpus", "many"}, {"memory", "--no-such-flag"}, {"memroy"}}) {
    const auto r = run(args);
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Contains("dtplan: error:"));
  }
  CHECK_THAT(run({"memroy"}).err, Contains("unknown command 'memroy' (did you mean: memory?)"));
  const auto help = run({"memory", "--help"});
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Contains("--strategy") && Contains("--grad-bucket-view"));
}

// Issue 14, item 15: ZeRO-3 with optimizer and parameter offload keeps 2 + 4 + 8 + 4 = 18 B
// per parameter on the hosts (16-bit shard, fp32 master, Adam moments, fp32 gradients); on
// 4 GPUs of one node that is 18 x params per node: 1,156 GiB for Llama-2-70B.
TEST_CASE("memory checks offloaded states against host memory per node") {
  constexpr std::int64_t GiB = std::int64_t{1} << 30;
  const std::vector<std::string> args = {
      "memory", "--model",   "llama-2-70b",      "--gpus", "4",        "--strategy",
      "zero3",  "--offload", "optimizer+params", "--gpu",  "RTX-4090", "--json"};
  auto with = [&args](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return nlohmann::json::parse(run(a).out);
  };
  const auto small = with({"--host-memory", "512GiB"});
  const auto params = small["params"].get<std::int64_t>();
  CHECK(params == 68'976'648'192);
  CHECK(small["cpu_per_node"] == 18 * params);  // 1,241,579,667,456 B = 1,156.3 GiB
  CHECK(small["host_capacity"] == 512 * GiB);
  CHECK(small["host_fits"] == false);
  CHECK(small["host_margin"] == 512 * GiB - 18 * params);
  CHECK(small["fits"] == false);
  const auto big = with({"--host-memory", "2TiB"});
  CHECK(big["host_fits"] == true);
  CHECK(big["host_margin"] == 2048 * GiB - 18 * params);
  // Not given: the documented default of 512 GiB per node.
  CHECK(with({})["host_capacity"] == 512 * GiB);
}

TEST_CASE("memory says a configuration that fits the GPU does not fit host memory") {
  // Llama-2-7B, ZeRO-3 offloading optimizer and parameters on 8 GPUs of a node: the GPU holds
  // only what is gathered; the hosts hold 18 x 6,738,415,616 B = 112.96 GiB per node.
  const auto r = run({"memory", "--model", "llama-2-7b", "--gpus", "8", "--strategy", "zero3",
                      "--offload", "optimizer+params", "--seq-len", "1024", "--gpu", "A100-80GB",
                      "--host-memory", "64GiB"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("fits on A100-80GB with") &&
                        Contains("; but does NOT fit host memory: 112.96 GiB per node needed, "
                                 "64.00 GiB (--host-memory), short by 48.96 GiB"));
  const auto all = run({"memory", "--model", "llama-2-7b", "--gpus", "8", "--offload",
                        "optimizer+params", "--seq-len", "1024", "--gpu", "A100-80GB"});
  REQUIRE(all.code == 0);
  CHECK_THAT(all.out, Contains("fits host 512.00 GiB (assumed)"));
  CHECK_THAT(run({"memory", "--model", "gpt2", "--host-memory", "0"}).err,
             Contains("--host-memory '0': must be at least 1 byte"));
}

// Issue 15: `dtplan memory` takes the layout flags `dtplan estimate` takes.
TEST_CASE("memory of a layout: Llama 2 70B, tp 8 x pp 4 x dp 4, the first stage by hand") {
  const auto r = run({"memory",
                      "--model",
                      "llama-2-70b",
                      "--gpus",
                      "128",
                      "--gpus-per-node",
                      "8",
                      "--gpu",
                      "H100-SXM",
                      "--tp",
                      "8",
                      "--pp",
                      "4",
                      "--interleave",
                      "2",
                      "--sp",
                      "--grad-accum",
                      "32",
                      "--seq-len",
                      "4096",
                      "--checkpointing",
                      "selective",
                      "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  // Llama 2 70B per layer: Q and O 8192^2 each, K and V 8192 x 1024 each (8 key/value heads
  // of 128), MLP 3 x 8192 x 28672 = 855,638,016 matrix parameters, / tp 8 = 106,954,752, plus
  // two norms of 8192 kept whole = 106,971,136; 80 / 4 = 20 layers on the first stage =
  // 2,139,422,720, plus 1/8 of the 32,000 x 8192 embedding (32,768,000) = 2,172,190,720.
  const std::int64_t params = 2'172'190'720;
  CHECK(j["params_per_gpu"] == params);
  CHECK(j["heaviest_stage"] == 0);
  // Megatron-LM: bf16 weights (2 B), fp32 main gradients (4 B), and 12 B of fp32 main weights
  // (4 B) and Adam moments (8 B) sharded over dp 4 by the distributed optimizer (3 B).
  CHECK(j["memory"]["weights"] == 2 * params);
  CHECK(j["memory"]["gradients"] == 4 * params);
  CHECK(j["memory"]["master_weights"] == params);
  CHECK(j["memory"]["optimizer_states"] == 2 * params);
  // NCCL buffers of the tensor-parallel, data-parallel and pipeline communicators, each
  // 16 channels x 2 connections x 9,633,792 B (data/overheads.json).
  CHECK(j["memory"]["buffers"] == 3LL * 16 * 2 * 9'633'792);
  CHECK(j["details"]["buffers"][0]["name"] == "NCCL buffers (3 communicators)");
  // The CUDA context (512 MiB) and 5% allocator slack over everything allocated.
  const std::int64_t allocated =
      j["memory_bytes"].get<std::int64_t>() - j["memory"]["overhead"].get<std::int64_t>();
  CHECK(j["memory"]["overhead"].get<double>() ==
        Approx(536'870'912 + 0.05 * static_cast<double>(allocated)).margin(1));
  CHECK(j["dp"] == 4);
  CHECK(j["micro_batches"] == 32);
  CHECK(j["fits"] == true);
  CHECK_FALSE(j.contains("step_time_s"));  // memory only
}

TEST_CASE("memory of an FSDP2 layout with hybrid sharding, and layout flags refused by name") {
  const auto r = run({"memory", "--model", "gpt2", "--strategy", "fsdp2", "--gpus", "8",
                      "--dp-shard", "4", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  const auto params = j["params_per_gpu"].get<std::int64_t>();
  // FSDP2 (torchtitan): fp32 parameter and gradient shards (4 B each) and AdamW's two fp32
  // moments (8 B), all over the shard group of 4, not all 8 ranks.
  CHECK(j["framework"] == "fsdp2");
  CHECK(j["shard_ranks"] == 4);
  CHECK(j["memory"]["weights"].get<double>() == Approx(4.0 * double(params) / 4).epsilon(1e-6));
  // Of the gradient shard (4 B a parameter) only the head's is there at the peak, the start of
  // backward with one micro-batch and zero_grad(set_to_none=True): 50,257 x 768 x 4 B / 4.
  CHECK(j["memory"]["gradients"].get<double>() == Approx(50257.0 * 768 * 4 / 4).epsilon(1e-6));
  CHECK(j["memory"]["optimizer_states"].get<double>() ==
        Approx(8.0 * double(params) / 4).epsilon(1e-6));
  // Explained as every strategy's memory is: the shard, and the hybrid groups (8 / 4 = 2).
  CHECK_THAT(j["explain"]["weights"].get<std::string>(),
             Contains("4 B (fp32)") && Contains("(1/4 shard)"));
  CHECK_THAT(j["notes"].dump(), Contains("groups of 4 GPUs shard, 2 groups replicate"));
  auto bad = run({"memory", "--model", "gpt2", "--strategy", "zero3", "--tp", "2", "--gpus", "8"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err,
             Contains("--strategy: zero3 is a data-parallel strategy; --tp belongs to a "
                      "layout (--tp, --pp, --cp, ...), which runs under megatron or fsdp2"));
  // The flag that asked for the layout is the one named.
  bad = run(
      {"memory", "--model", "gpt2", "--strategy", "ddp", "--grad-reduce-in-bf16", "--gpus", "8"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("ddp is a data-parallel strategy; --grad-reduce-in-bf16 belongs to "
                               "a layout"));
  bad = run({"memory", "--model", "gpt2", "--tp", "0", "--gpus", "8"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--tp: 0 is not a size: sizes are positive integers"));
  bad = run({"memory", "--model", "gpt2", "--tp", "3", "--gpus", "8"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--gpus: 8 is not divisible by --tp x --cp x --pp = 3"));
  // What layouts do not model is refused, not silently ignored; each framework offloads its
  // own way (Megatron-LM the optimizer, FSDP2 parameters, gradients and optimizer together).
  bad = run(
      {"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--offload", "optimizer+params"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--offload optimizer+params: Megatron-LM offloads the optimizer"));
  bad = run({"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--framework", "fsdp2",
             "--offload", "optimizer"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--offload optimizer: FSDP2's CPUOffloadPolicy"));
  // The host memory of the node's 8 GPUs against --host-memory.
  auto off = run({"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--offload", "optimizer",
                  "--host-memory", "1GiB", "--json"});
  REQUIRE(off.code == 0);
  const auto oj = nlohmann::json::parse(off.out)["parallel3d"];
  CHECK(oj["host_bytes_per_node"].get<std::int64_t>() ==
        8 * oj["host_bytes_per_gpu"].get<std::int64_t>());
  CHECK(oj["host_capacity_bytes"] == 1LL << 30);
  CHECK(oj["host_fits"] == (oj["host_bytes_per_node"].get<std::int64_t>() <= (1LL << 30)));
  CHECK(oj["offload"] == "optimizer");
  bad = run({"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--precision", "amp-bf16"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err,
             Contains("--precision: amp-bf16 (torch.autocast) is modelled for dp and ddp"));
  bad = run({"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--host-memory", "banana"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--host-memory 'banana': not a size"));
  bad = run({"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--strategy", "bogus"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err,
             Contains("--strategy: unknown strategy 'bogus'") && Contains("megatron, fsdp2"));
  // Unknown names are errors naming the flag, on the layout path and the data-parallel one.
  bad = run({"memory", "--model", "gpt2", "--tp", "2", "--gpus", "8", "--attention", "flashy"});
  CHECK_THAT(bad.err, Contains("--attention: unknown attention 'flashy' (did you mean: flash?)"));
  bad = run(
      {"memory", "--model", "gpt2", "--tp", "2", "--pp", "2", "--gpus", "8", "--schedule", "foo"});
  CHECK_THAT(bad.err, Contains("--schedule: pipeline schedule 'foo' is not known"));
  bad = run({"memory", "--model", "gpt2", "--gpus", "8", "--precision", "fp9"});
  CHECK_THAT(bad.err, Contains("--precision: unknown precision 'fp9'"));
  // Llama 2 70B's 64 heads divide by 16, its 8 key/value heads do not.
  bad = run({"memory", "--model", "llama-2-70b", "--tp", "16", "--gpus", "16"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("8 key/value heads (of 64 attention heads) do not divide by tp"));
}

TEST_CASE("memory --zero-grad: PyTorch 2 frees the gradients between steps, PyTorch 1 kept them") {
  // GPT-2 XL under DDP with autocast on one H100, one micro-step of 4 x 1024: its peak is the
  // start of backward. set_to_none (the default): only the head's fp32 gradient exists then,
  // 50,257 x 1,600 x 4 B; zeros: all of them, 1,557,611,200 x 4 B.
  const std::vector<std::string> args = {"memory", "--model",       "gpt2-xl",  "--gpus",
                                         "1",      "--gpu",         "H100-SXM", "--strategy",
                                         "ddp",    "--precision",   "amp-bf16", "--seq-len",
                                         "1024",   "--micro-batch", "4",        "--json"};
  const auto freed = nlohmann::json::parse(run(args).out);
  CHECK(freed["per_gpu"]["gradients"] == 50257LL * 1600 * 4);
  auto kept_args = args;
  kept_args.insert(kept_args.end(), {"--zero-grad", "zeros"});
  const auto kept = nlohmann::json::parse(run(kept_args).out);
  CHECK(kept["per_gpu"]["gradients"] == 1'557'611'200LL * 4);
  auto bad = args;
  bad.insert(bad.end(), {"--zero-grad", "none"});
  const auto refused = run(bad);
  CHECK(refused.code == 1);
  CHECK_THAT(refused.err, Contains("--zero-grad") && Contains("none"));
}

TEST_CASE("the component table's rules are as wide as its columns, not its longest explanation") {
  // bert-large under DDP explains the gradients' optimizer-step peak in about 200 characters;
  // the "how" column wraps at 72, so the rule spans the indent and the five columns with their
  // gaps: 2 + 16 ("optimizer states") + 2 + 7 + 2 + 13 ("6,942,935,040") + 2 + 8 + 2 + 72.
  const auto r = run({"memory", "--model", "bert-large", "--gpus", "64", "--strategy", "ddp",
                      "--gpu", "H100-SXM"});
  REQUIRE(r.code == 0);
  std::istringstream in(r.out);
  std::size_t rules = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  ---", 0) == 0) {
      ++rules;
      CHECK(line.size() == 2 + 16 + 2 + 7 + 2 + 13 + 2 + 8 + 2 + 72);
    }
  }
  CHECK(rules == 2);
  CHECK_THAT(r.out, Contains("the peak is the optimizer\n"));
}

TEST_CASE("trial: a bare parameter count is named once, and every sharded state says its shard") {
  const auto r = run({"memory", "--params", "13B", "--gpus", "8", "--strategy", "zero3",
                      "--offload", "optimizer+params"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("  model     13,000,000,000 parameters (parameter count only"));
  CHECK_THAT(r.out, !Contains("parameters: 13,000,000,000"));
  // 13e9 / 8 = 1,625,000,000 per rank: the master weights and the host gradients are that
  // shard too, as the weights and optimizer states say.
  std::istringstream in(r.out);
  std::size_t shards = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("1/8 shard") != std::string::npos) ++shards;
  }
  CHECK(shards == 4);
}
