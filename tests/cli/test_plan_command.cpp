// Tests for cli/src/plan_command.cpp and plan_report.cpp: the issue's example end to end (a
// plan, the runners-up, why the rest lost, a DeepSpeed config and launch lines), the JSON
// keys, the exports written, and bad input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli_runner.hpp"
#include "dtplan/model/plan.hpp"

using Catch::Contains;

namespace {
using Result = dtplan::test::CliResult;
Result run(std::vector<std::string> args) {
  return dtplan::test::run_dtplan(std::move(args));
}
const std::vector<std::string> kExample = {
    "plan",      "--model",        "gpt2-xl", "--topology", "pcie-split-8", "--gpu",
    "A100-80GB", "--global-batch", "512",     "--seq-len",  "1024"};
std::vector<std::string> with(std::vector<std::string> extra) {
  auto args = kExample;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
std::filesystem::path temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("dtplan-test-cli-" + name);
}
std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}
}  // namespace

TEST_CASE("the issue's example: a plan, runners-up, why the rest lost, DeepSpeed and launch") {
  const auto ds = temp("ds_config.json");
  std::filesystem::remove(ds);
  const auto r = run(with({"--export-deepspeed", ds.string(), "--export-launch"}));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("best: ") && Contains("ranking (top 5)") &&
                        Contains("why the other strategies lost") && Contains("Pareto front") &&
                        Contains("rejected: ") && Contains("out of memory by") &&
                        Contains("% slower") && Contains("wrote DeepSpeed config"));
  // The entries past the nearest misses are counted with separators, as every other count.
  CHECK(std::regex_search(r.out, std::regex("\\.\\.\\. and [0-9]{1,3}(,[0-9]{3})+ more\\n")));
  CHECK_FALSE(std::regex_search(r.out, std::regex("\\.\\.\\. and [0-9]{4,} more")));
  CHECK_THAT(r.out, Contains("torchrun --standalone --nnodes=1 --nproc_per_node=8 train.py"));
  CHECK_THAT(r.out, Contains("--deepspeed_config " + ds.string()));
  const auto config = nlohmann::json::parse(read(ds));
  CHECK(config["train_batch_size"] == 512);
  // The best plan here is FSDP, which DeepSpeed does not run: the config holds the best ZeRO
  // plan and the report says how far behind it is.
  const auto stage = config["zero_optimization"]["stage"].get<int>();
  CHECK((stage >= 1 && stage <= 3));
  CHECK_THAT(r.out, Contains("the DeepSpeed config and deepspeed line hold the best ZeRO plan"));
  CHECK(config["train_micro_batch_size_per_gpu"].get<std::int64_t>() *
            config["gradient_accumulation_steps"].get<std::int64_t>() * 8 ==
        512);
  CHECK(config["zero_optimization"].contains("stage"));
}

TEST_CASE("plan --json has the documented keys, consistent with each other") {
  const auto r = run(with({"--json", "--top", "3", "--all-rejected"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& b = j["best"];
  for (const auto* key :
       {"strategy", "precision", "micro_batch", "grad_accum", "dp", "global_batch", "memory",
        "step_time_s", "samples_per_s", "tokens_per_s", "mfu"}) {
    CHECK(b.contains(key));
  }
  CHECK(b["micro_batch"].get<std::int64_t>() * b["grad_accum"].get<std::int64_t>() *
            b["dp"].get<std::int64_t>() ==
        512);
  CHECK(b["memory"]["total"] == b["memory_bytes"]);
  CHECK(b["memory"]["total"].get<std::int64_t>() <=
        j["capacity"]["usable_bytes"].get<std::int64_t>());
  CHECK(j["capacity"]["bytes"] == 85'899'345'920LL);
  CHECK(j["candidates"].size() == 3);
  for (std::size_t i = 1; i < j["candidates"].size(); ++i) {
    CHECK(j["candidates"][i - 1]["objective"].get<double>() <=
          j["candidates"][i]["objective"].get<double>());
  }
  CHECK(j["best_estimate"]["step_time_s"].get<double>() == Approx(b["step_time_s"].get<double>()));
  REQUIRE_FALSE(j["rejected"].empty());
  for (const auto& rej : j["rejected"]) {
    CHECK(rej.contains("config"));
    CHECK(rej.contains("reason"));
  }
  CHECK(j["stats"]["configs_evaluated"].get<std::int64_t>() > 1000);
  CHECK(j["stats"]["elapsed_s"].get<double>() > 0.0);
  // The nine data-parallel strategies and the two layout frameworks, each at its best.
  CHECK(j["by_strategy"].size() == 11);
  CHECK(j["by_strategy"][9]["strategy"] == "megatron");
  CHECK(j["by_strategy"][10]["strategy"] == "fsdp2");
  // Every candidate carries its full layout under one key, the same keys for both families.
  for (const auto& c : j["candidates"]) {
    for (const auto* key :
         {"family", "framework", "sharding", "shard_ranks", "dp", "tp", "pp", "cp", "interleave",
          "schedule", "micro_batch", "grad_accum", "recompute", "offload", "precision"}) {
      CHECK(c["layout"].contains(key));
    }
    CHECK(c["layout"]["dp"].get<std::int64_t>() * c["layout"]["tp"].get<std::int64_t>() *
              c["layout"]["pp"].get<std::int64_t>() * c["layout"]["cp"].get<std::int64_t>() ==
          c["gpus"].get<std::int64_t>());
  }
  CHECK(j["exact_batch"] == true);
}

TEST_CASE("schedule, Accelerate config and the saved plan") {
  const auto acc = temp("accelerate.yaml");
  const auto saved = temp("plan.json");
  const auto r = run(with({"--dataset-size", "1000000", "--epochs", "2", "--base-lr", "3e-4",
                           "--base-global-batch", "256", "--export-accelerate", acc.string(),
                           "--save-plan", saved.string(), "--json"}));
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // ceil(2,000,000 / 512) = 3907 steps.
  CHECK(j["schedule"]["optimizer_steps"] == 3907);
  CHECK(j["schedule"]["micro_steps"] == 3907 * j["best"]["grad_accum"].get<std::int64_t>());
  CHECK(j["schedule"]["scaled_lr"].get<double>() == Approx(6e-4));
  CHECK(j["schedule"]["time_s"].get<double>() ==
        Approx(3907 * j["best"]["step_time_s"].get<double>()));
  CHECK_THAT(read(acc), Contains("num_processes: 8\n") && Contains("distributed_type: "));
  const auto plan = dtplan::plan_from_json(saved);
  CHECK(plan.global_batch == 512);
  CHECK(plan.training.seq_len == 1024);
  CHECK(plan.model == "gpt2-xl");
  CHECK(plan.predicted.step_time_s == Approx(j["best"]["step_time_s"].get<double>()));
}

TEST_CASE("plan bad input: one line naming the problem") {
  auto r = run(with({"--objective", "fastest"}));
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("unknown objective 'fastest'"));
  r = run(with({"--objective", "cost"}));
  CHECK_THAT(r.err, Contains("--price-per-gpu-hour"));
  r = run({"plan", "--model", "gpt2-xl", "--topology", "pcie-split-8", "--gpu", "A100-80",
           "--global-batch", "512"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("unknown GPU 'A100-80'"));
  r = run(with({"--steps", "100", "--dataset-size", "1000", "--epochs", "1"}));
  CHECK_THAT(r.err, Contains("--steps: give the number of steps or the --dataset-size, not both"));
  r = run(with({"--headroom", "1.5"}));
  CHECK_THAT(r.err, Contains("--headroom"));
  r = run(with({"--strategy", "zero4"}));
  CHECK_THAT(r.err, Contains("zero4") && Contains("or a layout framework: megatron, fsdp2"));
  r = run(with({"--export-deepspeed", "/nonexistent-dir/ds.json"}));
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--export-deepspeed /nonexistent-dir/ds.json: the directory "
                             "/nonexistent-dir does not exist"));
  r = run({"plan", "--params", "7B", "--topology", "pcie-split-8", "--gpu", "A100-80GB",
           "--global-batch", "8"});
  CHECK_THAT(r.err, Contains("layer shapes"));
  r = run({"plan", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu", "A100-80GB"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--global-batch"));
}

TEST_CASE("exports: all files or none, the deepspeed line only with its config") {
  const auto ok = temp("kept.json");
  std::filesystem::remove(ok);
  // The second path cannot be written: nothing is written, not even the first.
  auto r =
      run(with({"--save-plan", ok.string(), "--export-accelerate", "/nonexistent-dir/a.yaml"}));
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--export-accelerate /nonexistent-dir/a.yaml"));
  CHECK_FALSE(std::filesystem::exists(ok));
  for (const auto& entry : std::filesystem::directory_iterator(ok.parent_path()))
    CHECK(entry.path().filename().string().find(".dtplan-") == std::string::npos);
  // Launch lines without --export-deepspeed say what the deepspeed line needs.
  r = run(with({"--export-launch"}));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("# the script must use micro-batch ") &&
                        Contains("# deepspeed: add --export-deepspeed FILE"));
  CHECK(r.out.find("--deepspeed_config") == std::string::npos);
  // A ZeRO plan's Accelerate config points at a DeepSpeed file: without --export-deepspeed
  // it is written beside the Accelerate config (z.yaml -> z.deepspeed.json) and named.
  const auto z_ds = temp("z.deepspeed.json");
  std::filesystem::remove(z_ds);
  r = run(with({"--strategy", "zero2", "--export-accelerate", temp("z.yaml").string()}));
  REQUIRE(r.code == 0);
  CHECK_THAT(read(temp("z.yaml")), Contains("deepspeed_config_file: " + z_ds.string()));
  CHECK(nlohmann::json::parse(read(z_ds))["zero_optimization"]["stage"].get<int>() == 2);
  CHECK_THAT(r.out, Contains("wrote DeepSpeed config: " + z_ds.string()));
  // The learning rate scaled from --base-lr reaches the DeepSpeed config.
  const auto ds = temp("lr.json");
  r = run(with({"--strategy", "zero2", "--base-lr", "1e-4", "--base-global-batch", "256",
                "--export-deepspeed", ds.string(), "--offload", "optimizer"}));
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(read(ds))["optimizer"]["params"]["lr"].get<double>() ==
        Approx(2e-4));  // 1e-4 x 512 / 256
}

TEST_CASE("plan refuses non-finite and out-of-range numbers, and sequences a model cannot take") {
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--lr", "nan"},
                                                        {"--lr", "-1"},
                                                        {"--price-per-gpu-hour", "inf"},
                                                        {"--max-hours", "nan"},
                                                        {"--steps", "0"},
                                                        {"--gpus", "0"},
                                                        {"--show-rejected", "-1"},
                                                        {"--threads", "-2"},
                                                        {"--headroom", "1"},
                                                        {"--headroom", "nan"}}) {
    const auto r = run(with({flag, value}));
    INFO(flag << " " << value);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Contains(flag));
  }
  auto r = run({"plan", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu", "A100-80GB",
                "--global-batch", "8", "--seq-len", "2048"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--seq-len 2048: longer than the model's 1024 learned positions"));
  r = run({"plan", "--model", "mnist-convnet", "--topology", "pcie-split-8", "--gpu", "A100-80GB",
           "--global-batch", "64", "--seq-len", "128"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("has no sequence"));
}

TEST_CASE("nothing fits: exit 1, the rejections and what would fit") {
  const auto r = run({"plan", "--model", "llama-2-70b", "--topology", "dgx-a100", "--gpu",
                      "A100-40GB", "--global-batch", "8", "--seq-len", "4096", "--offload", "none",
                      "--strategy", "ddp,zero1"});
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("nothing fits; what would:") &&
                        Contains("--offload optimizer+params") &&
                        Contains("--strategy zero3 or fsdp-full"));
  CHECK_THAT(r.out, !Contains("{"));  // every field marker rendered as its flag
  CHECK_THAT(r.err, Contains("no configuration fits A100-40GB"));
}

TEST_CASE(
    "a batch the GPUs do not divide: the nearest on all of them, or exact with --exact-batch") {
  const std::vector<std::string> base = {"plan",         "--model",   "gpt2",      "--topology",
                                         "pcie-split-8", "--gpu",     "A100-80GB", "--global-batch",
                                         "100",          "--seq-len", "512",       "--json"};
  const auto near = nlohmann::json::parse(run(base).out);
  // 100 / 8 = 12.5 per GPU: 96 or 104 on 8 GPUs, against 100 on 4 (or fewer) GPUs.
  const auto batch = near["best"]["global_batch"].get<std::int64_t>();
  CHECK((batch == 96 || batch == 104));
  CHECK(near["best"]["dp"] == 8);
  CHECK(near["exact_batch"] == false);
  CHECK(near["best_exact"]["global_batch"] == 100);
  // Exactly 100 among the data-parallel strategies: on 4 GPUs, and the note says which
  // batches would use all 8.
  auto args = base;
  args.back() = "--exact-batch";
  args.insert(args.end(), {"--strategy", "ddp,zero2,fsdp-grad-op"});
  const auto r = run(args);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Contains("global batch 100 is not a multiple of 8 GPUs") && Contains("96 or 104"));
  CHECK_THAT(r.out, Contains("= 100, "));
  // With the layouts in the search, 8 GPUs reach exactly 100 as 2 pipeline stages x 4
  // data-parallel ranks x 25 samples (8 is not a divisor of 100, 4 is).
  args = base;
  args.emplace_back("--exact-batch");
  const auto all = nlohmann::json::parse(run(args).out);
  const auto& layout = all["best"]["layout"];
  CHECK(all["best"]["global_batch"] == 100);
  if (all["best"]["gpus"] == 8) {
    CHECK(layout["pp"].get<std::int64_t>() * layout["tp"].get<std::int64_t>() *
              layout["cp"].get<std::int64_t>() ==
          2);
    CHECK(layout["dp"] == 4);
  }
}

TEST_CASE("plan --tp restricts every candidate, --sp takes on and off") {
  const auto r = dtplan::test::run_dtplan(
      {"plan", "--model", "llama-2-70b", "--topology", "dgx-h100", "--nodes", "16", "--gpu",
       "H100-SXM", "--global-batch", "1024", "--seq-len", "4096", "--tp", "4,8", "--json"});
  REQUIRE(r.code == 0);
  // Without tp 1 the data-parallel strategies are left out: every candidate is a layout.
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(!j["candidates"].empty());
  for (const auto& c : j["candidates"])
    CHECK((c["layout"]["tp"] == 4 || c["layout"]["tp"] == 8));
  CHECK(j["stats"]["data_parallel_evaluated"] == 0);
  const auto bad =
      dtplan::test::run_dtplan({"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu",
                                "A100-80GB", "--global-batch", "16", "--sp", "maybe"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("--sp maybe: expected on, off"));
  const auto zero =
      dtplan::test::run_dtplan({"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu",
                                "A100-80GB", "--global-batch", "16", "--tp", "0"});
  CHECK(zero.code == 1);
  CHECK_THAT(zero.err, Catch::Matchers::Contains("sizes are positive"));
  // GPT-2 has 12 layers: no pipeline of 5 stages (5 divides neither 12 nor 12 + 2, Megatron's
  // split counting the embedding and the loss, and is no power of two, split as evenly as the
  // layers come); the report says which sizes are allowed.
  const auto none =
      dtplan::test::run_dtplan({"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu",
                                "A100-80GB", "--global-batch", "16", "--pp", "5"});
  CHECK_THAT(none.out,
             Catch::Matchers::Contains("pp must divide 12 layers or 14, or be a power of two up to "
                                       "half the layers (1,2,3,4,6,7,12; of those the request "
                                       "allows: none)"));
  // Eager attention rules out context parallelism, and the reason says so in flags.
  const auto eager = dtplan::test::run_dtplan(
      {"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu", "A100-80GB",
       "--global-batch", "16", "--cp", "2", "--attention", "eager", "--strategy", "megatron"});
  CHECK_THAT(eager.out, Catch::Matchers::Contains(
                            "(context parallelism needs fused attention: --attention is eager) "
                            "(1; of those the request allows: none)"));
}

TEST_CASE("plan --schedule restricts the pipeline schedules") {
  const auto r = dtplan::test::run_dtplan({"plan", "--model", "llama-2-70b", "--topology",
                                           "dgx-h100", "--nodes", "16", "--gpu", "H100-SXM",
                                           "--global-batch", "1024", "--seq-len", "4096", "--pp",
                                           "4,8", "--schedule", "zb-h1,zbv", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out)["candidates"];
  REQUIRE(!j.empty());
  for (const auto& c : j) {
    const auto& l = c["layout"];
    CHECK((l["schedule"] == "zb-h1" || l["schedule"] == "zbv"));
    if (l["schedule"] == "zbv") CHECK(l["interleave"] == 2);
  }
  const auto bad =
      dtplan::test::run_dtplan({"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu",
                                "A100-80GB", "--global-batch", "16", "--schedule", "dualpipe"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("pipeline schedule 'dualpipe' is not known"));
}

TEST_CASE("a micro-batch larger than the global batch is refused, not planned at another batch") {
  const auto r = run({"plan", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu", "A100-80GB",
                      "--micro-batch", "32", "--global-batch", "16"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--micro-batch 32 exceeds --global-batch 16"));
  CHECK(r.out.empty());
}

TEST_CASE("plan flags are range-checked: --max-hours 0 is not a deadline") {
  auto r = run(with({"--steps", "100", "--max-hours", "0"}));
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--max-hours: must be positive, got 0"));
  r = run(with({"--lr", "1e308"}));
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--lr: must be at most 10 (a sane maximum), got 1e308"));
}

TEST_CASE("a GPU without bf16 (V100, T4) plans in fp16 and fp32 and says so") {
  for (const std::string gpu : {"V100-32GB", "T4"}) {
    INFO(gpu);
    const auto ds = temp("v100-ds.json");
    std::filesystem::remove(ds);
    auto r = run({"plan", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu", gpu,
                  "--global-batch", "64", "--export-deepspeed", ds.string()});
    CHECK(r.code == 0);
    CHECK_THAT(r.err, !Contains("bf16"));
    CHECK_THAT(r.out,
               Contains("note: " + gpu + " has no bf16 tensor cores: searched fp16 and fp32"));
    CHECK(std::filesystem::exists(ds));
    r = run({"plan", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu", gpu,
             "--global-batch", "64", "--precision", "fp16"});
    CHECK(r.code == 0);
    // Asked for by name, bf16 is an error naming the flag, and no file is left behind.
    std::filesystem::remove(ds);
    r = run({"plan", "--model", "gpt2", "--topology", "pcie-split-8", "--gpu", gpu,
             "--global-batch", "64", "--precision", "bf16", "--export-deepspeed", ds.string()});
    CHECK(r.code == 1);
    CHECK_THAT(r.err,
               Contains("--precision: bf16: " + gpu + " has no bf16 tensor-core peak (it runs "));
    CHECK_FALSE(std::filesystem::exists(ds));
  }
}

// Issue 14, item 16: "searched 5,064 configurations ... rejected: 5,151" did not add up; the
// rejected list also holds combinations never evaluated (one entry per unsupported family).
TEST_CASE("the plan's counts add up: searched = chosen + rejected, and what each counts") {
  const auto j = nlohmann::json::parse(run(with({"--json", "--all-rejected"})).out);
  const auto& s = j["stats"];
  const auto evaluated = s["configs_evaluated"].get<std::int64_t>();
  const auto chosen = s["configs_chosen"].get<std::int64_t>();
  const auto rejected = s["configs_rejected"].get<std::int64_t>();
  const auto skipped = s["combinations_not_evaluated"].get<std::int64_t>();
  CHECK(chosen == 1);
  CHECK(evaluated == chosen + rejected);
  CHECK(static_cast<std::int64_t>(j["rejected"].size()) == rejected + skipped);
  std::int64_t of_evaluated = 0;
  std::int64_t slower = 0;
  for (const auto& r : j["rejected"]) {
    const auto reason = r["reason"].get<std::string>();
    of_evaluated += reason != "unsupported" && reason != "batch_unreachable" ? 1 : 0;
    slower += reason == "slower" ? 1 : 0;
  }
  CHECK(of_evaluated == rejected);
  CHECK(skipped > 0);  // dp beyond one node, for one: the identity is not trivial here
  // Every configuration that fits is the chosen one or slower than it.
  CHECK(slower + chosen >= static_cast<std::int64_t>(j["candidates"].size()));

  const auto text = run(kExample).out;
  auto thousands = [](std::int64_t n) {
    std::string digits = std::to_string(n);
    for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3)
      digits.insert(static_cast<std::size_t>(i), ",");
    return digits;
  };
  CHECK_THAT(text, Contains("searched " + thousands(evaluated) + " configurations in "));
  // The line wraps between its parts (at 100 characters), so each part is checked whole.
  CHECK_THAT(text, Contains(": 1 chosen, " + thousands(rejected) + " rejected;"));
  CHECK_THAT(text, Contains(thousands(skipped) + " more combinations rejected without evaluation"));
  CHECK_THAT(text, Contains("rejected: " + thousands(rejected + skipped) + " = " +
                            thousands(rejected) + " of the searched configurations ("));
  CHECK_THAT(text, Contains(" + " + thousands(skipped) + " combinations not evaluated ("));
}

// Issue 18: --json serialised every rejected entry (92,571 entries, 255 MB for Llama 2 70B on
// 1,024 H100). By default it gives each reason's count and nearest misses; --all-rejected
// lists them all, and the summary must agree with that list.
TEST_CASE("plan --json counts the rejected entries per reason, --all-rejected lists each") {
  const auto j = nlohmann::json::parse(run(with({"--json"})).out);
  const auto all = nlohmann::json::parse(run(with({"--json", "--all-rejected"})).out);
  CHECK_FALSE(j.contains("rejected"));
  // The text report has no full list: --all-rejected alone is refused, not ignored.
  const auto text = run(with({"--all-rejected"}));
  CHECK(text.code == 1);
  CHECK_THAT(text.err,
             Contains("--all-rejected") && Contains("add --json") && Contains("--show-rejected"));
  REQUIRE(all["rejected"].is_array());
  auto amount = [](const nlohmann::json& e) {
    for (const auto* key : {"over_gib", "behind_pct", "over_hours"})
      if (e.contains(key)) return e[key].get<double>();
    return 0.0;
  };
  std::int64_t total = 0;
  for (const auto& group : j["rejected_summary"]) {
    const auto reason = group["reason"].get<std::string>();
    const auto count = group["count"].get<std::int64_t>();
    total += count;
    std::vector<nlohmann::json> listed;
    for (const auto& e : all["rejected"])
      if (e["reason"] == reason) listed.push_back(e);
    CHECK(static_cast<std::int64_t>(listed.size()) == count);
    // The nearest are the first of the whole list by amount (equal amounts as listed), though
    // without --all-rejected the search kept only a few of the layouts.
    std::stable_sort(listed.begin(), listed.end(),
                     [&](const auto& a, const auto& b) { return amount(a) < amount(b); });
    const auto& nearest = group["nearest"];
    REQUIRE(static_cast<std::int64_t>(nearest.size()) == std::min<std::int64_t>(count, 5));
    for (std::size_t i = 0; i < nearest.size(); ++i)
      CHECK(nearest[i] == listed[i]);
    if (group["evaluated"] == false) {
      std::int64_t in_details = 0;
      for (const auto& d : group["details"])
        in_details += d["count"].get<std::int64_t>();
      CHECK(in_details == count);
    }
  }
  const auto& s = j["stats"];
  CHECK(total == s["configs_rejected"].get<std::int64_t>() +
                     s["combinations_not_evaluated"].get<std::int64_t>());
  CHECK(total == static_cast<std::int64_t>(all["rejected"].size()));
  // --show-rejected sets how many nearest misses each reason keeps.
  const auto two = nlohmann::json::parse(run(with({"--json", "--show-rejected", "2"})).out);
  for (const auto& group : two["rejected_summary"])
    CHECK(group["nearest"].size() == std::min<std::size_t>(group["count"].get<std::size_t>(), 2));
}

TEST_CASE("the layouts add up: evaluated = fit + over GPU or host memory + past the deadline") {
  const auto j = nlohmann::json::parse(run(with({"--json", "--all-rejected"})).out);
  const auto& x = j["layout_search"];
  REQUIRE(x["searched"] == true);
  const auto evaluated = x["evaluated"].get<std::int64_t>();
  CHECK(evaluated == x["fit"].get<std::int64_t>() + x["out_of_memory"].get<std::int64_t>() +
                         x["host_out_of_memory"].get<std::int64_t>() +
                         x["past_deadline"].get<std::int64_t>());
  CHECK(evaluated == j["stats"]["layouts_evaluated"].get<std::int64_t>());
  CHECK(j["stats"]["configs_evaluated"].get<std::int64_t>() ==
        j["stats"]["data_parallel_evaluated"].get<std::int64_t>() + evaluated);
  // One rejected list: every layout but the chosen one is in it.
  std::int64_t layouts_rejected = 0;
  for (const auto& r : j["rejected"])
    layouts_rejected += r["config"]["layout"]["framework"] == "megatron" ||
                        r["config"]["layout"]["framework"] == "fsdp2";
  const bool best_is_layout =
      j["best"]["layout"]["framework"] == "megatron" || j["best"]["layout"]["framework"] == "fsdp2";
  CHECK(layouts_rejected == evaluated - (best_is_layout ? 1 : 0));
  // Each framework's gradient synchronisation: Megatron-LM once per step after the last
  // micro-batch (as no_sync), FSDP2 in every micro-batch's backward.
  int frameworks_seen = 0;
  for (const auto& r : j["rejected"]) {
    const auto& l = r["config"]["layout"];
    if (l["framework"] == "megatron") {
      CHECK(l["no_sync"] == true);
      frameworks_seen |= 1;
    } else if (l["framework"] == "fsdp2") {
      CHECK(l["no_sync"] == false);
      frameworks_seen |= 2;
    }
  }
  CHECK(frameworks_seen == 3);
}

// Issue 14, item 15: on 4 x RTX 4090 (pcie-1switch-4: 256 GiB of host memory per node) the
// planner used to pick ZeRO-3 offloading optimizer and parameters, which keeps 18 B per
// parameter on the host: 18 x 68,976,648,192 B = 1,156.31 GiB for Llama-2-70B.
TEST_CASE("plan rejects configurations whose offloaded states exceed host memory") {
  constexpr double GiB = 1073741824.0;
  const double need = 18.0 * 68'976'648'192.0;
  const std::vector<std::string> args = {
      "plan",  "--model",    "llama-2-70b",    "--topology", "pcie-1switch-4",
      "--gpu", "RTX-4090",   "--global-batch", "16",         "--seq-len",
      "1024",  "--strategy", "zero3",          "--json",     "--all-rejected"};
  const auto r = run(args);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["capacity"]["host_bytes_per_node"] == 256LL << 30);
  CHECK(j["best"].is_null());
  CHECK(r.code == 1);
  bool seen = false;
  for (const auto& x : j["rejected"]) {
    if (x["reason"] != "host_out_of_memory") continue;
    const auto& c = x["config"];
    if (c["offload"] != "optimizer+params" || c["dp"] != 4 || c["precision"] != "bf16") continue;
    seen = true;
    CHECK(x["config"]["host_memory_bytes_per_node"].get<double>() == Approx(need));
    CHECK(x["over_gib"].get<double>() == Approx(need / GiB - 256.0));  // 900.31 GiB over
  }
  CHECK(seen);
  CHECK_THAT(j["suggestions"][0].get<std::string>(),
             Contains("need 1156.31 GiB of host memory per node; 256.00 GiB per node"));
  // With 2 TiB per node it fits, and the chosen plan holds its host memory.
  auto more = args;
  more.insert(more.end(), {"--host-memory", "2TiB"});
  const auto k = nlohmann::json::parse(run(more).out);
  REQUIRE(k["best"].is_object());
  CHECK(k["best"]["offload"] == "optimizer+params");
  CHECK(k["best"]["host_memory_bytes_per_node"].get<double>() <= 2048.0 * GiB);
}

TEST_CASE("plan at 128K tokens: context-parallel layouts fit, --export-megatron writes the best") {
  const std::vector<std::string> long_context = {
      "plan",  "--model",  "llama-3-8b",     "--topology", "dgx-h100",  "--nodes", "4",
      "--gpu", "H100-SXM", "--global-batch", "32",         "--seq-len", "131072"};
  auto args = long_context;
  const auto megatron = temp("megatron.sh");
  std::filesystem::remove(megatron);
  args.insert(args.end(), {"--export-megatron", megatron.string()});
  const auto r = run(args);
  // No data-parallel strategy fits; the layouts that do are an answer, not an error.
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("best: megatron") || Contains("best: fsdp2"));
  CHECK_THAT(r.out, Contains("zero3          out of memory by "));
  const auto text = read(megatron);
  CHECK_THAT(text, Contains("--seq-length 131072"));
  CHECK_THAT(text, Contains("--context-parallel-size "));
  CHECK_THAT(text, Contains("--cp-comm-type p2p"));
  // The data-parallel exports have nothing to describe: refused, and nothing written.
  const auto saved = temp("long-context-plan.json");
  std::filesystem::remove(saved);
  std::filesystem::remove(megatron);
  args.insert(args.end(), {"--save-plan", saved.string()});
  const auto refused = run(args);
  CHECK(refused.code == 1);
  // The Plan file could hold the layout, were it one dtplan-run executes: it says what is not.
  CHECK_THAT(refused.err, Contains("--save-plan: the best layout (tp 4 x cp 4 (p2p) x pp 1 x dp "
                                   "2, sequence parallel,"));
  CHECK_THAT(refused.err, Contains("cannot be saved as a plan: it has context parallelism (cp 4; "
                                   "--cp 1) and sequence parallelism (--sp off), which dtplan-run "
                                   "does not execute; and no data-parallel plan fits"));
  CHECK_FALSE(std::filesystem::exists(saved));
  CHECK_FALSE(std::filesystem::exists(megatron));
  args.pop_back();
  args.pop_back();
  const auto ds = temp("long-context-ds.json");
  args.insert(args.end(), {"--export-deepspeed", ds.string()});
  const auto no_ds = run(args);
  CHECK(no_ds.code == 1);
  CHECK_THAT(no_ds.err, Contains("--export-deepspeed: describes a data-parallel plan, and only "
                                 "tensor x context x pipeline layouts fit"));
}

TEST_CASE("plan --save-plan writes the best layout when dtplan-run executes it") {
  const auto saved = temp("layout-plan.json");
  std::filesystem::remove(saved);
  // The README's CPU example: GPT-2 on 2 GPUs, 16 samples of 128 tokens.
  std::vector<std::string> gpt2;
  std::istringstream words(
      "plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 2 --global-batch 16 "
      "--seq-len 128 --exact-batch --save-plan");
  for (std::string w; words >> w;)
    gpt2.push_back(w);
  gpt2.push_back(saved.string());
  auto tp2 = gpt2;
  tp2.insert(tp2.end(), {"--strategy", "megatron", "--tp", "2", "--sp", "off"});
  const auto r = run(tp2);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("best: megatron, bf16, tp 2 x pp 1 x dp 1, micro-batch 16 x 1"));
  CHECK_THAT(r.out, Contains("wrote plan (the best layout, tp 2 x pp 1 x dp 1, micro-batch 16 x 1, "
                             "recompute none): " +
                             saved.string()));
  const auto p = dtplan::plan_from_json(saved);
  CHECK(p.tp == 2);
  CHECK(p.pp == 1);
  CHECK(p.training.dp_size == 1);
  CHECK(p.training.micro_batch == 16);
  CHECK(p.grad_accum == 1);
  CHECK(p.training.strategy == dtplan::Strategy::zero1);  // Megatron-LM's distributed optimizer
  // The plan's prediction is the layout's, as the ranking printed it (16 samples a step).
  CHECK(p.predicted.samples_per_s == Approx(16 / p.predicted.step_time_s));
  // With the default search the best is an interleaved pipeline: the Plan file keeps the best
  // data-parallel plan and says why.
  const auto d = run(gpt2);
  REQUIRE(d.code == 0);
  CHECK_THAT(d.out, Contains("note: --save-plan: the best layout cannot be saved as a plan: it has "
                             "an interleaved pipeline (4 chunks per GPU; --interleave 1)"));
  CHECK(dtplan::plan_from_json(saved).tp == 1);
}

TEST_CASE("plan --export-accelerate writes the best plan with FSDP2 when it is an FSDP2 layout") {
  const auto acc = temp("fsdp2-accelerate.yaml");
  std::filesystem::remove(acc);
  // Only FSDP2 layouts Accelerate runs: no pipeline, no sequence parallelism.
  const auto r = run(with(
      {"--strategy", "fsdp2", "--pp", "1", "--sp", "off", "--export-accelerate", acc.string()}));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("best: fsdp2") && Contains("wrote Accelerate config (FSDP2): "));
  const auto text = read(acc);
  CHECK_THAT(text, Contains("distributed_type: FSDP\n") && Contains("  fsdp_version: 2\n") &&
                       Contains("parallelism_config:\n"));
  // With the data-parallel strategies in the search the best here is FSDP1's SHARD_GRAD_OP,
  // which the same flag writes as before (fsdp_sharding_strategy, no fsdp_version).
  std::filesystem::remove(acc);
  REQUIRE(run(with({"--export-accelerate", acc.string()})).code == 0);
  CHECK_THAT(read(acc), Contains("fsdp_sharding_strategy: SHARD_GRAD_OP"));
}

TEST_CASE("plan: expert sizes a model cannot take are named, and --precision fp8 plans in FP8") {
  const std::vector<std::string> mixtral{
      "plan", "--model",    "mixtral-8x7b", "--topology", "dgx-h100", "--nodes",
      "4",    "--gpu",      "H100-SXM",     "--seq-len",  "4096",     "--global-batch",
      "256",  "--strategy", "megatron"};
  auto args = mixtral;
  args.insert(args.end(), {"--ep", "16"});
  auto r = run(args);
  CHECK(r.code == 1);
  CHECK_THAT(r.out + r.err, Contains("ep must divide the 8 experts (1,2,4,8; of those the "
                                     "request allows: none)"));
  // A dense model has no experts to spread.
  r = run({"plan", "--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--seq-len", "4096", "--global-batch", "64", "--ep", "2"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Contains("--ep: expert parallelism (--ep, --etp) needs a mixture-of-experts"));
  // fp8 in the precision list: bf16 with Transformer Engine's delayed recipe, layouts only.
  args = mixtral;
  args.insert(args.end(), {"--precision", "fp8", "--json"});
  r = run(args);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["best"]["fp8_recipe"] == "delayed");
}

TEST_CASE("plan: FP8 with a data-parallel export is refused before the search") {
  const std::vector<std::string> base{"plan",      "--model",        "llama-3-8b", "--topology",
                                      "dgx-h100",  "--gpu",          "H100-SXM",   "--seq-len",
                                      "4096",      "--global-batch", "64",         "--fp8-recipe",
                                      "tensorwise"};
  auto args = base;
  args.emplace_back("--export-launch");
  auto r = run(args);
  CHECK(r.code == 1);
  CHECK(r.out.empty());  // no search ran
  CHECK_THAT(r.err, Contains("--export-launch: FP8 is planned for Megatron-LM and torchtitan "
                             "layouts only") &&
                        Contains("--export-megatron or --export-torchtitan"));
  args = base;
  args.insert(args.end(), {"--precision", "fp8", "--save-plan", "/tmp/dtplan-fp8-plan.json"});
  r = run(args);
  CHECK(r.code == 1);
  // The Plan file may hold a layout, but dtplan-run runs no FP8 GEMMs: still nothing to save.
  CHECK_THAT(r.err, Contains("--save-plan: dtplan-run has no FP8 GEMMs, and FP8 is planned for "
                             "layouts only"));
}

TEST_CASE("a Megatron-LM layout for a model its arguments cannot state says so") {
  // gpt-oss-20b's attention sinks and biased router have no Megatron-LM argument; a plan
  // restricted to Megatron-LM layouts still prices them (Megatron-Core runs the model through
  // a provider) and notes that the export would refuse it.
  const auto r =
      run({"plan", "--model", "gpt-oss-20b", "--topology", "dgx-h100", "--gpu", "H100-SXM",
           "--global-batch", "64", "--seq-len", "4096", "--strategy", "megatron"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("cannot express attention sinks, a router with a bias"));
  CHECK_THAT(r.out, Contains("--export-megatron refuses it"));  // the flag, not its field name
}

TEST_CASE("plan --recompute-modules: the sets searched under selective, refused without it") {
  const auto base = std::vector<std::string>{
      "plan",    "--model",    "mixtral-8x7b", "--topology", "dgx-h100",
      "--nodes", "4",          "--gpu",        "H100-SXM",   "--global-batch",
      "256",     "--seq-len",  "4096",         "--tp",       "1",
      "--pp",    "1",          "--ep",         "8",          "--micro-batch",
      "1",       "--strategy", "megatron",     "--json"};
  auto a = base;
  a.insert(a.end(), {"--checkpointing", "selective", "--recompute-modules", "layernorm,moe_act"});
  const auto r = run(a);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(!j["candidates"].empty());
  for (const auto& c : j["candidates"])
    CHECK(c["recompute_modules"] == "layernorm,moe_act");
  a = base;
  a.insert(a.end(), {"--checkpointing", "full", "--recompute-modules", "moe_act"});
  const auto bad = run(a);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--recompute-modules needs selective among --checkpointing"));
}

TEST_CASE(
    "plan --zero-grad and --layer-kernels reach the candidates, and eager leaves layouts out") {
  // GPT-2 (124,439,808 parameters, its 50,257 x 768 = 38,597,376 embedding tied to the head),
  // DDP in fp32 on 4 GPUs. zero_grad(set_to_none=True) frees the gradients between steps, so at
  // the start of backward, the peak here, only the head's exist: 4 B x 38,597,376. With zeros
  // every gradient stays allocated: 4 B x 124,439,808.
  const std::vector<std::string> base = {"plan",
                                         "--model",
                                         "gpt2",
                                         "--topology",
                                         "pcie-1switch-4",
                                         "--gpu",
                                         "A100-80GB",
                                         "--global-batch",
                                         "16",
                                         "--seq-len",
                                         "1024",
                                         "--strategy",
                                         "ddp",
                                         "--precision",
                                         "fp32",
                                         "--micro-batch",
                                         "4",
                                         "--json"};
  const auto freed = nlohmann::json::parse(run(base).out);
  CHECK(freed["best"]["memory"]["gradients"] == 4 * 38'597'376);
  CHECK(freed["request"]["zero_grad"] == "set-to-none");
  auto args = base;
  args.insert(args.end(), {"--zero-grad", "zeros"});
  const auto kept = nlohmann::json::parse(run(args).out);
  CHECK(kept["best"]["memory"]["gradients"] == 4 * 124'439'808);
  CHECK(kept["request"]["zero_grad"] == "zeros");
  // Eager kernels are modelled for the data-parallel strategies: the layouts, which run fused
  // ones, are left out with the reason instead of being ranked as if eager.
  const auto eager =
      run({"plan", "--model", "gpt2-xl", "--topology", "pcie-split-8", "--gpu", "A100-80GB",
           "--global-batch", "512", "--seq-len", "1024", "--layer-kernels", "eager"});
  CHECK(eager.code == 0);
  CHECK_THAT(eager.out, Contains("layouts not searched: --layer-kernels eager is modelled for the "
                                 "data-parallel strategies"));
  CHECK_THAT(eager.out, !Contains("best: fsdp2") && !Contains("best: megatron"));
}

TEST_CASE("the planner's unsupported combinations name settings, not flags the user never typed") {
  // The planner tries CPU offload by itself; a DDP candidate with optimizer offload is refused
  // by the strategy's rule, and the line says "offload optimizer", not "--offload optimizer".
  const auto r = run(kExample);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("unsupported (") &&
                        Contains("strategy ddp: offload optimizer needs zero1, zero2 or zero3"));
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("unsupported (") != std::string::npos)
      CHECK(line.find("--") == std::string::npos);
  }
  const auto j = nlohmann::json::parse(run(with({"--json"})).out);
  bool named = false;
  for (const auto& group : j["rejected_summary"]) {
    if (group["reason"] != "unsupported") continue;
    for (const auto& d : group["details"]) {
      const auto text = d["detail"].get<std::string>();
      CHECK(text.find("--") == std::string::npos);
      named |= text.find("offload optimizer+params needs zero3") != std::string::npos;
    }
  }
  CHECK(named);
}

TEST_CASE("plan says which runners-up are closer to the best than dtplan's error") {
  // The README's 70B example on 16 DGX H100: the runners-up whose step is behind the best by
  // less than the band's median error are counted (JSON) and named (text).
  const std::vector<std::string> args = {"plan",     "--model",        "llama-2-70b", "--topology",
                                         "dgx-h100", "--nodes",        "16",          "--gpu",
                                         "H100-SXM", "--global-batch", "512"};
  auto json_args = args;
  json_args.emplace_back("--json");
  const auto j = nlohmann::json::parse(run(json_args).out);
  REQUIRE(j["error_band"]["rows"].get<int>() > 0);
  const double median = j["error_band"]["median_abs_error"].get<double>();
  const double best_step = j["best"]["step_time_s"].get<double>();
  std::int64_t close = 0;
  for (std::size_t i = 1; i < j["candidates"].size(); ++i) {
    // Throughput objective: behind = best samples/s over this one's - 1 = step / best step - 1
    // at the same global batch.
    const double behind = j["candidates"][i]["step_time_s"].get<double>() / best_step - 1.0;
    close += behind < median;
  }
  CHECK(j["within_error_band"].get<std::int64_t>() == close);
  const auto text = run(args);
  REQUIRE(text.code == 0);
  if (close > 0) {
    CHECK_THAT(text.out, Contains("#2 to #" + std::to_string(close + 1) + " are within") ||
                             Contains("#2 is within"));
    CHECK_THAT(text.out, Contains("dtplan's median error on published runs of " +
                                  j["error_band"]["group"].get<std::string>()));
  } else {
    CHECK_THAT(text.out, !Contains("could rank either way"));
  }
}

TEST_CASE("trial: a layout's host-memory rejection states its excess, not a need of 0 GiB") {
  // Llama 3.1 405B on one node of eight L40S: nothing fits, and the layouts with parameter
  // offload need terabytes of host memory per node. Their entries hold only the excess.
  const auto r =
      run({"plan", "--model", "llama-3.1-405b", "--topology", "pcie-1switch-8", "--gpu", "L40S",
           "--global-batch", "64", "--seq-len", "4096", "--show-rejected", "40"});
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("host memory per node over by"));
  CHECK_THAT(r.out, !Contains("needs 0.00 GiB"));
}

TEST_CASE("trial: the ranking's header and last column say what was searched and ranked") {
  // A strategy list leaves the layouts out: the header no longer says they were ranked too.
  const auto dp = run({"plan", "--model", "mistral-7b", "--topology", "dgx-a100", "--nodes", "2",
                       "--gpu", "A100-80GB", "--global-batch", "96", "--seq-len", "4096",
                       "--strategy", "fsdp-full,zero3", "--checkpointing", "full"});
  REQUIRE(dp.code == 0);
  CHECK_THAT(dp.out, Contains("data-parallel strategies (tensor x context x pipeline layouts "
                              "not searched):"));
  // Pareto rows: each reads faster than the one above, with as many decimals as that takes
  // (two rows of this front are 10.540 and 10.545 samples/s).
  const auto start = dp.out.find("Pareto front");
  REQUIRE(start != std::string::npos);
  std::istringstream rows(dp.out.substr(start));
  std::string line;
  std::getline(rows, line);  // title
  std::getline(rows, line);  // header
  std::string previous;
  std::size_t seen = 0;
  while (std::getline(rows, line) && !line.empty() && line.rfind("  (", 0) != 0) {
    std::istringstream cells(line);
    std::string gib, rate;
    cells >> gib >> rate;
    CHECK(rate != previous);
    if (!previous.empty()) CHECK(std::stod(rate) > std::stod(previous));
    previous = rate;
    ++seen;
  }
  CHECK(seen >= 3);
  // Under the cost objective the last column is the extra cost, and says so.
  const auto cost = run({"plan", "--model", "llama-3-8b", "--topology", "pcie-split-8", "--gpu",
                         "A100-40GB", "--global-batch", "256", "--seq-len", "8192", "--objective",
                         "cost", "--price-per-gpu-hour", "1.8", "--steps", "20000", "--gpus", "8"});
  REQUIRE(cost.code == 0);
  CHECK_THAT(cost.out, Contains("MFU  costlier"));
  const auto bad = run(with({"--objective", "cheap"}));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Contains("--objective: unknown objective 'cheap'"));
}

TEST_CASE("every ranked entry's estimate command prices it as the plan did") {
  // The plan prints `dtplan estimate ...` for its best entry and lists one per ranked entry in
  // JSON; each, run, must give the entry's step time to the last bits (a trial could not
  // reproduce an FSDP2 row without knowing --sharding gradients). Data-parallel strategies,
  // FSDP2 and Megatron-LM layouts, context parallelism, experts, FP8 with TP overlap.
  const std::vector<std::vector<std::string>> plans = {
      {"--model", "gpt2-xl", "--topology", "pcie-split-8", "--gpu", "A100-80GB", "--global-batch",
       "512", "--seq-len", "1024", "--top", "8"},
      {"--model", "llama-2-70b", "--topology", "dgx-h100", "--nodes", "16", "--gpu", "H100-SXM",
       "--global-batch", "1024", "--seq-len", "4096", "--top", "8"},
      {"--model", "mixtral-8x7b", "--topology", "dgx-h100", "--nodes", "4", "--gpu", "H100-SXM",
       "--global-batch", "256", "--seq-len", "4096", "--top", "6"},
      {"--model", "llama-3-8b", "--topology", "dgx-h100", "--gpu", "H100-SXM", "--global-batch",
       "128", "--seq-len", "8192", "--fp8-recipe", "tensorwise", "--strategy", "megatron",
       "--tp-comm-overlap", "--overlap-grad-reduce", "--top", "6"}};
  std::size_t checked = 0;
  for (const auto& p : plans) {
    std::vector<std::string> args{"plan"};
    args.insert(args.end(), p.begin(), p.end());
    args.emplace_back("--json");
    const auto plan = run(args);
    REQUIRE(plan.code == 0);
    const auto j = nlohmann::json::parse(plan.out);
    CHECK(j["reproduce"]["args"] == j["candidates"][0]["estimate"]["args"]);
    for (const auto& c : j["candidates"]) {
      // One shape for data-parallel entries and layouts (a trial found layouts' strategy null).
      CHECK(c["strategy"].is_string());
      CHECK(c["checkpointing"].is_string());
      auto e = c["estimate"]["args"].get<std::vector<std::string>>();
      CAPTURE(c["estimate"]["line"].get<std::string>());
      // The harness adds --data-dir to every command; the plan's carried it over.
      const auto dir = std::find(e.begin(), e.end(), "--data-dir");
      REQUIRE(dir != e.end());
      e.erase(dir, dir + 2);
      e.emplace_back("--json");
      const auto est = run(e);
      REQUIRE(est.code == 0);
      const auto ej = nlohmann::json::parse(est.out);
      const double step = ej.contains("parallel3d") ? ej["parallel3d"]["step_time_s"].get<double>()
                                                    : ej["step_time_s"].get<double>();
      CHECK(step == Approx(c["step_time_s"].get<double>()).epsilon(1e-12));
      ++checked;
    }
  }
  CHECK(checked >= 20);
  // The text gives the best's line, and says what the layout column's words mean: the
  // example's fifth entry is FSDP2 with the blocks kept gathered, set by --sharding gradients.
  const auto text = run(kExample);
  CHECK_THAT(text.out, Contains("  layout column: fsdp2-keep: FSDP2 keeping each block gathered "
                                "from forward to backward (--sharding gradients)\n"));
  CHECK_THAT(text.out, Contains("  on its own (timeline, --trace, exports): dtplan estimate "
                                "--model gpt2-xl --topology pcie-split-8 --gpu A100-80GB "
                                "--seq-len 1024 --data-dir ") &&
                           Contains(" --strategy fsdp-grad-op --precision bf16 --gpus 8 "
                                    "--micro-batch 16 --global-batch 512 --checkpointing none "
                                    "--offload none\n"));
}

TEST_CASE("trial: the schedule says the warm-up is a ratio, and which") {
  // 2,000 optimizer steps at the default --warmup-ratio 0.03: ceil(60.0) = 60 warm-up steps,
  // and the line says where that number came from; 0.1 gives 200.
  auto r = run(with({"--steps", "2000"}));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("num_training_steps 2,000, warm-up 60 steps (3.0% of them, "
                             "--warmup-ratio)"));
  r = run(with({"--steps", "2000", "--warmup-ratio", "0.1"}));
  CHECK_THAT(r.out, Contains("warm-up 200 steps (10.0% of them, --warmup-ratio)"));
}

TEST_CASE("plan: FSDP2 with tp on every GPU has nothing to shard, and says so") {
  // tp 2 on 2 GPUs leaves dp x cp = 1: torchtitan applies no fully_shard there, and the search
  // has no FSDP2 layout to price. The refusal names that rule, not memory.
  const auto r = run({"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu",
                      "A100-80GB", "--seq-len", "128", "--exact-batch", "--gpus", "2",
                      "--global-batch", "16", "--framework", "fsdp2", "--tp", "2"});
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("FSDP2 layouts need dp x cp > 1, something to shard"));
  CHECK_THAT(r.err, Contains("the request leaves nothing to search"));
  CHECK_THAT(r.err, !Contains("no configuration fits"));
}

TEST_CASE(
    "plan: more data-parallel ranks than samples compete only when no plan reaches the batch") {
  // Llama 3.1 405B at batch 2048 on 512 DGX H100 (4,096 GPUs): ZeRO-3 on all 4,096 reaches 4,096
  // at best (a sample a rank), +100%, and ranked first by 1.6% over the layouts that run 2048
  // itself. It no longer competes: the best trains the batch asked for.
  const auto r =
      run({"plan", "--model", "llama-3.1-405b", "--topology", "dgx-h100", "--nodes", "512", "--gpu",
           "H100-SXM", "--global-batch", "2048", "--seq-len", "8192", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["best"]["global_batch"] == 2048);
  CHECK(j["exact_batch"] == true);
  for (const auto& c : j["candidates"])
    CHECK(c["global_batch"] == 2048);
  // Why ZeRO-3 lost says what its best would train, not "-1.6% slower".
  const auto text =
      run({"plan", "--model", "llama-3.1-405b", "--topology", "dgx-h100", "--nodes", "512", "--gpu",
           "H100-SXM", "--global-batch", "2048", "--seq-len", "8192"});
  CHECK_THAT(text.out, Contains("zero3          batch 4096 (+100.0%): more GPUs than samples"));
}

TEST_CASE("plan: the leanest miss that offloads past the host's memory says so") {
  // DeepSeek-V3 (671B) under FSDP with everything offloaded: the leanest configuration over GPU
  // memory is one GPU's, whose offloaded states alone are terabytes on one node of 2,048 GiB.
  // A bigger GPU, the suggestion after it, would not be enough.
  const auto r =
      run({"plan", "--model", "deepseek-v3", "--topology", "hgx-h800", "--nodes", "2", "--gpu",
           "H800", "--global-batch", "64", "--seq-len", "4096", "--strategy", "fsdp-full"});
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("what the leanest configuration offloads would also need ") &&
                        Contains("of host memory per node, over the 2048.00 GiB per node "
                                 "(--host-memory): a larger GPU alone does not make it fit"));
}

TEST_CASE("plan: --gpus beyond the cluster is said, the search going up to the cluster's") {
  const auto r = run({"plan", "--model", "gpt2", "--topology", "pcie-1switch-4", "--gpu",
                      "A100-80GB", "--gpus", "5", "--global-batch", "16", "--seq-len", "128"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("note: --gpus 5 is more than the 4 GPUs of the cluster (--topology, "
                             "--nodes): the search goes up to 4"));
}
