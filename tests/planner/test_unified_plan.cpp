// Tests for planner/src/unified_plan.cpp: one ranking, one Pareto front and one rejected list
// over the data-parallel strategies and the tensor x context x pipeline layouts, restrictions
// that apply to both families, and GPU counts below the cluster's for layouts.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "cluster_fixture.hpp"
#include "dtplan/cost/layout_text.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/plan_decisions.hpp"

using namespace dtplan;

namespace {

using test::Cluster;

planner::LayoutRequest request(std::int64_t batch, std::int64_t seq) {
  planner::LayoutRequest r;
  r.plan.global_batch = batch;
  r.plan.seq_len = seq;
  r.plan.precisions = {Precision::bf16, Precision::fp32};
  return r;
}

}  // namespace

TEST_CASE("one ranking: the best of both families, by objective, each family's own best in it") {
  const Cluster c("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  const auto p = c.plan(request(512, 1024));
  REQUIRE(p.data_parallel_searched);
  REQUIRE(p.layouts);
  REQUIRE(p.data_parallel.best);
  REQUIRE_FALSE(p.layouts->ranked.empty());
  // The plan's best is the better of the two searches' own bests.
  const double dp_best = p.data_parallel.best->objective;
  const double layout_best = p.layouts->ranked.front().objective;
  REQUIRE(p.best());
  CHECK(p.best()->objective() == std::min(dp_best, layout_best));
  for (std::size_t i = 1; i < p.ranked.size(); ++i)
    CHECK(p.ranked[i - 1].objective() <= p.ranked[i].objective());
  // top_k (5) of the two lists together.
  CHECK(p.ranked.size() ==
        std::min<std::size_t>(5, p.data_parallel.ranked.size() + p.layouts->ranked.size()));
}

TEST_CASE("one Pareto front: nothing on either family's front is better in both memory and time") {
  const Cluster c("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  const auto p = c.plan(request(512, 1024));
  REQUIRE_FALSE(p.pareto.empty());
  for (std::size_t i = 1; i < p.pareto.size(); ++i) {
    CHECK(p.pareto[i - 1].memory() <= p.pareto[i].memory());
    CHECK(p.pareto[i].objective() < p.pareto[i - 1].objective());
  }
  auto covered = [&](Bytes memory, double objective) {
    for (const auto& e : p.pareto) {
      if (e.memory() <= memory && e.objective() <= objective) return true;
    }
    return false;
  };
  for (const auto& e : p.data_parallel.pareto)
    CHECK(covered(e.memory, e.objective));
  for (const auto& e : p.layouts->pareto)
    CHECK(covered(e.memory.total(), e.objective));
}

TEST_CASE("one rejected list: counts add up and 'slower' is measured against the plan's best") {
  const Cluster c("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  const auto p = c.plan(request(512, 1024));
  const auto n = planner::counts_of(p);
  CHECK(n.evaluated == n.data_parallel_evaluated + n.layouts_evaluated);
  CHECK(n.chosen == 1);
  CHECK(n.evaluated == n.chosen + n.rejected_evaluated);
  CHECK(static_cast<std::int64_t>(p.rejected.size()) == n.rejected_evaluated + n.not_evaluated);
  const double best = p.best()->objective();
  std::int64_t slower = 0;
  for (const auto& r : p.rejected) {
    if (r.reason != planner::Reason::slower) continue;
    ++slower;
    CHECK(r.amount == Approx(100.0 * (p.choice_of(r).objective() / best - 1.0)).margin(1e-9));
  }
  CHECK(slower > 0);
}

TEST_CASE("rejected entries name their place in the plan's lists, and survive copy and move") {
  const Cluster c("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  const auto p = c.plan(request(512, 1024));
  REQUIRE(p.layouts);
  // Every priced entry is one rejected entry: the data-parallel search's and the layouts'
  // own lists, plus the best of the family that lost.
  std::size_t configs = 0, layouts = 0;
  for (const auto& r : p.rejected) {
    const auto* config = p.data_parallel_of(r);
    const auto* layout = p.layout_of(r);
    CHECK((config == nullptr) != (layout == nullptr));
    configs += config != nullptr;
    layouts += layout != nullptr;
  }
  CHECK(configs == p.data_parallel.rejected.size() + (p.best()->layout ? 1 : 0));
  CHECK(layouts == p.layouts->rejected.size() + (p.best()->data_parallel ? 1 : 0));
  // The data-parallel search's reason text stays with its entry.
  const auto unsupported = std::find_if(p.rejected.begin(), p.rejected.end(), [](const auto& r) {
    return r.reason == planner::Reason::unsupported;
  });
  REQUIRE(unsupported != p.rejected.end());
  CHECK_FALSE(p.detail_of(*unsupported).empty());
  // A copy (the GUI keeps one) and a move find the same entries in their own lists.
  const planner::UnifiedPlan copy = p;  // NOLINT(performance-unnecessary-copy-initialization)
  auto moved = planner::UnifiedPlan(copy);
  const planner::UnifiedPlan kept = std::move(moved);
  for (std::size_t i = 0; i < p.rejected.size(); i += 97) {
    const auto& r = p.rejected[i];
    CHECK(copy.choice_of(copy.rejected[i]).objective() == p.choice_of(r).objective());
    CHECK(kept.choice_of(kept.rejected[i]).memory().value == p.choice_of(r).memory().value);
    if (const auto* layout = copy.layout_of(copy.rejected[i])) {
      CHECK(layout != p.layout_of(r));  // the copy's own entry, not the original's
    }
  }
}

TEST_CASE("a layout on fewer GPUs than the cluster's: global batch 1 with tp 2 on 8 GPUs") {
  // dp = GPUs / (tp pp cp) must divide the batch: with batch 1 and tp = 2 (pp = cp = 1), only
  // 2 GPUs (tp 2 x dp 1) make a layout; 8 GPUs would need dp 4.
  const Cluster c("gpt2", "dgx-a100", 1, "A100-80GB");
  auto r = request(1, 1024);
  r.tps = {2};
  r.pps = {1};
  r.cps = {1};
  const auto p = c.plan(r);
  CHECK_FALSE(p.data_parallel_searched);  // tp 1 is not allowed
  REQUIRE(p.best());
  REQUIRE(p.best()->layout);
  const auto& l = p.best()->layout->layout;
  CHECK(l.tp == 2);
  CHECK(l.dp == 1);
  CHECK(p.best()->gpus() == 2);
}

TEST_CASE("restrictions apply to both families, and leaving out both is an error naming why") {
  const Cluster c("gpt2", "dgx-a100", 1, "A100-80GB");
  auto r = request(64, 1024);
  r.strategies_named = true;
  r.plan.strategies = {Strategy::zero2};
  auto p = c.plan(r);
  CHECK(p.data_parallel_searched);
  CHECK_FALSE(p.layouts);
  CHECK_THAT(p.layouts_left_out, Catch::Contains("only data-parallel strategies were named"));
  for (const auto& e : p.ranked)
    CHECK(e.data_parallel->strategy == Strategy::zero2);

  // Offloading the optimizer alone: Megatron-LM's layouts, each with its CPU optimizer.
  r = request(64, 1024);
  r.plan.offloads = {Offload::optimizer};
  p = c.plan(r);
  REQUIRE(p.layouts);
  for (const auto& e : p.ranked) {
    if (!e.layout) continue;
    CHECK(e.layout->layout.framework == cost::Framework::megatron);
    CHECK(e.layout->layout.offload == Offload::optimizer);
  }
  // ... which FSDP2 does not offload on its own.
  r.frameworks = {cost::Framework::fsdp2};
  p = c.plan(r);
  CHECK_FALSE(p.layouts);
  CHECK_THAT(p.layouts_left_out, Catch::Contains("no layout framework runs the offload modes"));

  r = request(64, 1024);
  r.plan.precisions = {Precision::fp32};
  p = c.plan(r);
  CHECK_FALSE(p.layouts);
  CHECK_THAT(p.layouts_left_out, Catch::Contains("mixed precision"));

  // 8-bit Adam is neither Megatron-LM's nor torchtitan's; SGD is Megatron-LM's only.
  r = request(64, 1024);
  r.plan.optimizer = Optimizer::adam8bit;
  p = c.plan(r);
  CHECK_FALSE(p.layouts);
  CHECK_THAT(p.layouts_left_out, Catch::Contains("no layout framework runs optimizer adam8bit"));
  r = request(64, 1024);
  r.plan.optimizer = Optimizer::sgd_momentum;
  p = c.plan(r);
  REQUIRE(p.layouts);
  CHECK_FALSE(p.layouts->ranked.empty());
  for (const auto& e : p.layouts->ranked) {
    CHECK(e.layout.framework == cost::Framework::megatron);
    CHECK(e.layout.optimizer == Optimizer::sgd_momentum);
  }

  r = request(64, 1024);
  r.strategies_named = true;
  r.plan.strategies = {Strategy::ddp};
  r.tps = {2};
  CHECK_THROWS_WITH(c.plan(r), Catch::Contains("nothing left to search") &&
                                   Catch::Contains("tensor-parallel sizes without 1") &&
                                   Catch::Contains("only data-parallel strategies were named"));
}

TEST_CASE("a mixture of experts' plan says why its expert layout won, the others at their best") {
  // Mixtral 8x7B on 4 DGX H100 nodes held to tp 1 and pp 1 under Megatron-LM: only ep 8 fits
  // (6 B a parameter of weights and main gradients: 280 GB with all 8 experts on a GPU, 77 GB
  // with 2 of them; test_search3d.cpp derives it), so the note gives ep 1, 2 and 4 as over
  // memory.
  const Cluster c("mixtral-8x7b", "dgx-h100", 4, "H100-SXM");
  auto r = request(256, 4096);
  r.tps = {1};
  r.pps = {1};
  r.frameworks = {cost::Framework::megatron};
  r.strategies_named = true;
  const auto p = c.plan(r);
  REQUIRE(p.best());
  REQUIRE(p.best()->layout);
  CHECK(p.best()->layout->layout.ep == 8);
  const auto note = planner::expert_layout_note(p, r.plan.objective);
  REQUIRE(note);
  // Nearest first: ep 4 (2 experts a GPU) misses by the least, ep 1 (all 8) by the most.
  CHECK_THAT(*note,
             Catch::Matchers::StartsWith(
                 "expert layout ep 8 x etp 1 (tp 1) chosen; ep 4 x etp 1: out of memory by"));
  const auto at = [&](const char* text) { return note->find(text); };
  CHECK(at("ep 4 x etp 1: out of memory by") < at("ep 2 x etp 1: out of memory by"));
  CHECK(at("ep 2 x etp 1: out of memory by") < at("ep 1 x etp 1: out of memory by"));
  CHECK(at("ep 1 x etp 1: out of memory by") != std::string::npos);
  // A dense model's plan has no such note.
  const Cluster dense("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  CHECK_FALSE(planner::expert_layout_note(dense.plan(request(512, 1024)), r.plan.objective));
}

namespace {

// One reason's rejected entries, nearest first as the reports order them (stable by amount).
std::vector<const planner::RejectedChoice*> nearest_of(const planner::UnifiedPlan& p,
                                                       planner::Reason reason) {
  std::vector<const planner::RejectedChoice*> list;
  for (const auto& r : p.rejected)
    if (r.reason == reason) list.push_back(&r);
  std::stable_sort(list.begin(), list.end(),
                   [](const auto* a, const auto* b) { return a->amount < b->amount; });
  return list;
}

}  // namespace

// Issue 18: a plan kept all 10^5 rejected layouts to list five of each reason, most of its peak
// memory. Kept to the nearest few, its report must read the same as with all of them kept.
TEST_CASE("a plan keeping the nearest rejected layouts reports as one keeping them all") {
  // Mixtral 8x7B on 4 DGX H100 with 256 GiB of host memory a node and a 3-hour deadline for
  // 1,000 steps: every reason a layout can be rejected for occurs (over GPU memory, over host
  // memory with offloading, past the deadline, slower), over many expert layouts and recompute
  // modes.
  const Cluster c("mixtral-8x7b", "dgx-h100", 4, "H100-SXM");
  auto r = request(256, 4096);
  r.plan.host_memory = Bytes{256LL << 30};
  r.plan.steps = 1000;
  r.plan.max_run_s = 3 * 3600.0;
  const auto all = c.plan(r);
  REQUIRE(all.rejected_omitted.empty());
  REQUIRE(planner::expert_layout_note(all, r.plan.objective));
  REQUIRE(planner::recompute_note(all, r.plan.objective));
  for (const std::int64_t kept : {0, 3}) {
    CAPTURE(kept);
    r.plan.rejected_kept = kept;
    const auto few = c.plan(r);
    // Of about 78,000 layouts rejected, a few dozen are kept (and of the data-parallel ones).
    CHECK(few.layouts->rejected.size() * 100 < all.layouts->rejected.size());
    CHECK(few.rejected_total() == static_cast<std::int64_t>(all.rejected.size()));
    using planner::Reason;
    for (const auto reason : {Reason::out_of_memory, Reason::host_out_of_memory,
                              Reason::past_deadline, Reason::slower, Reason::unsupported}) {
      CAPTURE(planner::name_of(reason));
      const auto a = nearest_of(all, reason);
      const auto f = nearest_of(few, reason);
      REQUIRE(a.size() > 3);
      CHECK(static_cast<std::int64_t>(f.size()) + few.omitted(reason) ==
            static_cast<std::int64_t>(a.size()));
      for (std::size_t i = 0; i < static_cast<std::size_t>(kept); ++i) {
        CHECK(f[i]->amount == a[i]->amount);
        const auto x = few.choice_of(*f[i]);
        const auto y = all.choice_of(*a[i]);
        CHECK(x.family() == y.family());
        CHECK(x.objective() == y.objective());
        CHECK(x.memory().value == y.memory().value);
        if (x.layout && y.layout)
          CHECK(cost::describe(x.layout->layout) == cost::describe(y.layout->layout));
      }
    }
    // The notes compare each expert layout and recompute mode at its best: the same.
    CHECK(planner::expert_layout_note(few, r.plan.objective) ==
          planner::expert_layout_note(all, r.plan.objective));
    CHECK(planner::recompute_note(few, r.plan.objective) ==
          planner::recompute_note(all, r.plan.objective));
  }
  r.plan.rejected_kept = -2;
  CHECK_THROWS_WITH(c.plan(r), Catch::Contains("rejected configurations kept: -2"));
}

TEST_CASE("Megatron-LM's flags are refused, naming the flag, where no layout could take them") {
  const auto field_of = [](const planner::LayoutRequest& r) -> std::string {
    try {
      planner::check_framework_flags(r);
    } catch (const FieldError& e) {
      return e.field();
    }
    return "";
  };
  auto r = request(64, 2048);
  r.grad_reduce_in_bf16 = true;
  CHECK(field_of(r).empty());  // bf16 is searched, every framework with it
  r.strategies_named = true;
  r.frameworks = {cost::Framework::fsdp2};
  CHECK(field_of(r) == "grad_reduce_in_bf16");  // FSDP2 alone: no Megatron-LM layout
  r.frameworks.push_back(cost::Framework::megatron);
  CHECK(field_of(r).empty());
  r.plan.precisions = {Precision::fp16};
  CHECK(field_of(r) == "grad_reduce_in_bf16");  // no bf16 training to reduce in bf16
  r = request(64, 2048);
  r.ddp_bucket_size = 134217728;
  CHECK(field_of(r) == "ddp_bucket_size");  // buckets without the overlap: one bucket
  r.overlap_grad_reduce = true;
  CHECK(field_of(r).empty());
  r.fp8_param_gather = true;
  CHECK(field_of(r) == "fp8_param_gather");  // no FP8 recipe
  r.fp8 = Fp8Recipe::tensorwise;
  CHECK(field_of(r).empty());
}

TEST_CASE("the combinations never evaluated are named by the reasons they have") {
  planner::PlanResult r;
  planner::Rejected unsupported;
  unsupported.reason = planner::Reason::unsupported;
  r.rejected = {unsupported, unsupported};
  auto n = planner::search_counts(r);
  CHECK(n.not_evaluated == 2);
  CHECK(n.not_evaluated_why() == "unsupported");
  r.rejected_omitted[planner::Reason::batch_unreachable] = 3;
  n = planner::search_counts(r);
  CHECK(n.not_evaluated == 5);
  CHECK(n.not_evaluated_why() == "unsupported, batch unreachable");
  r.rejected.clear();
  CHECK(planner::search_counts(r).not_evaluated_why() == "batch unreachable");
}
