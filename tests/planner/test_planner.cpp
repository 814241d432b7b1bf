// Tests for planner/src/planner.cpp, search.cpp and outcomes.cpp: the batch rule, the fit with
// headroom, ranking and the Pareto front, objectives, the nearest batch, suggestions, bad input.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/planner/planner.hpp"

using namespace dtplan;
using namespace dtplan::planner;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;

struct Fixture {
  InterconnectTable table = InterconnectTable::load(kData / "interconnect.json");
  Topology topology;
  ModelDesc model;
  GpuSpec gpu;
  cost::ComputeConstants compute = cost::load_compute_constants(kData / "compute.json");
  cost::OverheadConstants overheads = cost::load_overheads(kData / "overheads.json");
  Fixture(const char* model_name, const char* node, std::int64_t nodes, const char* gpu_name)
      : topology(Topology::build(load_node_template(node, kData / "topologies"), nodes, table)),
        model(load_model(model_name, kData / "models")),
        gpu(GpuCatalog::load(kData / "gpus.json").find(gpu_name)) {}
  PlanResult run(const PlanRequest& r) const {
    return plan(model, topology, table, gpu, r, compute, overheads);
  }
};

PlanRequest request(std::int64_t batch, std::int64_t seq) {
  PlanRequest r;
  r.global_batch = batch;
  r.seq_len = seq;
  return r;
}
}  // namespace

TEST_CASE("GPU counts: powers of two inside a node, then whole nodes, then all") {
  CHECK(gpu_counts(8, 4, 32) == std::vector<std::int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(gpu_counts(8, 3, 24) == std::vector<std::int64_t>{1, 2, 4, 8, 16, 24});
  CHECK(gpu_counts(8, 4, 20) == std::vector<std::int64_t>{1, 2, 4, 8, 16});
  CHECK(gpu_counts(4, 1, 4) == std::vector<std::int64_t>{1, 2, 4});
  CHECK(gpu_counts(8, 2, 6) == std::vector<std::int64_t>{1, 2, 4, 6});
}

TEST_CASE("every candidate reaches the global batch exactly and fits with the headroom") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(512, 1024);
  r.top_k = 1000;
  const auto res = f.run(r);
  REQUIRE(res.best);
  CHECK(res.exact_batch);
  // 80 GiB x 0.9, rounded down to a byte.
  CHECK(res.usable.value == static_cast<std::int64_t>(85899345920.0 * 0.9));
  for (const auto& c : res.ranked) {
    CHECK(c.micro_batch * c.grad_accum * c.dp == 512);
    CHECK(c.global_batch == 512);
    CHECK(c.memory <= res.usable);
  }
  for (const auto& rej : res.rejected) {
    if (rej.reason != Reason::out_of_memory) continue;
    CHECK(rej.config.memory > res.usable);
    CHECK(rej.amount == Approx(to_gib(rej.config.memory - res.usable)));
  }
}

TEST_CASE("the best plan's memory is the memory model's, and the ranking is by the objective") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(512, 1024);
  r.top_k = 20;
  const auto res = f.run(r);
  REQUIRE(res.best);
  const auto cfg = training_config(*res.best, r, 8);
  CHECK(res.best->memory == cost::estimate_memory(f.model, cfg, f.overheads).gpu.total());
  // Every candidate's, whether its peak is in backward (growing with the micro-batch) or at
  // the optimizer step (PyTorch's strategies with one micro-step: it does not).
  for (const auto& c : res.ranked) {
    CHECK(c.memory ==
          cost::estimate_memory(f.model, training_config(c, r, 8), f.overheads).gpu.total());
  }
  for (std::size_t i = 1; i < res.ranked.size(); ++i) {
    CHECK(res.ranked[i - 1].objective <= res.ranked[i].objective);
    CHECK(res.ranked[i].samples_per_s <= res.ranked[0].samples_per_s);
  }
  // Throughput: the objective is seconds per sample.
  CHECK(res.best->objective == Approx(res.best->step_time_s / 512.0));
  // "Y% slower" is measured against the best.
  for (const auto& rej : res.rejected) {
    if (rej.reason == Reason::slower) {
      CHECK(rej.amount == Approx(100.0 * (rej.config.objective / res.best->objective - 1.0)));
      CHECK(rej.amount >= 0.0);
    }
  }
}

TEST_CASE(
    "the search rejects a candidate whose optimizer step does not fit, though its backward does") {
  // GPT-2 XL under DDP in fp32 on one A100, checkpointed, micro-batch 1 and one micro-step: its
  // optimizer step (every gradient and foreach Adam's temporary) holds more than its backward.
  // With the usable memory between the two, the candidate must be refused at its step's peak.
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(1, 1024);
  r.max_gpus = 1;
  r.strategies = {Strategy::ddp};
  r.precisions = {Precision::fp32};
  r.checkpointing = {Checkpointing::full};
  r.micro_batches = {1};
  Candidate c;
  c.strategy = Strategy::ddp;
  c.precision = Precision::fp32;
  c.checkpointing = Checkpointing::full;
  c.dp = 1;
  c.micro_batch = 1;
  c.grad_accum = 1;
  const auto e = cost::estimate_memory(f.model, training_config(c, r, 8), f.overheads);
  REQUIRE(e.step_total > e.backward_total);
  const double capacity = 85899345920.0;  // 80 GiB
  const double between = 0.5 * static_cast<double>(e.step_total.value + e.backward_total.value);
  r.headroom = 1.0 - between / capacity;
  const auto res = f.run(r);
  CHECK_FALSE(res.best);
  bool refused = false;
  for (const auto& rej : res.rejected) {
    if (rej.reason != Reason::out_of_memory || rej.config.checkpointing != Checkpointing::full)
      continue;
    refused = true;
    CHECK(rej.config.memory == e.step_total);
  }
  CHECK(refused);
}

TEST_CASE("micro-batches are the divisors of the per-GPU batch, not only powers of two") {
  const Fixture f("gpt2", "pcie-split-8", 1, "A100-80GB");
  auto r = request(24, 512);
  r.top_k = 10000;
  r.strategies = {Strategy::ddp};
  r.precisions = {Precision::bf16};
  r.checkpointing = {Checkpointing::none};
  r.offloads = {Offload::none};
  const auto res = f.run(r);
  std::set<std::int64_t> on_eight;
  for (const auto& c : res.ranked) {
    if (c.dp == 8) on_eight.insert(c.micro_batch);
  }
  CHECK(on_eight == std::set<std::int64_t>{1, 3});  // 24 / 8 = 3
  std::set<std::int64_t> on_two;
  for (const auto& c : res.ranked) {
    if (c.dp == 2) on_two.insert(c.micro_batch);
  }
  CHECK(on_two == std::set<std::int64_t>{1, 2, 3, 4, 6, 12});
}

TEST_CASE("the Pareto front: more memory buys more throughput, nothing dominated") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  const auto res = f.run(request(512, 1024));
  REQUIRE(res.pareto.size() >= 2);
  for (std::size_t i = 1; i < res.pareto.size(); ++i) {
    CHECK(res.pareto[i].memory >= res.pareto[i - 1].memory);
    CHECK(res.pareto[i].objective < res.pareto[i - 1].objective);
  }
  CHECK(res.pareto.back().objective == Approx(res.best->objective));
}

TEST_CASE("the search is deterministic") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  const auto a = f.run(request(512, 1024));
  const auto b = f.run(request(512, 1024));
  REQUIRE(a.ranked.size() == b.ranked.size());
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    CHECK(a.ranked[i].strategy == b.ranked[i].strategy);
    CHECK(a.ranked[i].micro_batch == b.ranked[i].micro_batch);
    CHECK(a.ranked[i].objective == b.ranked[i].objective);
  }
  CHECK(a.rejected.size() == b.rejected.size());
  CHECK(a.configs_evaluated == b.configs_evaluated);
}

// Issue 14, item 2: a long plan shows progress. pcie-split-8 searches 1, 2, 4 and 8 GPUs:
// 9 strategies x 4 GPU counts prepared, then the search: 37 steps.
TEST_CASE("the search tells its progress: each GPU count prepared, then the search") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(512, 1024);
  std::vector<std::pair<std::int64_t, std::int64_t>> told;
  std::vector<std::string> what;
  r.progress = [&](std::int64_t done, std::int64_t total, const std::string& w) {
    told.emplace_back(done, total);
    what.push_back(w);
  };
  f.run(r);
  REQUIRE(told.size() == 38);
  for (std::size_t i = 0; i < told.size(); ++i) {
    CHECK(told[i].first == static_cast<std::int64_t>(i));
    CHECK(told[i].second == 37);
  }
  CHECK_THAT(what[0], Catch::EndsWith(" communication over 1 GPUs"));
  CHECK_THAT(what[3], Catch::EndsWith(" communication over 8 GPUs"));
  CHECK_THAT(what[36], Catch::StartsWith("searching "));
  CHECK(what[37] == "done");
}

TEST_CASE("time and cost objectives: steps x step time, and GPU-hours x price") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(512, 1024);
  r.objective = Objective::time;
  r.steps = 1000;
  const auto t = f.run(r);
  REQUIRE(t.best);
  CHECK(t.best->objective == Approx(1000 * t.best->step_time_s));
  r.objective = Objective::cost;
  r.price_per_gpu_hour = 2.0;
  const auto c = f.run(r);
  REQUIRE(c.best);
  CHECK(c.best->objective ==
        Approx(1000 * c.best->step_time_s * static_cast<double>(c.best->dp) * 2.0 / 3600.0));
  // Samples instead of steps: ceil(1,000,000 / 512) = 1954 steps.
  r.steps = 0;
  r.samples = 1'000'000;
  r.objective = Objective::time;
  const auto s = f.run(r);
  CHECK(s.best->objective == Approx(1954 * s.best->step_time_s));
}

TEST_CASE("no exact batch fits: the nearest reachable one, said so") {
  // Llama-2-13B under ZeRO-3 without offload fits on 8 A100-40GB but not on 1, 2 or 4; 7 is a
  // multiple of 1 GPU only, so the exact pass finds nothing and 8 (7 + 1) on 8 GPUs is nearest.
  const Fixture f("llama-2-13b", "dgx-a100", 1, "A100-40GB");
  auto r = request(7, 512);
  r.strategies = {Strategy::zero3};
  r.offloads = {Offload::none};
  const auto res = f.run(r);
  REQUIRE(res.best);
  CHECK_FALSE(res.exact_batch);
  CHECK(res.best->global_batch == 8);
  CHECK(res.best->dp == 8);
  for (const auto& c : res.ranked)
    CHECK(c.global_batch == 8);
}

TEST_CASE("nothing fits: suggestions name what would, with the GPU count that fits") {
  const Fixture f("llama-2-70b", "dgx-a100", 1, "A100-80GB");
  auto r = request(8, 4096);
  r.strategies = {Strategy::zero3};
  r.offloads = {Offload::none};
  r.checkpointing = {Checkpointing::none};
  // Without checkpointing a 4096-token sample's activations alone exceed the GPU: more GPUs
  // shard the states, not those, so the suggestion says so.
  auto res = f.run(r);
  CHECK_FALSE(res.best);
  std::string all;
  for (const auto& s : res.suggestions)
    all += s + "\n";
  CHECK_THAT(all, Catch::Contains("the leanest (") && Catch::Contains("zero3") &&
                      Catch::Contains("{checkpointing} full") &&
                      Catch::Contains("{offload} optimizer+params") &&
                      Catch::Contains("more GPUs would not help"));
  // With checkpointing the sharded states are what is too big: more GPUs would do.
  r.checkpointing = {Checkpointing::full};
  res = f.run(r);
  CHECK_FALSE(res.best);
  all.clear();
  for (const auto& s : res.suggestions)
    all += s + "\n";
  CHECK_THAT(all, Catch::Contains("more GPUs: the same configuration fits on"));
  // Check the GPU count it names against the memory model: fits there, not at half.
  const auto pos = all.find("fits on ") + 8;
  const auto dp = std::stoll(all.substr(pos));
  Candidate c;
  c.strategy = Strategy::zero3;
  c.precision = Precision::bf16;
  c.dp = dp;
  c.micro_batch = 1;
  c.checkpointing = Checkpointing::full;
  const auto fits = cost::estimate_memory(f.model, training_config(c, r, 8), f.overheads);
  CHECK(fits.gpu.total() <= res.usable);
  c.dp = dp / 2;
  const auto half = cost::estimate_memory(f.model, training_config(c, r, 8), f.overheads);
  CHECK(half.gpu.total() > res.usable);
}

TEST_CASE("nothing fits for host memory: the node count at which the offloaded shards fit") {
  // Llama 3.1 405B on one node of eight L40S (48 GB) with 512 GiB of host memory: ZeRO-3 with
  // parameter offload fits the GPUs but needs terabytes per node. Its offloaded states shard
  // over every rank, so more nodes each hold less: the suggestion names where they fit.
  const Fixture f("llama-3.1-405b", "pcie-1switch-8", 1, "L40S");
  auto r = request(64, 4096);
  const auto res = f.run(r);
  CHECK_FALSE(res.best);
  std::string all;
  for (const auto& s : res.suggestions)
    all += s + "\n";
  const auto at = all.find("more nodes share what it offloads: it fits on ");
  REQUIRE(at != std::string::npos);
  const auto dp = std::stoll(
      all.substr(at + std::string("more nodes share what it offloads: it fits on ").size()));
  CHECK_THAT(
      all, Catch::Contains(std::to_string(dp) + " GPUs ({nodes} " + std::to_string(dp / 8) + ")"));
  // Against the memory model: the host rejection's configuration at that GPU count fits the
  // GPU and each node's host memory; at half of it, a node's host memory is short.
  const Rejected* host = nullptr;
  for (const auto& x : res.rejected) {
    if (x.reason == Reason::host_out_of_memory && (!host || x.amount < host->amount)) host = &x;
  }
  REQUIRE(host != nullptr);
  auto c = host->config;
  c.dp = dp;
  const auto fits = cost::estimate_memory(f.model, training_config(c, r, 8), f.overheads);
  CHECK(fits.gpu.total() <= res.usable);
  CHECK(fits.cpu_per_node <= res.host_capacity);
  c.dp = dp / 2;
  const auto half = cost::estimate_memory(f.model, training_config(c, r, 8), f.overheads);
  CHECK(half.cpu_per_node > res.host_capacity);
}

TEST_CASE("each strategy's outcome: its best and how far behind, or its nearest miss") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  const auto res = f.run(request(512, 1024));
  const auto outcomes = by_strategy(res);
  REQUIRE(outcomes.size() == kStrategies.size());
  for (const auto& o : outcomes) {
    if (o.strategy == res.best->strategy) {
      CHECK(o.behind_pct == 0.0);
      continue;
    }
    REQUIRE(o.best);
    CHECK(o.best->strategy == o.strategy);
    CHECK(o.behind_pct == Approx(100.0 * (o.best->objective / res.best->objective - 1.0)));
  }
}

TEST_CASE("bad requests are refused with the field named") {
  const Fixture f("gpt2", "pcie-split-8", 1, "A100-80GB");
  auto r = request(0, 512);
  CHECK_THROWS_WITH(f.run(r), Catch::Contains("global_batch: "));
  r = request(8, 512);
  r.objective = Objective::cost;
  CHECK_THROWS_WITH(f.run(r), Catch::Contains("price_per_gpu_hour: "));
  r = request(8, 512);
  r.headroom = 1.0;
  CHECK_THROWS_WITH(f.run(r), Catch::Contains("headroom: "));
  r = request(8, 512);
  r.top_k = 0;
  CHECK_THROWS_WITH(f.run(r), Catch::Contains("top_k: "));
  CHECK_THROWS_WITH(parse_objective("fastest"), Catch::Contains("unknown objective 'fastest'") &&
                                                    Catch::Contains("throughput"));
  const auto params = model_from_param_count(1'000'000'000, "--params");
  CHECK_THROWS_WITH(
      plan(params, f.topology, f.table, f.gpu, request(8, 512), f.compute, f.overheads),
      Catch::Contains("layer shapes"));
}

TEST_CASE("both synchronisation modes are searched, FSDP's no_sync costs the full gradients") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(512, 1024);
  r.strategies = {Strategy::fsdp_full};
  r.precisions = {Precision::bf16};
  r.checkpointing = {Checkpointing::full};
  r.offloads = {Offload::none};
  r.top_k = 10000;
  const auto res = f.run(r);
  bool compared = false;
  for (const auto& a : res.ranked) {
    if (!a.no_sync || a.grad_accum == 1) continue;
    for (const auto& b : res.ranked) {
      if (b.no_sync || b.dp != a.dp || b.micro_batch != a.micro_batch) continue;
      // 1,557,611,200 parameters x 2 bytes of unsharded bf16 gradients, plus the 5% allocator
      // slack (data/overheads.json) on them: 3,115,222,400 x 1.05.
      CHECK((a.memory - b.memory).value == 3'270'983'520);
      CHECK(a.step_time_s <= b.step_time_s);  // and less communication
      compared = true;
    }
  }
  CHECK(compared);
  r.sync = Sync::every_micro_step;
  for (const auto& c : f.run(r).ranked)
    CHECK_FALSE(c.no_sync);
  // ZeRO-2 cannot defer synchronisation: never labelled no_sync under accumulation.
  r.sync = Sync::both;
  r.strategies = {Strategy::zero2};
  for (const auto& c : f.run(r).ranked)
    CHECK((!c.no_sync || c.grad_accum == 1));
}

TEST_CASE("a deadline rejects runs that take longer, and says by how much") {
  const Fixture f("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  auto r = request(512, 1024);
  r.objective = Objective::cost;
  r.price_per_gpu_hour = 2.0;
  r.steps = 10'000;
  const auto free = f.run(r);
  REQUIRE(free.best);
  // A deadline just under the cheapest run rejects it; what remains is within the deadline.
  const double cheapest_run_s = 10'000 * free.best->step_time_s;
  r.max_run_s = 0.99 * cheapest_run_s;
  const auto due = f.run(r);
  REQUIRE(due.best);
  CHECK(10'000 * due.best->step_time_s <= r.max_run_s);
  bool rejected = false;
  for (const auto& rej : due.rejected) {
    if (rej.reason != Reason::past_deadline) continue;
    CHECK(rej.amount == Approx((10'000 * rej.config.step_time_s - r.max_run_s) / 3600.0));
    rejected = true;
  }
  CHECK(rejected);
  // Impossible deadlines: nothing fits, and the suggestion is about time, not memory.
  r.max_run_s = 1.0;
  const auto none = f.run(r);
  CHECK_FALSE(none.best);
  REQUIRE(none.suggestions.size() == 1);
  CHECK_THAT(none.suggestions.front(), Catch::Contains("misses {max_run_s}"));
  r.steps = 0;
  CHECK_THROWS_WITH(f.run(r), Catch::Contains("max_run_s: needs"));
}

TEST_CASE("the search prices ZeRO-3's gathers after full recomputation as the estimate does") {
  // DeepSpeed ZeRO-3 gathers the recomputed block's submodules again before their backward:
  // an op only full recomputation adds. The search prepares communication once per strategy
  // and GPU count; the chosen plan's step must still be the estimate's, op for op. (Qwen3-30B-
  // A3B: its 623M-parameter blocks are beyond DeepSpeed's reuse distance of 1e9 elements, and
  // its 384 expert projections per block are gathered one by one, too many to hide.)
  const Fixture f("qwen3-30b-a3b", "dgx-h100", 1, "H100-SXM");
  auto r = request(256, 4096);
  r.strategies = {Strategy::zero3};
  r.checkpointing = {Checkpointing::none, Checkpointing::full};
  const auto res = f.run(r);
  REQUIRE(res.best);
  REQUIRE(res.best->checkpointing == Checkpointing::full);
  const auto cfg = training_config(*res.best, r, 8);
  cost::CommModel all(f.topology, f.table, cfg.dp_size);
  cost::CommModel node(f.topology, f.table, cfg.dp_size);
  cost::StepOptions o;
  o.micro_steps = res.best->grad_accum;
  o.no_sync = res.best->no_sync;
  const auto e = cost::estimate_step(f.model, cfg, o, f.gpu, f.compute, f.overheads,
                                     {all, node, f.compute.kernel_overhead_s});
  REQUIRE(e.comm.ops.size() == 4);
  CHECK(e.comm.ops[3].name == "weights re-gathered after recomputation");
  CHECK(res.best->step_time_s == Approx(e.times.step_s).epsilon(1e-9));
}

namespace {

const std::array kReasons{Reason::out_of_memory,     Reason::host_out_of_memory,
                          Reason::batch_unreachable, Reason::unsupported,
                          Reason::past_deadline,     Reason::slower};

// A rejection's identity, to find a kept entry among all of them.
auto key_of(const Rejected& r) {
  const auto& c = r.config;
  return std::make_tuple(r.reason, r.amount, c.strategy, c.precision, c.checkpointing, c.offload,
                         c.no_sync, c.dp, c.micro_batch, c.global_batch, r.detail);
}

// A candidate's identity and figures.
auto config_of(const Candidate& c) {
  return std::make_tuple(c.strategy, c.precision, c.checkpointing, c.offload, c.no_sync, c.dp,
                         c.micro_batch, c.global_batch, c.memory.value, c.objective);
}

// One reason's rejections, nearest first (equal amounts in the order met).
std::vector<const Rejected*> nearest_of(const PlanResult& r, Reason why) {
  std::vector<const Rejected*> out;
  for (const auto& x : r.rejected) {
    if (x.reason == why) out.push_back(&x);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Rejected* a, const Rejected* b) { return a->amount < b->amount; });
  return out;
}

void check_kept_against_all(const PlanResult& few, const PlanResult& all, std::int64_t kept) {
  // Every entry kept is one of all, in the order the search met them.
  std::map<decltype(key_of(all.rejected.front())), std::size_t> index;
  for (std::size_t i = 0; i < all.rejected.size(); ++i)
    index.emplace(key_of(all.rejected[i]), i);
  std::size_t last = 0;
  for (const auto& x : few.rejected) {
    const auto found = index.find(key_of(x));
    REQUIRE(found != index.end());
    CHECK(found->second >= last);
    last = found->second;
  }
  for (std::size_t i = 0; i < kReasons.size(); ++i) {
    const auto why = kReasons[i];
    CAPTURE(name_of(why));
    const auto a = nearest_of(all, why);
    const auto f = nearest_of(few, why);
    const auto omitted = few.rejected_omitted.count(why) ? few.rejected_omitted.at(why) : 0;
    CHECK(static_cast<std::int64_t>(f.size()) + omitted == static_cast<std::int64_t>(a.size()));
    // The nearest `kept` of each reason (every one never evaluated); then at most one more per
    // strategy.
    const auto n = was_evaluated(why)
                       ? std::min<std::size_t>(a.size(), static_cast<std::size_t>(kept))
                       : a.size();
    REQUIRE(f.size() >= n);
    for (std::size_t j = 0; j < n; ++j)
      CHECK(key_of(*f[j]) == key_of(*a[j]));
    if (was_evaluated(why)) CHECK(f.size() <= n + kStrategies.size());
  }
  // What the reports show of the feasible ones: the search that keeps few of them keeps these
  // (the full search ranks every one and takes the front of all).
  const auto same = [](const std::vector<Candidate>& a, const std::vector<Candidate>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      CHECK(config_of(a[i]) == config_of(b[i]));
  };
  same(few.ranked, all.ranked);
  same(few.pareto, all.pareto);
  REQUIRE(few.best_exact.has_value() == all.best_exact.has_value());
  if (all.best_exact) CHECK(config_of(*few.best_exact) == config_of(*all.best_exact));
  const auto x = search_counts(few);
  const auto y = search_counts(all);
  CHECK(x.rejected_evaluated == y.rejected_evaluated);
  CHECK(x.not_evaluated == y.not_evaluated);
  CHECK(few.suggestions == all.suggestions);
  // Each strategy's best and nearest miss, as from every rejection.
  const auto ox = by_strategy(few);
  const auto oy = by_strategy(all);
  REQUIRE(ox.size() == oy.size());
  for (std::size_t i = 0; i < ox.size(); ++i) {
    CAPTURE(name_of(ox[i].strategy));
    CHECK(ox[i].best.has_value() == oy[i].best.has_value());
    if (ox[i].best && oy[i].best) CHECK(ox[i].best->objective == oy[i].best->objective);
    CHECK(ox[i].behind_pct == oy[i].behind_pct);
    REQUIRE(ox[i].nearest_miss.has_value() == oy[i].nearest_miss.has_value());
    if (ox[i].nearest_miss) CHECK(key_of(*ox[i].nearest_miss) == key_of(*oy[i].nearest_miss));
  }
}

}  // namespace

TEST_CASE("kept rejections: each reason's nearest and each strategy's, the others counted") {
  const Fixture gpt2("gpt2-xl", "pcie-split-8", 1, "A100-80GB");
  const Fixture llama("llama-2-70b", "dgx-a100", 16, "A100-80GB");
  auto deadline = request(512, 1024);
  deadline.steps = 100'000;
  // Half again the fastest run: some configurations make it, others do not.
  deadline.max_run_s = 1.5 * 100'000 * gpt2.run(request(512, 1024)).best->step_time_s;
  auto lean = request(8, 4096);  // nothing fits on one node: suggestions from the nearest
  lean.max_gpus = 8;
  lean.offloads = {Offload::none};
  lean.checkpointing = {Checkpointing::none};
  const std::vector<std::pair<const Fixture*, PlanRequest>> cases{{&gpt2, request(512, 1024)},
                                                                  {&gpt2, deadline},
                                                                  {&llama, request(1024, 4096)},
                                                                  {&llama, lean}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    auto r = cases[i].second;
    const auto all = cases[i].first->run(r);
    CHECK(all.rejected_omitted.empty());
    // The cases reach each kind of rejection the readers look at.
    if (i == 1) REQUIRE(nearest_of(all, Reason::past_deadline).size() > 2);
    if (i == 3) REQUIRE_FALSE(all.best);
    if (i != 3) REQUIRE(nearest_of(all, Reason::slower).size() > 2);
    // A front longer than the ranked list: kept apart from the best.
    if (i == 0) REQUIRE(all.pareto.size() > static_cast<std::size_t>(r.top_k) + 10);
    REQUIRE(nearest_of(all, Reason::out_of_memory).size() > 2);
    for (const std::int64_t kept : {0, 2}) {
      CAPTURE(kept);
      r.rejected_kept = kept;
      const auto few = cases[i].first->run(r);
      check_kept_against_all(few, all, kept);
    }
  }
  auto r = request(512, 1024);
  r.rejected_kept = -2;
  CHECK_THROWS_WITH(gpt2.run(r), Catch::Contains("rejected configurations kept: -2"));
}
