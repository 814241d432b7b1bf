// Tests for planner/src/plan_outputs.cpp: which configuration each export describes, where the
// files go, the launch lines' shape, and the fields an impossible export names.
#include <catch2/catch.hpp>

#include "cluster_fixture.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/plan_outputs.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

using test::Cluster;

planner::LayoutRequest request(std::vector<Strategy> strategies,
                               std::vector<cost::Framework> frameworks) {
  planner::LayoutRequest r;
  r.plan.global_batch = 512;
  r.plan.seq_len = 1024;
  r.plan.precisions = {Precision::bf16};
  r.plan.strategies = std::move(strategies);
  r.frameworks = std::move(frameworks);
  r.strategies_named = true;
  return r;
}

planner::PlanOutputs outputs_of(const Cluster& c, const planner::LayoutRequest& r,
                                const planner::ExportRequest& e) {
  const auto plan = c.plan(r);
  return planner::plan_outputs(plan, {c.m, c.topo, c.table, c.gpu, c.k, c.overheads, r.plan, {}},
                               e);
}

const OutputFile* file_named(const planner::PlanOutputs& o, const std::string& path) {
  for (const auto& f : o.files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("plan outputs: a ZeRO plan's Accelerate config gets its DeepSpeed config beside it") {
  const Cluster c("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  planner::ExportRequest e;
  e.export_accelerate = "run/accelerate.yaml";
  e.export_launch = true;
  const auto o = outputs_of(c, request({Strategy::zero2}, {}), e);
  // Accelerate's deepspeed_config_file must exist: staged as run/accelerate.deepspeed.json.
  const auto* ds = file_named(o, "run/accelerate.deepspeed.json");
  REQUIRE(ds);
  CHECK(ds->what == "DeepSpeed config for {export_accelerate}");
  CHECK_THAT(ds->content, Contains("\"stage\": 2"));
  const auto* acc = file_named(o, "run/accelerate.yaml");
  REQUIRE(acc);
  CHECK_THAT(acc->content, Contains("run/accelerate.deepspeed.json"));
  // The launch lines start with the shape the script must use: micro-batch x accumulation x
  // GPUs = 512 (global batch), as the plan's best has it.
  REQUIRE(o.estimate);
  REQUIRE_FALSE(o.launch.empty());
  CHECK_THAT(o.launch.front(), Contains("(global batch 512)"));
  CHECK(o.launch.back().rfind("deepspeed ", 0) == 0);
  CHECK(o.strategy_times.count(Strategy::zero2) == 1);
}

TEST_CASE("plan outputs: layout exports describe each framework's best layout, or name the field") {
  const Cluster c("gpt2-xl", "dgx-a100", 1, "A100-80GB");
  planner::ExportRequest e;
  e.export_torchtitan = "titan.toml";
  const auto o = outputs_of(c, request({}, {cost::Framework::fsdp2}), e);
  REQUIRE(o.torchtitan);
  CHECK(o.torchtitan->framework == cost::Framework::fsdp2);
  REQUIRE(file_named(o, "titan.toml"));
  CHECK_FALSE(o.megatron);
  // No Megatron-LM layout was searched: the Megatron export is refused by its field.
  e.export_megatron = "megatron.sh";
  try {
    outputs_of(c, request({}, {cost::Framework::fsdp2}), e);
    FAIL("export_megatron without a Megatron-LM layout was accepted");
  } catch (const FieldError& err) {
    CHECK(err.field() == "export_megatron");
    CHECK_THAT(err.problem(), Contains("no Megatron-LM layout fits"));
  }
  // Data-parallel exports with only layouts in the plan: refused, naming the export given.
  planner::ExportRequest launch_only;
  launch_only.export_launch = true;
  try {
    outputs_of(c, request({}, {cost::Framework::megatron}), launch_only);
    FAIL("launch lines of a plan without a data-parallel configuration were accepted");
  } catch (const FieldError& err) {
    CHECK(err.field() == "export_launch");
  }
}

TEST_CASE("plan outputs: default precisions follow the GPU, with a note where it changed them") {
  const Cluster c("gpt2", "pcie-1switch-4", 1, "T4");
  planner::PlanRequest r;
  CHECK(planner::resolve_precisions(c.gpu, r));  // T4: no bf16 tensor cores
  CHECK(r.precisions == std::vector<Precision>{Precision::fp16, Precision::fp32});
  r.precisions = {Precision::bf16};
  try {
    planner::resolve_precisions(c.gpu, r);
    FAIL("bf16 on a T4 was accepted");
  } catch (const FieldError& err) {
    CHECK(err.field() == "precision");
  }
}

TEST_CASE("plan outputs: an FP8 layout says what it gains over the same layout in bf16") {
  const Cluster c("llama-3-8b", "dgx-h100", 1, "H100-SXM");
  auto r = request({}, {cost::Framework::megatron});
  r.plan.seq_len = 4096;
  r.plan.global_batch = 64;
  r.fp8 = Fp8Recipe::tensorwise;
  const auto plan = c.plan(r);
  REQUIRE(plan.best());
  REQUIRE(plan.best()->layout);
  const auto note =
      planner::fp8_gain_note(plan, {c.m, c.topo, c.table, c.gpu, c.k, c.overheads, r.plan, {}});
  REQUIRE(note);
  // The gain is the chosen layout's speed over its own bf16 twin, priced on its own here.
  auto bf16 = plan.best()->layout->layout;
  bf16.fp8 = Fp8Recipe::none;
  cost::Model3D model(c.m, c.topo, c.table, c.gpu, c.k);
  const double gain = plan.best()->layout->time.samples_per_s / model.time(bf16).samples_per_s;
  // Llama 3 8B's Linear GEMMs at twice the peak, minus casts: faster, under twice as fast.
  CHECK(gain > 1.0);
  CHECK(gain < 2.0);
  char pct[32];
  std::snprintf(pct, sizeof pct, "%+.1f%%", (gain - 1) * 100);
  CHECK_THAT(*note, Contains("FP8 (tensorwise) against the same layout in bf16: " +
                             std::string(pct) + " samples/s"));
  // Without FP8 there is nothing to compare.
  r.fp8 = Fp8Recipe::none;
  CHECK_FALSE(planner::fp8_gain_note(c.plan(r),
                                     {c.m, c.topo, c.table, c.gpu, c.k, c.overheads, r.plan, {}}));
}
