// Tests for cli/src/estimate_command.cpp and estimate_report.cpp: `dtplan estimate` end to
// end; its JSON has the memory keys of `dtplan memory` under per_gpu, the step's parts add
// up, the timeline spans the step; bad input gives one-line errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "cli_runner.hpp"
#include "format.hpp"

using Catch::Contains;

namespace {
using Result = dtplan::test::CliResult;
Result run(std::vector<std::string> args) {
  return dtplan::test::run_dtplan(std::move(args));
}
const std::vector<std::string> kBase = {
    "estimate",   "--model", "gpt2-xl",   "--topology", "dgx-a100",      "--gpu", "A100-80GB",
    "--strategy", "zero2",   "--seq-len", "1024",       "--micro-batch", "8"};
std::vector<std::string> with(std::vector<std::string> extra) {
  auto args = kBase;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
// dtplan estimate of Mixtral 8x7B on 4 DGX H100 nodes, then `rest`.
std::vector<std::string> mixtral_estimate(const std::vector<std::string>& rest) {
  std::vector<std::string> a{"estimate", "--model", "mixtral-8x7b", "--topology", "dgx-h100",
                             "--nodes",  "4",       "--gpu",        "H100-SXM"};
  a.insert(a.end(), rest.begin(), rest.end());
  return a;
}

}  // namespace

TEST_CASE("estimate --json: memory, throughput, MFU and a timeline") {
  const auto r = run(with({"--global-batch", "256", "--json"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["generated_by"]["command"] == "estimate");
  CHECK(j["grad_accum"] == 4);  // 256 / (8 x 8 GPUs)
  CHECK(j["global_batch"] == 256);
  const auto memory =
      nlohmann::json::parse(run({"memory", "--model", "gpt2-xl", "--gpus", "8", "--strategy",
                                 "zero2", "--seq-len", "1024", "--micro-batch", "8", "--json"})
                                .out);
  // The same keys and the same bytes as `dtplan memory`.
  CHECK(j["per_gpu"] == memory["per_gpu"]);
  const double step = j["step_time_s"];
  CHECK(j["samples_per_s"].get<double>() == Approx(256.0 / step));
  CHECK(j["tokens_per_s"].get<double>() == Approx(256.0 * 1024 / step));
  const auto& s = j["step"];
  CHECK(step == Approx(s["compute_s"].get<double>() + s["exposed_comm_s"].get<double>() +
                       s["optimizer_s"].get<double>() + s["host_transfer_s"].get<double>()));
  const auto& c = j["compute_per_micro_step"];
  CHECK(j["mfu"].get<double>() == Approx(c["model_flops"].get<double>() * 4 / (step * 312e12)));
  CHECK(j["hfu"].get<double>() >= j["mfu"].get<double>());
  double end = 0;
  for (const auto& e : j["timeline"]) {
    CHECK(e["end_s"].get<double>() >= e["start_s"].get<double>());
    end = std::max(end, e["end_s"].get<double>());
  }
  CHECK(end == Approx(step));
  CHECK(j["comm"]["strategy"] == "zero2");
  CHECK(j["memory"]["fits"] == true);  // the fit against --gpu, as `dtplan memory --gpu` says
  CHECK(j["training"]["grad_accum"] == 4);
  CHECK(j["compute_constants"].contains("gemm_efficiency"));
}

TEST_CASE("estimate in text: the step's parts, throughput and a Gantt of both streams") {
  const auto r = run(with({"--grad-accum", "2"}));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("dtplan estimate") && Contains("memory per GPU") &&
                        Contains("communication not hidden") && Contains("samples/s") &&
                        Contains("MFU") && Contains("compute |") && Contains("comm    |"));
}

TEST_CASE("estimate on one GPU lists no collective: there is nothing to exchange") {
  const std::vector<std::string> one{"estimate", "--model",    "gpt2",      "--topology",
                                     "dgx-a100", "--gpu",      "A100-80GB", "--gpus",
                                     "1",        "--strategy", "ddp",       "--micro-batch",
                                     "8",        "--seq-len",  "1024"};
  const auto text = run(one);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("communication: none (one GPU: nothing to exchange)"));
  CHECK_THAT(text.out, !Contains("all-reduce"));
  auto args = one;
  args.emplace_back("--json");
  const auto j = nlohmann::json::parse(run(args).out);
  CHECK(j["comm"]["ops"].empty());
  CHECK(j["step"]["exposed_comm_s"].get<double>() == 0.0);
  // Two GPUs of the node do exchange: DDP's bucketed all-reduce is listed.
  args[8] = "2";
  const auto two = nlohmann::json::parse(run(args).out);
  REQUIRE(two["comm"]["ops"].size() == 1);
  CHECK(two["comm"]["ops"][0]["collective"] == "allreduce");
}

TEST_CASE("a straggler slows every rank's step, a slower GPU in the set sets the pace") {
  const auto base = nlohmann::json::parse(run(with({"--json"})).out);
  const auto slow = nlohmann::json::parse(run(with({"--straggler", "1.25", "--json"})).out);
  CHECK(slow["step"]["compute_s"].get<double>() ==
        Approx(1.25 * base["step"]["compute_s"].get<double>()));
  // The text says so beside the per-micro-step compute, which is a typical rank's: the slowest
  // rank's forward and backward are 1.25x those (an earlier report scaled only the total).
  const auto text = run(with({"--straggler", "1.25"}));
  REQUIRE(text.code == 0);
  const auto& k = slow["compute_per_micro_step"];
  CHECK_THAT(text.out,
             Contains("  on the slowest rank (1.25x): forward " +
                      dtplan::cli::seconds(1.25 * k["forward_s"].get<double>()) + ", backward " +
                      dtplan::cli::seconds(1.25 * k["backward_s"].get<double>())));
  CHECK_THAT(run(with({})).out, !Contains("on the slowest rank"));
  const auto mixed = nlohmann::json::parse(
      run(with({"--slowest-gpu", "V100-32GB", "--precision", "fp16", "--json"})).out);
  // V100 has 125 TFLOP/s fp16 to the A100's 312: the slowest rank computes over twice as long.
  CHECK(mixed["straggler_slowdown"].get<double>() > 2.0);
  // A faster GPU would not be the straggler.
  const auto faster = run(with({"--slowest-gpu", "H100-SXM"}));
  CHECK(faster.code == 1);
  CHECK_THAT(faster.err, Contains("computes faster than A100-80GB"));
  // V100 has no bf16: a bf16 run cannot include one.
  const auto bf16 = run(with({"--slowest-gpu", "V100-32GB"}));
  CHECK(bf16.code == 1);
  CHECK_THAT(bf16.err, Contains("V100-32GB has no bf16"));
}

TEST_CASE("estimate refuses a batch it cannot reach and other bad options, in one line") {
  auto r = run(with({"--global-batch", "100"}));
  CHECK(r.code == 1);
  CHECK_THAT(
      r.err,
      Contains(
          "--global-batch 100: not a multiple of micro-batch 8 x 8 data-parallel replicas = 64"));
  r = run(with({"--global-batch", "128", "--grad-accum", "2"}));
  CHECK_THAT(r.err, Contains("give one of them"));
  r = run(with({"--straggler", "0.5"}));
  CHECK_THAT(r.err, Contains("--straggler"));
  r = run(with({"--straggler", "nan"}));
  CHECK_THAT(r.err, Contains("--straggler: must be a number, got NaN"));
  r = run(with({"--gpus", "16"}));
  CHECK_THAT(r.err, Contains("--gpus 16: the topology has 8 GPUs"));
  r = run(with({"--compute", "gemm_efficiency=2"}));
  CHECK_THAT(r.err, Contains("gemm_efficiency must be in"));
  r = run({"estimate", "--model", "gpt2", "--topology", "dgx-a100", "--gpu", "A1000"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("A1000"));
  r = run({"estimate", "--model", "gpt2", "--topology", "dgx-a100"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--gpu"));
  for (const auto& line : {r.err})
    CHECK(line.find('\n') == line.size() - 1);
}

TEST_CASE("estimate --tp --pp: a Megatron-style layout, dp = GPUs / (tp x pp)") {
  const auto r = run({"estimate",
                      "--model",
                      "llama-2-70b",
                      "--topology",
                      "dgx-h100",
                      "--nodes",
                      "16",
                      "--gpu",
                      "H100-SXM",
                      "--tp",
                      "8",
                      "--pp",
                      "4",
                      "--interleave",
                      "2",
                      "--sp",
                      "--micro-batch",
                      "1",
                      "--global-batch",
                      "1024",
                      "--seq-len",
                      "4096",
                      "--checkpointing",
                      "selective",
                      "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  CHECK(j["dp"] == 4);               // 128 / (8 x 4)
  CHECK(j["micro_batches"] == 256);  // 1024 / (4 x 1)
  CHECK(j["sequence_parallel"] == true);
  const auto& t = j["time"];
  // The bubble is (p - 1)/v = 1.5 micro-batch times.
  const double micro = t["compute_per_microbatch_s"].get<double>() +
                       t["tp_comm_per_microbatch_s"].get<double>() +
                       t["p2p_per_microbatch_s"].get<double>();
  CHECK(t["bubble_s"].get<double>() == Approx(1.5 * micro));
  // Llama 2 7B's 32 heads divide by 16, but 16 GPUs are two DGX nodes.
  const auto bad = run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--nodes",
                        "2", "--gpu", "H100-SXM", "--tp", "16"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("tensor parallelism must stay inside a node"));
}

TEST_CASE("estimate --schedule: the zero-bubble schedules shrink the bubble, ZB-H2 keeps more") {
  const std::vector<std::string> base{"estimate", "--model",        "llama-2-7b", "--topology",
                                      "dgx-h100", "--gpu",          "H100-SXM",   "--tp",
                                      "2",        "--pp",           "4",          "--micro-batch",
                                      "1",        "--global-batch", "16",         "--json"};
  const auto layout = [&](const std::string& schedule) {
    auto args = base;
    args.insert(args.end(), {"--schedule", schedule});
    const auto r = run(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out)["parallel3d"];
  };
  const auto f = layout("1f1b"), h1 = layout("zb-h1"), h2 = layout("zb-h2");
  CHECK(f["schedule"] == "1f1b");
  CHECK(h1["schedule"] == "zb-h1");
  // 1F1B: (p - 1)(F + B + W); ZB-H1: (p - 1)(F + B - W), less but positive; same work.
  CHECK(h1["time"]["bubble_s"].get<double>() < f["time"]["bubble_s"].get<double>());
  CHECK(h1["time"]["bubble_s"].get<double>() > 0);
  CHECK(h1["time"]["compute_per_microbatch_s"] == f["time"]["compute_per_microbatch_s"]);
  // ZB-H2 holds 2p - 1 = 7 micro-batches against 1F1B's 4 (Qi et al. 2024, Table 2).
  CHECK(h2["memory"]["activations"].get<double>() ==
        Approx(f["memory"]["activations"].get<double>() * 7 / 4).epsilon(1e-9));
  // Eager attention keeps each layer's 16-bit scores, 2 B x 16 heads per rank x 4,096^2,
  // instead of flash's fp32 log-sum-exp (4 B x 16 x 4,096): on the first stage, 8 layers of 7
  // micro-batches.
  auto eager = base;
  eager.insert(eager.end(), {"--schedule", "zb-h2", "--attention", "eager"});
  const auto e = run(eager);
  REQUIRE(e.code == 0);
  const auto h2e = nlohmann::json::parse(e.out)["parallel3d"];
  CHECK(h2e["memory"]["activations"].get<std::int64_t>() -
            h2["memory"]["activations"].get<std::int64_t>() ==
        56LL * (2LL * 16 * 4096 * 4096 - 4LL * 16 * 4096));
  auto args = base;
  args.insert(args.end(), {"--schedule", "zbv"});
  auto r = run(args);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("exactly two model chunks per GPU"));
  r = run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--schedule", "zb-h1"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--schedule: zb-h1 needs --pp > 1"));
}

TEST_CASE("estimate --pp-layers: an uneven split, written down and priced") {
  // Llama 2 70B's 80 layers as 19, 21, 21, 19 over 4 stages; the JSON carries the split and
  // which stage is the heaviest.
  const auto r = run({"estimate",    "--model",
                      "llama-2-70b", "--topology",
                      "dgx-h100",    "--nodes",
                      "4",           "--gpu",
                      "H100-SXM",    "--tp",
                      "8",           "--pp",
                      "4",           "--pp-layers",
                      "19,21,21,19", "--micro-batch",
                      "1",           "--global-batch",
                      "32",          "--seq-len",
                      "4096",        "--checkpointing",
                      "full",        "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  CHECK(j["stage_layers"] == nlohmann::json::array({19, 21, 21, 19}));
  CHECK(j["heaviest_stage"].get<int>() >= 0);
  const auto bad = run({"estimate", "--model", "llama-2-70b", "--topology", "dgx-h100", "--nodes",
                        "4", "--gpu", "H100-SXM", "--tp", "8", "--pp", "4", "--pp-layers",
                        "20,20,20", "--global-batch", "32"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("the layers per stage list has 3 entries for pp 4"));
}

TEST_CASE("estimate --cp: context parallelism splits the sequence, dp = GPUs / (tp x cp x pp)") {
  const auto args = [](const std::string& cp, const std::string& comm) {
    return std::vector<std::string>{
        "estimate", "--model",        "llama-3-8b", "--topology", "dgx-h100", "--nodes",
        "4",        "--gpu",          "H100-SXM",   "--tp",       "2",        "--cp",
        cp,         "--cp-comm",      comm,         "--seq-len",  "131072",   "--micro-batch",
        "1",        "--global-batch", "32",         "--sp",       "--json"};
  };
  const auto r = run(args("8", "p2p"));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  CHECK(j["cp"] == 8);
  CHECK(j["cp_comm"] == "p2p");
  CHECK(j["dp"] == 2);              // 32 / (2 x 8)
  CHECK(j["micro_batches"] == 16);  // 32 / (2 x 1)
  // 16,384 tokens per rank, sbh = 16384 x 4096. Per layer, 2-byte tensors, t = 2 with
  // sequence parallelism: the QKV, MLP and two norm inputs 8 sbh / t = 4 sbh; Q and the
  // output projection's input 2 x 2 x 4096 / t = 2 sbh; K and V 2 x 2 x 1024 / t = 0.5 sbh;
  // SwiGLU's four 14336-wide tensors 4 x 2 x 7168 = 14 sbh; fused attention's fp32
  // log-sum-exp 4 x 16 heads x 16384. Then the token ids (8 B x 16384) and the final norm
  // and head inputs (2 x 2 sbh / t).
  const std::int64_t sbh = 16384LL * 4096;
  CHECK(j["memory"]["activations"] == 32 * (41 * sbh / 2 + 4 * 16 * 16384) + 8 * 16384 + 2 * sbh);
  // Ulysses cannot split 16 heads per tensor-parallel rank (4 key/value heads) over 8 ranks.
  const auto ulysses = run(args("8", "a2a"));
  CHECK(ulysses.code == 1);
  CHECK_THAT(ulysses.err, Catch::Matchers::Contains("do not divide by cp"));
  const auto bad = run(args("8", "ring"));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("known: p2p, all_gather, a2a"));
  const auto uneven = run(args("3", "p2p"));
  CHECK(uneven.code == 1);
  CHECK_THAT(uneven.err, Catch::Matchers::Contains("is not divisible by --tp x --cp x --pp = 6"));
}

namespace {

// The complete ("X") events of a Chrome trace file, and its thread names by id.
struct Trace {
  std::vector<nlohmann::json> events;
  std::map<int, std::string> threads;
  double end_s() const {
    double end = 0;
    for (const auto& e : events)
      end = std::max(end, (e["ts"].get<double>() + e["dur"].get<double>()) / 1e6);
    return end;
  }
};

Trace read_trace(const std::filesystem::path& p) {
  std::ifstream f(p);
  const auto j = nlohmann::json::parse(f);
  Trace t;
  for (const auto& e : j.at("traceEvents")) {
    if (e["ph"] == "X") t.events.push_back(e);
    if (e["ph"] == "M" && e["name"] == "thread_name")
      t.threads[e["tid"].get<int>()] = e["args"]["name"];
  }
  return t;
}

}  // namespace

TEST_CASE(
    "estimate --trace: the step as a Chrome trace, one thread per stream, ending at the step") {
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-trace-3d.json";
  std::filesystem::remove(path);
  const auto r =
      run({"estimate",   "--model",        "llama-3-8b", "--topology", "dgx-h100", "--nodes",
           "4",          "--gpu",          "H100-SXM",   "--tp",       "2",        "--cp",
           "8",          "--cp-comm",      "all_gather", "--seq-len",  "131072",   "--micro-batch",
           "1",          "--global-batch", "32",         "--sp",       "--json",   "--trace",
           path.string()});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  const auto trace = read_trace(path);
  // The 3D timeline is serial: its events tile the step, which ends at the predicted time.
  double busy = 0;
  for (const auto& e : trace.events)
    busy += e["dur"].get<double>() / 1e6;
  CHECK(trace.end_s() == Approx(j["step_time_s"].get<double>()).epsilon(1e-9));
  CHECK(busy == Approx(j["step_time_s"].get<double>()).epsilon(1e-9));
  std::set<std::string> names;
  for (const auto& [tid, name] : trace.threads)
    names.insert(name);
  CHECK(names ==
        std::set<std::string>{"compute", "tensor parallel", "context parallel", "data parallel"});
  // The distributed optimizer's rows by name: gradients before the optimizer step, the updated
  // weights after it.
  std::vector<std::string> order;
  for (const auto& e : trace.events)
    order.push_back(e["name"].get<std::string>());
  const auto at = [&](const std::string& name) {
    return std::find(order.begin(), order.end(), name) - order.begin();
  };
  CHECK(at("gradient reduce-scatter (distributed optimizer)") < at("optimizer step"));
  CHECK(at("optimizer step") < at("updated weights all-gather (distributed optimizer)"));
  CHECK(at("updated weights all-gather (distributed optimizer)") <
        static_cast<std::ptrdiff_t>(order.size()));
  // FSDP2's exposed gathers and reductions are part of each micro-batch: the trace still
  // tiles the step.
  const auto fsdp_path = std::filesystem::temp_directory_path() / "dtplan-test-trace-fsdp2.json";
  const auto fsdp = run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100", "--nodes",
                         "4", "--gpu", "H100-SXM", "--framework", "fsdp2", "--seq-len", "8192",
                         "--global-batch", "64", "--json", "--trace", fsdp_path.string()});
  REQUIRE(fsdp.code == 0);
  const auto fsdp_trace = read_trace(fsdp_path);
  double fsdp_busy = 0;
  for (const auto& e : fsdp_trace.events)
    fsdp_busy += e["dur"].get<double>() / 1e6;
  const double fsdp_step = nlohmann::json::parse(fsdp.out)["parallel3d"]["step_time_s"];
  CHECK(fsdp_busy == Approx(fsdp_step).epsilon(1e-9));
  CHECK(fsdp_trace.end_s() == Approx(fsdp_step).epsilon(1e-9));
  // A data-parallel estimate's timeline: compute and communication streams, overlapping.
  const auto dp_path = std::filesystem::temp_directory_path() / "dtplan-test-trace-dp.json";
  const auto dp = run({"estimate", "--model", "gpt2-xl", "--topology", "pcie-split-8", "--gpu",
                       "A100-80GB", "--strategy", "zero3", "--micro-batch", "8", "--grad-accum",
                       "4", "--seq-len", "1024", "--json", "--trace", dp_path.string()});
  REQUIRE(dp.code == 0);
  const auto dp_trace = read_trace(dp_path);
  CHECK(dp_trace.end_s() ==
        Approx(nlohmann::json::parse(dp.out)["step_time_s"].get<double>()).epsilon(1e-9));
  CHECK(dp_trace.threads.size() == 2);
}

TEST_CASE(
    "estimate --framework fsdp2: FSDP2 x TP, states sharded over dp, hybrid with --dp-shard") {
  const auto args = [](std::vector<std::string> extra, const std::string& framework = "fsdp2") {
    std::vector<std::string> a{"estimate", "--model",       "llama-3-8b", "--topology",
                               "dgx-h100", "--nodes",       "4",          "--gpu",
                               "H100-SXM", "--tp",          "2",          "--seq-len",
                               "8192",     "--micro-batch", "1",          "--global-batch",
                               "64",       "--framework",   framework,    "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto r = run(args({}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  CHECK(j["framework"] == "fsdp2");
  CHECK(j["sharding"] == "parameters");
  CHECK(j["shard_ranks"] == 16);  // 32 GPUs / tp 2
  const auto n = j["params_per_gpu"].get<std::int64_t>();
  // fp32 parameter shards: 4 B x n / 16 (integer bytes).
  CHECK(j["memory"]["weights"] == static_cast<std::int64_t>(static_cast<double>(n) * 4 / 16));
  const auto hybrid = nlohmann::json::parse(run(args({"--dp-shard", "8"})).out)["parallel3d"];
  CHECK(hybrid["shard_ranks"] == 8);
  CHECK(hybrid["memory"]["weights"] == static_cast<std::int64_t>(static_cast<double>(n) * 4 / 8));
  CHECK(hybrid["time"]["dp_sync_s"].get<double>() > 0);  // the shards' all-reduce across groups
  const auto bad = run(args({"--sharding", "optimizer"}));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("FSDP2 shards parameters and gradients"));
  // Megatron-LM cannot run an FSDP2 layout: its export is refused.
  const auto exported = run(args({"--export-megatron", "/dev/null"}));
  CHECK(exported.code == 1);
  CHECK_THAT(exported.err, Catch::Matchers::Contains("runs under fsdp2, not Megatron-LM"));
  CHECK(run(args({"--export-megatron", "/dev/null"}, "megatron")).code == 0);
  // torchtitan runs it: data_parallel_shard_degree 16, resharding after forward.
  const auto toml = std::filesystem::temp_directory_path() / "dtplan-test-torchtitan.toml";
  std::filesystem::remove(toml);
  REQUIRE(run(args({"--sp", "--export-torchtitan", toml.string()})).code == 0);
  std::ifstream in(toml);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  CHECK_THAT(text, Catch::Matchers::Contains("\ndata_parallel_shard_degree = 16\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("\nfsdp_reshard_after_forward = \"always\"\n"));
}

TEST_CASE("estimate: a layout's step counts its micro-batches in words that agree") {
  auto step_line = [](const char* batch) {
    const auto r =
        run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
             "--tp", "8", "--micro-batch", "1", "--global-batch", batch, "--seq-len", "4096"});
    REQUIRE(r.code == 0);
    const auto at = r.out.find("  step ");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at, r.out.find('\n', at) - at);
  };
  // One GPU group of tp 8 (dp 1): the global batch is the number of micro-batches.
  CHECK_THAT(step_line("1"), Catch::Contains(": 1 micro-batch x "));
  CHECK_THAT(step_line("8"), Catch::Contains(": 8 micro-batches x "));
}

TEST_CASE("estimate: a layout's memory and step lines wrap at the report width, parts whole") {
  // A 70B layout that does not fit: the memory line carries every component and the
  // shortfall, the step line every part (the trial found them at 281 and 218 characters).
  const auto r =
      run({"estimate", "--model",       "llama-3-70b", "--gpu",      "H100-SXM", "--gpus",
           "64",       "--nodes",       "8",           "--topology", "dgx-h100", "--strategy",
           "megatron", "--tp",          "4",           "--pp",       "4",        "--global-batch",
           "128",      "--micro-batch", "1",           "--seq-len",  "8192"});
  REQUIRE(r.code == 0);
  const auto from = r.out.find("  memory per GPU");
  const auto to = r.out.find(" samples/s");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  std::istringstream lines(r.out.substr(from, to - from));
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count)
    CHECK(line.size() <= dtplan::cli::kReportLineChars);
  CHECK(count >= 4);  // both lines wrapped
  // Each part is whole on its line.
  CHECK_THAT(r.out, Catch::Contains("does NOT fit on H100-SXM (short by ") &&
                        Catch::Contains("tensor-parallel all-reduces ") &&
                        Catch::Contains(",\n      ") && Catch::Contains("pipeline bubble "));
}

TEST_CASE("estimate: an FSDP2 layout at tp 1 runs eager kernels as the data-parallel FSDP does") {
  // torchtitan without torch.compile runs each block op by op: the same inventory as the
  // data-parallel strategies, so a layout of tp 1 (one stage holding the whole model) spends
  // exactly the data-parallel estimate's forward + backward per micro-batch, in either mode.
  auto estimate = [](const char* strategy, const char* kernels,
                     std::vector<std::string> more = {}) {
    std::vector<std::string> args{
        "estimate", "--model",    "llama-3.2-1b", "--topology",      "dgx-h100", "--gpu",
        "H100-SXM", "--strategy", strategy,       "--global-batch",  "16",       "--micro-batch",
        "2",        "--seq-len",  "2048",         "--layer-kernels", kernels,    "--json"};
    args.insert(args.end(), more.begin(), more.end());
    return run(args);
  };
  double layout_s[2] = {0, 0};
  double layout_activations[2] = {0, 0}, flat_activations[2] = {0, 0};
  int i = 0;
  for (const char* kernels : {"fused", "eager"}) {
    CAPTURE(kernels);
    const auto layout = estimate("fsdp2", kernels);
    const auto flat = estimate("fsdp-full", kernels);
    REQUIRE(layout.code == 0);
    REQUIRE(flat.code == 0);
    const auto c = nlohmann::json::parse(flat.out)["compute_per_micro_step"];
    layout_s[i] =
        nlohmann::json::parse(layout.out)["parallel3d"]["time"]["compute_per_microbatch_s"]
            .get<double>();
    CHECK(layout_s[i] ==
          Approx(c["forward_s"].get<double>() + c["backward_s"].get<double>()).epsilon(1e-12));
    layout_activations[i] =
        nlohmann::json::parse(layout.out)["parallel3d"]["memory"]["activations"].get<double>();
    flat_activations[i] =
        nlohmann::json::parse(flat.out)["memory"]["per_gpu"]["activations"].get<double>();
    ++i;
  }
  CHECK(layout_s[1] > layout_s[0]);
  // And the tensors each eager op keeps: the same bytes more in both.
  CHECK(layout_activations[1] > layout_activations[0]);
  CHECK(layout_activations[1] - layout_activations[0] ==
        Approx(flat_activations[1] - flat_activations[0]));
  // With tensor parallelism the element-wise work is split in ways the inventory does not
  // follow: refused, naming the flag.
  const auto tp = estimate("fsdp2", "eager", {"--tp", "2"});
  CHECK(tp.code == 1);
  CHECK_THAT(tp.err, Contains("--layer-kernels") && Contains("FSDP2 layouts at tp 1"));
}

TEST_CASE("estimate --export-accelerate writes an FSDP2 layout as an Accelerate config") {
  const auto file = std::filesystem::temp_directory_path() / "dtplan-test-accelerate-fsdp2.yaml";
  std::filesystem::remove(file);
  const auto r = run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu",
                      "H100-SXM", "--strategy", "fsdp2", "--tp", "2", "--micro-batch", "1",
                      "--seq-len", "8192", "--export-accelerate", file.string()});
  REQUIRE(r.code == 0);
  std::ifstream in(file);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  CHECK_THAT(text, Contains("  fsdp_version: 2\n") && Contains("num_processes: 8\n") &&
                       Contains("  parallelism_config_tp_size: 2\n") &&
                       Contains("  parallelism_config_dp_shard_size: 4\n"));
  // A Megatron-LM layout is not something Accelerate runs: refused, nothing written.
  std::filesystem::remove(file);
  const auto bad = run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu",
                        "H100-SXM", "--tp", "2", "--export-accelerate", file.string()});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--export-accelerate: the layout runs under megatron"));
  CHECK_FALSE(std::filesystem::exists(file));
}

TEST_CASE("estimate: a layout within the GPU but above the plan's 10% headroom says so") {
  // The README's 128K example: 77.29 GiB of an H100's 79.65 fits the GPU, but not the 71.68
  // GiB dtplan plan keeps usable (10% headroom), so the plan would reject it.
  const std::vector<std::string> a{
      "estimate", "--model",   "llama-3.1-8b", "--topology",    "dgx-h100", "--nodes",
      "4",        "--gpu",     "H100-SXM",     "--tp",          "2",        "--cp",
      "8",        "--seq-len", "131072",       "--micro-batch", "1",        "--global-batch",
      "32",       "--sp"};
  const auto text = run(a);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("above dtplan plan's 10% headroom (71.68 GiB usable)"));
  auto with_json = a;
  with_json.emplace_back("--json");
  const auto j = nlohmann::json::parse(run(with_json).out)["parallel3d"];
  CHECK(j["fits"] == true);
  CHECK(j["within_plan_headroom"] == false);
  const double total = static_cast<double>(j["memory_bytes"].get<std::int64_t>());
  CHECK(total > 0.9 * 79.65 * (1LL << 30));
}

TEST_CASE("estimate --deepspeed-version: ZeRO-3 of a 2021 release blocks on every gather") {
  const std::vector<std::string> base{
      "estimate", "--model",   "gpt2-xl", "--topology",    "dgx-a100",  "--nodes",
      "2",        "--gpus",    "16",      "--gpu",         "A100-80GB", "--strategy",
      "zero3",    "--seq-len", "1024",    "--micro-batch", "4",         "--json"};
  auto with_version = [&](const std::string& v) {
    auto args = base;
    args.insert(args.end(), {"--deepspeed-version", v});
    return run(args);
  };
  const auto now = run(base);
  const auto old = with_version("0.4.0");
  REQUIRE(now.code == 0);
  REQUIRE(old.code == 0);
  const auto jn = nlohmann::json::parse(now.out);
  const auto jo = nlohmann::json::parse(old.out);
  // GPT-2 XL: 48 blocks of 12 tensors + wte, wpe, ln_f weight and bias = 580 gathers per pass,
  // none hidden; a current release gathers the 48 blocks and the rest, 49, mostly hidden.
  CHECK(jo["comm"]["ops"][0]["messages"] == 580);
  CHECK(jn["comm"]["ops"][0]["messages"] == 49);
  CHECK(jo["step"]["hidden_comm_s"].get<double>() == 0.0);
  CHECK(jn["step"]["hidden_comm_s"].get<double>() > 0.0);
  // Blocking: the step is the compute plus every collective of the three passes.
  CHECK(jo["step"]["exposed_comm_s"].get<double>() ==
        Approx(jo["comm"]["time_per_step_s"].get<double>()));
  CHECK(jo["step_time_s"].get<double>() > jn["step_time_s"].get<double>());
  const auto bad = with_version("0.3.10");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.err, Contains("--deepspeed-version: DeepSpeed 0.3.10 has no ZeRO-3"));
  const auto typo = with_version("latest");
  CHECK(typo.code != 0);
  CHECK_THAT(typo.err, Contains("'latest' is not a DeepSpeed release number"));
  // A strategy DeepSpeed does not run would ignore the release: refused, not dropped.
  for (const std::vector<std::string>& other :
       {std::vector<std::string>{"--strategy", "ddp"}, std::vector<std::string>{"--tp", "2"}}) {
    auto args = base;
    args.erase(std::find(args.begin(), args.end(), "--strategy"),
               std::find(args.begin(), args.end(), "--strategy") + 2);
    args.insert(args.end(), other.begin(), other.end());
    args.insert(args.end(), {"--deepspeed-version", "0.4.0"});
    const auto r = run(args);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Contains("--deepspeed-version: ") && Contains("does not run on DeepSpeed"));
  }
}

TEST_CASE("estimate --attention-kernel: the named kernel's measured curve, refused without one") {
  const std::vector<std::string> base{"estimate", "--model",       "gpt2-xl",   "--topology",
                                      "dgx-h100", "--gpus",        "8",         "--gpu",
                                      "H100-SXM", "--strategy",    "fsdp-full", "--seq-len",
                                      "1024",     "--micro-batch", "4",         "--json"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto framework = with({});
  const auto cudnn = with({"--attention-kernel", "cudnn"});
  REQUIRE(framework.code == 0);
  REQUIRE(cudnn.code == 0);
  const auto jf = nlohmann::json::parse(framework.out);
  const auto jc = nlohmann::json::parse(cudnn.out);
  CHECK(jf["training"]["attention_kernel"] == "framework");
  CHECK(jc["training"]["attention_kernel"] == "cudnn");
  // By hand from data/compute.json: GPT-2 XL has 48 layers of 25 heads of 64. One causal
  // forward is 4 x 4 x 1024^2 x 1600 / 2 = 1.342e10 FLOPs, backward 2.5 times that, each call
  // paying kernel_overhead_s (4 us). PyTorch's FlashAttention-2 at 1024 tokens and head dim 64
  // runs at 0.302 x 1024 / (1024 + 1153) of 989.5 TFLOP/s, cuDNN at 0.475 x 1024 / (1024 + 1309).
  const double flops = 4.0 * 4 * 1024.0 * 1024 * 1600 / 2;
  auto attention_s = [&](double plateau, double half) {
    const double eff = plateau * 1024 / (1024 + half);
    return 48 * 3.5 * (flops / (989.5e12 * eff) + 4e-6);
  };
  CHECK(jf["compute_per_micro_step"]["attention_s"].get<double>() ==
        Approx(attention_s(0.302, 1153)).epsilon(1e-9));
  CHECK(jc["compute_per_micro_step"]["attention_s"].get<double>() ==
        Approx(attention_s(0.475, 1309)).epsilon(1e-9));
  CHECK(jc["step_time_s"].get<double>() < jf["step_time_s"].get<double>());
  // A kernel with no curve on the GPU, a kernel with eager attention, a misspelt kernel.
  const auto triton = with({"--attention-kernel", "flash-attn-triton"});
  CHECK(triton.code != 0);
  CHECK_THAT(triton.err, Contains("flash-attn-triton has no measured curve for H100-SXM") &&
                             Contains("choose another --attention-kernel"));
  const auto eager = with({"--attention", "eager", "--attention-kernel", "cudnn"});
  CHECK(eager.code != 0);
  CHECK_THAT(eager.err, Contains("--attention eager runs none"));
  const auto typo = with({"--attention-kernel", "cudn"});
  CHECK(typo.code != 0);
  CHECK_THAT(typo.err, Contains("did you mean: cudnn"));
}

TEST_CASE("estimate --ep --etp: experts spread, their exchange priced, bad sizes named") {
  const auto args = [](const std::string& ep, const std::string& etp) {
    return mixtral_estimate({"--tp", "2", "--pp", "4", "--sp", "--ep", ep, "--etp", etp,
                             "--seq-len", "4096", "--micro-batch", "1", "--global-batch", "256",
                             "--json"});
  };
  const auto r = run(args("4", "1"));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  CHECK(j["ep"] == 4);
  CHECK(j["etp"] == 1);
  CHECK(j["expert_dp"] == 2);  // tp 2 x dp 4 = 8 GPUs of a stage / (etp 1 x ep 4)
  CHECK(j["time"]["ep_comm_per_microbatch_s"].get<double>() > 0);
  // Sizes that do not fold are refused naming the flags.
  auto bad = run(args("3", "1"));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("8 experts do not divide over ep 3"));
  bad = run(args("8", "2"));
  CHECK_THAT(bad.err, Contains("etp x ep = 16 does not divide"));
  bad = run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
             "--ep", "2", "--seq-len", "4096", "--micro-batch", "1"});
  CHECK_THAT(bad.err,
             Contains("expert parallelism (--ep, --etp) needs a mixture-of-experts model"));
  bad = run(args("0", "1"));
  CHECK_THAT(bad.err, Contains("--ep"));
}

TEST_CASE("estimate --precision fp8: bf16 with FP8 GEMMs on a layout, refused elsewhere") {
  const std::vector<std::string> layout{"estimate", "--model",        "llama-3-8b", "--topology",
                                        "dgx-h100", "--gpu",          "H100-SXM",   "--strategy",
                                        "megatron", "--seq-len",      "4096",       "--micro-batch",
                                        "1",        "--global-batch", "64",         "--json"};
  const auto plain = run(layout);
  REQUIRE(plain.code == 0);
  auto with_fp8 = layout;
  with_fp8.insert(with_fp8.end(), {"--precision", "fp8"});
  const auto r = run(with_fp8);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  CHECK(j["precision"] == "bf16");
  CHECK(j["fp8_recipe"] == "delayed");  // Transformer Engine's default recipe
  // Faster: the Linears' GEMMs at the FP8 peak.
  CHECK(j["step_time_s"].get<double>() <
        nlohmann::json::parse(plain.out)["parallel3d"]["step_time_s"].get<double>());
  // A data-parallel strategy is not priced in FP8; an A100 has no FP8 tensor cores.
  auto ddp = run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu",
                  "H100-SXM", "--strategy", "zero3", "--seq-len", "4096", "--precision", "fp8"});
  CHECK(ddp.code == 1);
  CHECK_THAT(ddp.err, Contains("FP8 GEMMs (--precision fp8 or --fp8-recipe; delayed scaling here) "
                               "are modelled for the layouts"));
  auto a100 = with_fp8;
  a100[6] = "A100-80GB";
  a100[4] = "dgx-a100";
  CHECK_THAT(run(a100).err, Contains("has no FP8 tensor cores"));
}

TEST_CASE("estimate --recompute-modules: Megatron-LM's selective modules, checked and printed") {
  const auto args = [](const std::vector<std::string>& extra) {
    auto a = mixtral_estimate(
        {"--ep", "8", "--seq-len", "4096", "--micro-batch", "1", "--global-batch", "256"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto plain = run(args({"--checkpointing", "selective", "--json"}));
  REQUIRE(plain.code == 0);
  const auto r = run(
      args({"--checkpointing", "selective", "--recompute-modules", "layernorm,moe_act", "--json"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["parallel3d"];
  const auto p = nlohmann::json::parse(plain.out)["parallel3d"];
  CHECK(j["recompute_modules"] == "layernorm,moe_act");
  CHECK(p["recompute_modules"] == "core_attn");
  // Less kept (the router's input, two of four SwiGLU tensors per routed copy), more computed.
  CHECK(j["memory"]["activations"].get<double>() < p["memory"]["activations"].get<double>());
  CHECK(j["time"]["compute_per_microbatch_s"].get<double>() >
        p["time"]["compute_per_microbatch_s"].get<double>());
  const auto text = run(args({"--checkpointing", "selective", "--recompute-modules", "moe_act"}));
  CHECK_THAT(text.out, Contains("recompute selective (moe_act)"));
  // Refused, naming the flags: without selective, a module the model lacks, a typo.
  auto bad = run(args({"--recompute-modules", "moe_act"}));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--recompute-modules moe_act needs --checkpointing selective"));
  bad = run(args({"--checkpointing", "selective", "--recompute-modules", "mla_up_proj"}));
  CHECK_THAT(bad.err, Contains("--recompute-modules mla_up_proj needs latent attention"));
  // A data-parallel strategy with modules: the modules are what asks for Megatron-LM.
  bad = run(mixtral_estimate({"--strategy", "zero3", "--checkpointing", "selective",
                              "--recompute-modules", "moe_act", "--seq-len", "4096"}));
  CHECK_THAT(bad.err, Contains("--recompute-modules: Megatron-LM's; --strategy zero3 is a "
                               "data-parallel strategy"));
  bad = run(args({"--checkpointing", "selective", "--recompute-modules", "moe_actt"}));
  CHECK_THAT(bad.err, Contains("error: --recompute-modules: unknown recompute module 'moe_actt'"));
  // An empty value used to read as "not given", i.e. the default core_attn set.
  bad = run(args({"--checkpointing", "selective", "--recompute-modules", ""}));
  CHECK(bad.code != 0);
  CHECK_THAT(bad.err, Contains("--recompute-modules: an empty list: name the modules"));
}

TEST_CASE("estimate --gpus-per-node: 16 trays of each of 4 NVL72 racks") {
  // 256 GB200s as NVIDIA's DeepSeek-V3 recipes run them: 64 GPUs in each rack's NVLink
  // domain, so expert parallelism over 64 stays on NVLink and 4 racks hold the job.
  const std::vector<std::string> args{
      "estimate",    "--model",         "deepseek-v3", "--topology",
      "gb200-nvl72", "--nodes",         "4",           "--gpus-per-node",
      "64",          "--gpu",           "GB200",       "--pp",
      "4",           "--interleave",    "4",           "--ep",
      "64",          "--pp-layers",     "16,16,16,13", "--seq-len",
      "4096",        "--micro-batch",   "1",           "--global-batch",
      "4096",        "--checkpointing", "selective",   "--recompute-modules",
      "mla_up_proj", "--json"};
  const auto r = run(args);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["parallel3d"]["dp"] == 64);  // 256 GPUs / pp 4
  auto text = args;
  text.pop_back();
  CHECK_THAT(run(text).out, Contains("deepseek-v3 on 256 x GB200"));
  // Whole trays only; a one-host node is used whole.
  auto bad = args;
  bad[8] = "66";
  const auto e = run(bad);
  CHECK(e.code == 1);
  CHECK_THAT(e.err, Contains("--gpus-per-node 66") && Contains("whole hosts of 4 GPUs"));
  const auto dgx = run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100",
                        "--gpus-per-node", "4", "--gpu", "H100-SXM", "--seq-len", "4096"});
  CHECK_THAT(dgx.err, Contains("--gpus-per-node 4") && Contains("is one host of 8 GPUs"));
}

TEST_CASE("estimate --optimizer-impl: ZeRO steps fused, DDP as torch.optim's foreach") {
  // gpt2-xl (1,557,611,200 parameters) on 8 A100-80GB (2.039 TB/s x 0.8 of the bundled
  // memory_efficiency), amp-bf16 DDP: the whole model steps on every GPU, fp32 weights,
  // gradients and moments. foreach AdamW moves 80 B a parameter, fused 28 (4 us a kernel).
  const std::vector<std::string> ddp = {
      "estimate",   "--model", "gpt2-xl",     "--topology", "dgx-a100",  "--gpu", "A100-80GB",
      "--strategy", "ddp",     "--precision", "amp-bf16",   "--seq-len", "1024",  "--json"};
  auto args = ddp;
  const auto foreach = nlohmann::json::parse(run(args).out);
  CHECK(foreach["training"]["optimizer_impl"] == "foreach");
  const double params = 1557611200.0, hbm = 2.039e12 * 0.8;
  CHECK(foreach["step"]["optimizer_s"].get<double>() == Approx(params * 80 / hbm + 4e-6));
  args.insert(args.end(), {"--optimizer-impl", "fused"});
  const auto fused = nlohmann::json::parse(run(args).out);
  CHECK(fused["training"]["optimizer_impl"] == "fused");
  CHECK(fused["step"]["optimizer_s"].get<double>() == Approx(params * 28 / hbm + 4e-6));
  // for-loop: foreach's passes and time, and named as asked in the JSON and the text.
  args = ddp;
  args.insert(args.end(), {"--optimizer-impl", "for-loop"});
  const auto loop = nlohmann::json::parse(run(args).out);
  CHECK(loop["training"]["optimizer_impl"] == "for-loop");
  CHECK(loop["step"]["optimizer_s"].get<double>() == Approx(params * 80 / hbm + 4e-6));
  args.pop_back();
  args.pop_back();
  args.erase(std::find(args.begin(), args.end(), "--json"));
  args.insert(args.end(), {"--optimizer-impl", "for-loop"});
  CHECK_THAT(run(args).out, Contains("adamw (for-loop)"));
  // The text names the step's implementation: ZeRO's default is DeepSpeed's fused Adam.
  CHECK_THAT(run(kBase).out, Contains("adamw (fused)"));
  CHECK_THAT(run({"estimate", "--model", "gpt2", "--topology", "dgx-a100", "--gpu", "A100-80GB",
                  "--strategy", "ddp"})
                 .out,
             Contains("adamw (foreach)"));
  const auto bad = run(with({"--optimizer-impl", "loop"}));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--optimizer-impl") && Contains("loop"));
  // SGD is priced as one fused pass whatever runs it: the text names no implementation.
  const auto sgd = run({"estimate", "--model", "gpt2", "--topology", "dgx-a100", "--gpu",
                        "A100-80GB", "--strategy", "ddp", "--optimizer", "sgd"});
  CHECK_THAT(sgd.out, Contains("bf16, sgd, checkpointing"));
  // An offloaded ZeRO optimizer is DeepSpeed's CPU Adam, fused, even when foreach is asked.
  CHECK_THAT(run(with({"--offload", "optimizer", "--optimizer-impl", "foreach"})).out,
             Contains("adamw (fused)"));
}

TEST_CASE(
    "estimate --layer-kernels: autocast runs eager PyTorch unless fused kernels are named, bf16 "
    "when eager is") {
  // GPT-2 under amp-bf16 DDP on one H100: the eager inventory adds element-wise work to every
  // block (cost/test_eager_layers.cpp counts it), so fused kernels are faster; the GEMMs are
  // the same. The text and JSON say which was priced.
  const std::vector<std::string> base = {
      "estimate", "--model",   "gpt2", "--topology",    "dgx-h100", "--gpu",
      "H100-SXM", "--gpus",    "1",    "--strategy",    "ddp",      "--precision",
      "amp-bf16", "--seq-len", "1024", "--micro-batch", "8"};
  auto json = base;
  json.emplace_back("--json");
  const auto eager = nlohmann::json::parse(run(json).out);
  CHECK(eager["training"]["layer_kernels"] == "eager");
  json.insert(json.end(), {"--layer-kernels", "fused"});
  const auto fused = nlohmann::json::parse(run(json).out);
  CHECK(fused["training"]["layer_kernels"] == "fused");
  const auto& ec = eager["compute_per_micro_step"];
  const auto& fc = fused["compute_per_micro_step"];
  CHECK(ec["elementwise_s"].get<double>() > 2 * fc["elementwise_s"].get<double>());
  CHECK(ec["gemm_s"].get<double>() == Approx(fc["gemm_s"].get<double>()));
  CHECK_THAT(run(base).out, Contains("amp-bf16 (eager kernels)"));
  // bf16 weights without autocast (FSDP2's MixedPrecisionPolicy) run eager only when asked,
  // every tensor bf16: more element-wise work than fused kernels, less than autocast's casts.
  auto pure = json;
  pure[12] = "bf16";
  pure.back() = "eager";
  const auto bf16_eager = nlohmann::json::parse(run(pure).out);
  CHECK(bf16_eager["training"]["layer_kernels"] == "eager");
  pure.pop_back();
  pure.pop_back();
  const auto bf16_fused = nlohmann::json::parse(run(pure).out);
  CHECK(bf16_fused["training"]["layer_kernels"] == "fused");  // the default without autocast
  const auto elementwise = [](const nlohmann::json& j) {
    return j["compute_per_micro_step"]["elementwise_s"].get<double>();
  };
  CHECK(elementwise(bf16_eager) > elementwise(bf16_fused));
  CHECK(elementwise(bf16_eager) < elementwise(eager));
  // A layout runs fused kernels: eager is refused there, not ignored.
  const auto layout =
      run({"estimate", "--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--strategy", "megatron", "--tp", "8", "--seq-len", "4096", "--layer-kernels", "eager"});
  CHECK(layout.code == 1);
  CHECK_THAT(layout.err, Contains("--layer-kernels: eager is modelled for the data-parallel"));
  // An unknown value names the flag.
  auto bad = base;
  bad.insert(bad.end(), {"--layer-kernels", "compiled"});
  const auto unknown = run(bad);
  CHECK(unknown.code == 1);
  CHECK_THAT(unknown.err, Contains("--layer-kernels") && Contains("compiled"));
}

TEST_CASE(
    "FSDP2 selective checkpointing: torchtitan's Llama 2 70B fits 64 A100s at batch 1, not 2") {
  // torchtitan's docs/performance.md (commit 3faaa1a0d, Aug 2024) ran Llama 2 70B under FSDP2
  // on 64 A100 80GB with per-op selective checkpointing at local batch 1, "because batch 2
  // with selective AC ran out of memory" (its footnote). Per block and token the policy keeps
  // 2 x (8192 + 8192 + 1024 + 8192 + 28672 + 8192) bytes and a 256-byte log-sum-exp: 125,184;
  // 80 blocks x 4096 tokens x 2 samples is 76.4 GiB of activations alone.
  const auto at = [](const char* batch) {
    return run(
        {"estimate",   "--model",         "llama-2-70b", "--nodes",    "8",     "--gpu",
         "A100-80GB",  "--topology",      "dgx-a100",    "--strategy", "fsdp2", "--sharding",
         "parameters", "--checkpointing", "selective",   "--seq-len",  "4096",  "--micro-batch",
         batch,        "--layer-kernels", "eager"});
  };
  const auto one = at("1"), two = at("2");
  REQUIRE(one.code == 0);
  REQUIRE(two.code == 0);
  CHECK_THAT(one.out, !Contains("does NOT fit"));
  CHECK_THAT(two.out, Contains("does NOT fit on A100-80GB"));
}

TEST_CASE("full checkpointing of every Nth block (--checkpoint-every), checked") {
  // Llama 2 7B under FSDP FULL_SHARD on 8 H100s, 8 x 2048 tokens: every 2nd of the 32 blocks
  // checkpointed keeps 16 blocks whole and 16 inputs; the recomputation is half of full's.
  const auto at = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"memory", "--model",       "llama-2-7b", "--gpus",
                                  "8",      "--strategy",    "fsdp-full",  "--seq-len",
                                  "2048",   "--micro-batch", "8"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto half = at({"--checkpointing", "full", "--checkpoint-every", "2"});
  REQUIRE(half.code == 0);
  CHECK_THAT(half.out, Contains("transformer blocks kept whole x 16 layers") &&
                           Contains("block inputs (checkpoints, 1 block in 2) x 16 layers"));
  const auto none = at({"--checkpoint-every", "2"});
  CHECK(none.code == 1);
  CHECK_THAT(none.err, Contains("--checkpoint-every 2 needs --checkpointing full"));
  const auto zero = at({"--checkpointing", "full", "--checkpoint-every", "0"});
  CHECK(zero.code == 1);
  CHECK_THAT(zero.err, Contains("--checkpoint-every") && Contains("positive"));
}

TEST_CASE("Megatron-LM layouts: --overlap-grad-reduce and --overlap-param-gather") {
  // Llama 2 7B at tp 2 over 4 nodes of 8 H100s (dp 16): the distributed optimizer's
  // reduce-scatter and all-gather, after backward and after the step by default, go beside the
  // last backward and the next forward; the step can only get shorter.
  const auto at = [](std::vector<std::string> extra) {
    std::vector<std::string> args{
        "estimate", "--model",  "llama-2-7b", "--topology", "dgx-h100",
        "--gpu",    "H100-SXM", "--nodes",    "4",          "--tp",
        "2",        "--sp",     "--seq-len",  "4096",       "--global-batch",
        "64",       "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto plain = at({}), both = at({"--overlap-grad-reduce", "--overlap-param-gather"});
  REQUIRE(plain.code == 0);
  REQUIRE(both.code == 0);
  const auto p = nlohmann::json::parse(plain.out).at("parallel3d");
  const auto b = nlohmann::json::parse(both.out).at("parallel3d");
  CHECK(b.at("overlap_grad_reduce") == true);
  CHECK(b.at("overlap_param_gather") == true);
  CHECK(b.at("step_time_s").get<double>() < p.at("step_time_s").get<double>());
  // The reduce-scatter in Megatron-LM's buckets of max(40 M, 16 x 1 M) parameters: 3.37 G
  // parameters on each GPU of a tp 2 rank make 85 messages.
  CHECK(b.at("collectives").at(0).at("messages") == 85);
  CHECK(p.at("collectives").at(0).at("messages") == 1);
  const auto text =
      run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--nodes", "4", "--tp", "2", "--sp", "--seq-len", "4096", "--overlap-grad-reduce"});
  CHECK_THAT(text.out, Contains("gradient reduction overlapped"));
  // The gather overlap alone (Megatron-LM since August 2024): no buckets, so the next forward
  // waits on one whole gather, as long as the gather after the step.
  const auto alone = nlohmann::json::parse(at({"--overlap-param-gather"}).out).at("parallel3d");
  CHECK(alone.at("step_time_s").get<double>() ==
        Approx(p.at("step_time_s").get<double>()).epsilon(1e-9));
  // and the layout line says so rather than claiming an overlap.
  const auto alone_text =
      run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--nodes", "4", "--tp", "2", "--sp", "--seq-len", "4096", "--overlap-param-gather"});
  CHECK_THAT(alone_text.out, Contains("weight gather in one bucket the next forward waits on"));
  CHECK_THAT(alone_text.out, !Contains("weight gathers overlapped"));
}

TEST_CASE("Megatron-LM layouts: --ddp-bucket-size and --grad-reduce-in-bf16") {
  // The layout above, Llama 2 7B at tp 2 on 32 H100s (dp 16): each GPU holds half of the
  // 6,738,415,616 parameters but the 266,240 of the norms (65 x 4096), which it holds whole:
  // 3,369,340,928, in Megatron-Bridge's buckets of 128 x 2^20 = 134,217,728 parameters: 26 messages
  // (25.1 rounded up). With bf16 main gradients the reduce-scatter carries 2 B a parameter,
  // as many bytes as the bf16 weight gather; without, 4 B.
  const auto at = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"estimate",
                                  "--model",
                                  "llama-2-7b",
                                  "--topology",
                                  "dgx-h100",
                                  "--gpu",
                                  "H100-SXM",
                                  "--nodes",
                                  "4",
                                  "--tp",
                                  "2",
                                  "--sp",
                                  "--json",
                                  "--overlap-grad-reduce",
                                  "--ddp-bucket-size",
                                  "134217728"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto fp32 = at({}), bf16 = at({"--grad-reduce-in-bf16"});
  REQUIRE(fp32.code == 0);
  REQUIRE(bf16.code == 0);
  const auto f = nlohmann::json::parse(fp32.out).at("parallel3d");
  const auto b = nlohmann::json::parse(bf16.out).at("parallel3d");
  CHECK(f.at("ddp_bucket_size") == 134217728);
  CHECK(f.at("collectives").at(0).at("messages") == 26);
  CHECK(f.at("collectives").at(0).at("bytes") == 4LL * 3369340928);
  CHECK(b.at("collectives").at(0).at("bytes") == 2LL * 3369340928);
  CHECK(b.at("collectives").at(1).at("bytes") == b.at("collectives").at(0).at("bytes"));
  CHECK(b.at("grad_reduce_in_bf16") == true);
  const auto text = run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu",
                         "H100-SXM", "--nodes", "4", "--tp", "2", "--overlap-grad-reduce",
                         "--ddp-bucket-size", "134217728", "--grad-reduce-in-bf16"});
  CHECK_THAT(text.out, Contains("gradient reduction overlapped (buckets of 134,217,728 "
                                "parameters), main gradients in bf16"));
  // Refused, naming the flags: a size without the overlap, a size of 0, bf16 reduction of
  // fp16 training.
  const auto base =
      std::vector<std::string>{"estimate", "--model",  "llama-2-7b", "--topology", "dgx-h100",
                               "--gpu",    "H100-SXM", "--tp",       "2"};
  auto no_overlap = base;
  no_overlap.insert(no_overlap.end(), {"--ddp-bucket-size", "134217728"});
  const auto r1 = run(no_overlap);
  CHECK(r1.code == 1);
  CHECK_THAT(r1.err, Contains("--ddp-bucket-size needs --overlap-grad-reduce"));
  auto zero = base;
  zero.insert(zero.end(), {"--overlap-grad-reduce", "--ddp-bucket-size", "0"});
  const auto r2 = run(zero);
  CHECK(r2.code != 0);
  CHECK_THAT(r2.err, Contains("--ddp-bucket-size") && Contains("from 1 to 2^50 parameters"));
  zero.back() = "1e9";  // not read as 1,000,000,000: a count of parameters is whole
  const auto r2b = run(zero);
  CHECK(r2b.code != 0);
  CHECK_THAT(r2b.err, Contains("1e9: a whole number of parameters"));
  auto fp16 = base;
  fp16.insert(fp16.end(), {"--precision", "fp16", "--grad-reduce-in-bf16"});
  const auto r3 = run(fp16);
  CHECK(r3.code == 1);
  CHECK_THAT(r3.err, Contains("--grad-reduce-in-bf16 needs --precision bf16"));
}

TEST_CASE("Megatron-LM layouts: --fp8-param-gather") {
  // Llama 2 7B at tp 2 on 32 H100s with per-tensor FP8: each GPU's 32 blocks hold
  // (4 x 4096^2 + 3 x 4096 x 11008) / 2 = 101,187,584 Linear weights, W = 3,238,002,688 in all.
  // With the flag they are FP8 tensors only: 2 W bytes fewer weights (6.03 GiB), and the
  // weight gather carries 2 x 3,369,340,928 - W bytes.
  const auto at = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"estimate", "--model",      "llama-2-7b", "--topology",
                                  "dgx-h100", "--gpu",        "H100-SXM",   "--nodes",
                                  "4",        "--tp",         "2",          "--sp",
                                  "--json",   "--fp8-recipe", "tensorwise"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto plain = at({}), fp8 = at({"--fp8-param-gather"});
  REQUIRE(plain.code == 0);
  REQUIRE(fp8.code == 0);
  const auto p = nlohmann::json::parse(plain.out).at("parallel3d");
  const auto f = nlohmann::json::parse(fp8.out).at("parallel3d");
  const std::int64_t w = 32LL * (4 * 4096 * 4096 + 3 * 4096 * 11008) / 2;
  CHECK(p.at("memory").at("weights").get<std::int64_t>() -
            f.at("memory").at("weights").get<std::int64_t>() ==
        2 * w);
  CHECK(f.at("collectives").at(1).at("bytes") == 2LL * 3369340928 - w);
  CHECK(f.at("fp8_param_gather") == true);
  // Megatron-LM's: with an FP8 recipe and the distributed optimizer.
  const auto refused = run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu",
                            "H100-SXM", "--tp", "2", "--fp8-param-gather"});
  CHECK(refused.code == 1);
  CHECK_THAT(refused.err, Contains("--fp8-param-gather needs an FP8 recipe (--fp8-recipe)"));
  // plan takes it for its Megatron-LM layouts, and its note compares the chosen layout in bf16
  // (without FP8 weights to keep: that comparison once failed on it).
  const auto plan = run({"plan", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu",
                         "H100-SXM", "--global-batch", "64", "--seq-len", "4096", "--strategy",
                         "megatron", "--fp8-recipe", "tensorwise", "--fp8-param-gather", "--json"});
  REQUIRE(plan.code == 0);
  const auto planned = nlohmann::json::parse(plan.out);
  CHECK(planned.at("best").at("fp8_param_gather") == true);
  CHECK_THAT(planned.at("notes").dump(), Contains("against the same layout in bf16"));
  // Flags no layout of the search could take are refused, naming the flag, not dropped.
  const std::vector<std::string> base{"plan",       "--model",        "llama-2-7b",
                                      "--topology", "dgx-h100",       "--gpu",
                                      "H100-SXM",   "--global-batch", "64"};
  const auto plan_with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto no_recipe = plan_with({"--fp8-param-gather"});
  CHECK(no_recipe.code == 1);
  CHECK_THAT(no_recipe.err, Contains("--fp8-param-gather: needs an FP8 recipe: give --fp8-recipe"));
  const auto fsdp2 = plan_with({"--strategy", "fsdp2", "--grad-reduce-in-bf16"});
  CHECK(fsdp2.code == 1);
  CHECK_THAT(fsdp2.err,
             Contains("--grad-reduce-in-bf16: Megatron-LM's: add megatron to --strategy"));
  const auto fp16 = plan_with({"--precision", "fp16", "--grad-reduce-in-bf16"});
  CHECK(fp16.code == 1);
  CHECK_THAT(fp16.err, Contains("--grad-reduce-in-bf16: needs bf16 among --precision"));
}

TEST_CASE("layouts: torchtitan steps foreach when asked, Megatron-LM refuses it") {
  // Llama 2 7B under FSDP2 over 8 H100s: each rank steps 6,738,415,616 / 8 parameters of fp32
  // shards with fp32 gradients, 28 B fused or 80 B foreach at 3.35 TB/s x 0.8, 4 us a kernel.
  const std::vector<std::string> base = {
      "estimate",  "--model", "llama-2-7b",    "--topology", "dgx-h100",   "--gpu", "H100-SXM",
      "--seq-len", "4096",    "--micro-batch", "1",          "--strategy", "fsdp2", "--json"};
  const auto optimizer_s = [&](const std::string& impl) {
    auto args = base;
    args.insert(args.end(), {"--optimizer-impl", impl});
    const auto r = run(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out)["parallel3d"]["time"]["optimizer_s"].get<double>();
  };
  const double shard = 6738415616.0 / 8, hbm = 3.35e12 * 0.8;
  CHECK(optimizer_s("framework") == Approx(shard * 28 / hbm + 4e-6));
  CHECK(optimizer_s("foreach") == Approx(shard * 80 / hbm + 4e-6));
  const auto megatron = run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu",
                             "H100-SXM", "--seq-len", "4096", "--strategy", "megatron", "--tp", "2",
                             "--optimizer-impl", "foreach"});
  CHECK(megatron.code == 1);
  CHECK_THAT(megatron.err, Contains("--optimizer-impl foreach: Megatron-LM steps with a fused"));
}

TEST_CASE(
    "estimate --zero-grad on layouts: FSDP2 keeps its gradient shards, Megatron-LM its buffers") {
  // Llama 2 7B, tp 2 x dp 4 on 8 H100s. A tensor-parallel rank holds half of the 6,738,415,616
  // parameters outside the norms and all of the 65 x 4096 = 266,240 norm weights:
  // 3,369,340,928. FSDP2 shards them over dp 4 in fp32; with zero_grad(set_to_none=False) every
  // gradient shard stays allocated: 4 B x 3,369,340,928 / 4.
  const std::vector<std::string> fsdp2 = {
      "estimate", "--model",       "llama-2-7b", "--topology", "dgx-h100", "--gpu",
      "H100-SXM", "--gpus",        "8",          "--strategy", "fsdp2",    "--tp",
      "2",        "--micro-batch", "2",          "--seq-len",  "2048",     "--json"};
  const auto gradients = [](const std::vector<std::string>& a) {
    const auto j = nlohmann::json::parse(run(a).out);
    return j["parallel3d"]["memory"]["gradients"].get<std::int64_t>();
  };
  auto zeros = fsdp2;
  zeros.insert(zeros.end(), {"--zero-grad", "zeros"});
  CHECK(gradients(zeros) == 3'369'340'928);
  CHECK(gradients(fsdp2) < 3'369'340'928 / 8);  // set-to-none: only the head's at backward's start
  // Megatron-LM's gradient buffers persist whatever the loop would do.
  auto megatron = fsdp2;
  megatron[10] = "megatron";
  auto megatron_zeros = megatron;
  megatron_zeros.insert(megatron_zeros.end(), {"--zero-grad", "zeros"});
  CHECK(gradients(megatron_zeros) == gradients(megatron));
}

TEST_CASE("estimate: a data-parallel run above the plan's headroom says the plan rejects it") {
  // An H100-SXM holds 81,559 MiB = 79.65 GiB; dtplan plan keeps 10% free: 71.68 GiB usable.
  // Llama 2 7B under FSDP at micro-batch 3 x 4096 tokens needs 75.72 GiB: it fits the GPU,
  // not the plan.
  const auto r =
      run({"estimate", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--strategy", "fsdp-full", "--micro-batch", "3", "--seq-len", "4096"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("of 79.65 GiB; above dtplan plan's 10% headroom (71.68 GiB usable)") &&
                        Contains("plan rejects it"));
}

TEST_CASE("estimate: an eager forward whose kernels are short waits on the host's launches") {
  // Llama 3.2 1B under autocast, micro-batch 4 on an H100: each of its 16 blocks launches 40
  // element-wise kernels, 7 GEMMs and the attention kernel forward; outside them the token
  // lookup, the final RMSNorm's six ops, the LM head and the loss's three: 16 x 48 + 11 = 779
  // launches at data/compute.json's 59 us, 45.961 ms, longer than the kernels.
  const std::vector<std::string> args = {"estimate", "--model",    "llama-3.2-1b", "--topology",
                                         "dgx-h100", "--gpu",      "H100-SXM",     "--gpus",
                                         "1",        "--strategy", "ddp",          "--precision",
                                         "amp-bf16", "--seq-len",  "1024",         "--micro-batch",
                                         "4"};
  auto json = args;
  json.emplace_back("--json");
  const auto j = nlohmann::json::parse(run(json).out)["compute_per_micro_step"];
  CHECK(j["forward_s"].get<double>() == Approx(779 * 59e-6).epsilon(1e-9));
  CHECK(j["host_wait_s"].get<double>() > 0);
  CHECK_THAT(run(args).out, Contains("on the host's eager launches"));
  // fp32's long kernels hide the launches.
  json[12] = "fp32";
  const auto fp32 = nlohmann::json::parse(run(json).out)["compute_per_micro_step"];
  CHECK(fp32["host_wait_s"].get<double>() == 0);
}

TEST_CASE("estimate: an eager FSDP step also waits on FSDP's hooks, per wrapped module") {
  // Llama 3.2 1B in bf16 parameters (FSDP's MixedPrecision, no autocast), micro-batch 4 on an
  // H100: each block launches 30 element-wise kernels, 7 GEMMs and the attention kernel
  // forward, 11 launches outside them (as above): 16 x 38 + 11 = 619 at 59 us; FSDP wraps the
  // 16 blocks and the root, 17 modules at 2.16 ms (data/compute.json, measured on an H200:
  // data/measurements/h200-cuda). 36.521 + 36.72 ms, longer than the kernels.
  const std::vector<std::string> args = {"estimate",
                                         "--model",
                                         "llama-3.2-1b",
                                         "--topology",
                                         "dgx-h100",
                                         "--gpu",
                                         "H100-SXM",
                                         "--gpus",
                                         "1",
                                         "--strategy",
                                         "fsdp-full",
                                         "--precision",
                                         "bf16",
                                         "--layer-kernels",
                                         "eager",
                                         "--seq-len",
                                         "1024",
                                         "--micro-batch",
                                         "4"};
  auto json = args;
  json.emplace_back("--json");
  const auto j = nlohmann::json::parse(run(json).out)["compute_per_micro_step"];
  CHECK(j["forward_s"].get<double>() == Approx(619 * 59e-6 + 17 * 2.16e-3).epsilon(1e-9));
  CHECK_THAT(run(args).out, Contains("on the host's eager launches and FSDP's hooks (") &&
                                Contains(" of host time over 17 wrapped modules)"));
}

TEST_CASE("Megatron-LM layouts: tensor-parallel collectives overlapped with their GEMMs") {
  const std::vector<std::string> base{"estimate", "--model",    "llama-2-70b", "--topology",
                                      "dgx-h100", "--gpu",      "H100-SXM",    "--gpus",
                                      "8",        "--strategy", "megatron",    "--tp",
                                      "2",        "--sp",       "--seq-len",   "4096"};
  auto with = base;
  with.emplace_back("--tp-comm-overlap");
  const auto text = run(with);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Contains("sequence parallel (collectives overlapped with their GEMMs)") &&
                           Contains("tensor-parallel collectives not hidden"));
  // Here every collective is shorter than its GEMM: what stays exposed is the last chunk of
  // each pipelined reduce-scatter, 1/16 of the 8 collectives a block runs alone, plus the
  // userbuffers kernels' SMs taken from the GEMMs (the cost tests derive it exactly). Without
  // those SMs it would be 1/16; it stays well under the collectives run alone.
  const auto tp_s = [&](std::vector<std::string> args) {
    args.emplace_back("--json");
    const auto j = nlohmann::json::parse(run(args).out);
    return j["parallel3d"]["time"]["tp_comm_per_microbatch_s"].get<double>();
  };
  CHECK(tp_s(with) > tp_s(base) / 16);
  CHECK(tp_s(with) < tp_s(base) / 2);
  // Megatron-LM asserts sequence parallelism; plan refuses it without Megatron-LM.
  auto no_sp = with;
  no_sp.erase(std::find(no_sp.begin(), no_sp.end(), "--sp"));
  const auto refused = run(no_sp);
  CHECK(refused.code == 1);
  CHECK_THAT(refused.err, Contains("--tp-comm-overlap needs --sp"));
  const auto plan =
      run({"plan", "--model", "llama-2-7b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--global-batch", "64", "--strategy", "fsdp2", "--tp-comm-overlap"});
  CHECK(plan.code == 1);
  CHECK_THAT(plan.err, Contains("--tp-comm-overlap: Megatron-LM's"));
}

TEST_CASE("trial: estimate's batch line says how gradients sync across accumulation") {
  // As dtplan plan writes it: DDP defers its all-reduce to the last micro-step (no_sync)
  // unless told otherwise; without accumulation there is nothing to say.
  const std::vector<std::string> ddp = {"estimate", "--model",       "gpt2-xl",   "--topology",
                                        "dgx-a100", "--gpu",         "A100-80GB", "--strategy",
                                        "ddp",      "--seq-len",     "1024",      "--micro-batch",
                                        "8",        "--global-batch"};
  auto deferred = ddp;
  deferred.emplace_back("512");
  CHECK_THAT(run(deferred).out,
             Contains("micro-batch 8 x accumulation 8 x 8 GPUs = 512 (no_sync)"));
  auto every = deferred;
  every.emplace_back("--sync-every-micro-step");
  CHECK_THAT(run(every).out,
             Contains("micro-batch 8 x accumulation 8 x 8 GPUs = 512 (sync every micro-step)"));
  auto single = ddp;
  single.emplace_back("64");
  CHECK_THAT(run(single).out, Contains("micro-batch 8 x accumulation 1 x 8 GPUs = 64, sequence"));
  const auto j =
      nlohmann::json::parse(run({"estimate", "--model", "gpt2-xl", "--topology", "dgx-a100",
                                 "--gpu", "A100-80GB", "--strategy", "ddp", "--seq-len", "1024",
                                 "--micro-batch", "8", "--global-batch", "512", "--json"})
                                .out);
  CHECK(j["no_sync"] == true);
}
