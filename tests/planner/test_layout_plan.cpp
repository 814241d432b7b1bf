// Tests for planner/src/layout_plan.cpp: a layout written as the Plan file dtplan-run executes,
// field by field, and the layouts it refuses with the flag that leaves out what the runtime
// does not execute.
#include <catch2/catch.hpp>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/planner/layout_plan.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

ModelDesc model(const std::string& name) {
  return load_model(name, resolve_data_dir("") / "models");
}

// GPT-2 (12 blocks, tied embedding) at tp 2 x pp 2 x dp 2 under Megatron-LM's distributed
// optimizer: micro-batch 4, 8 micro-batches per pipeline, sequence 1024.
planner::Candidate3D gpt2_layout() {
  planner::Candidate3D c;
  auto& l = c.layout;
  l.tp = 2;
  l.pp = 2;
  l.dp = 2;
  l.micro_batch = 4;
  l.micro_batches = 8;
  l.seq_len = 1024;
  l.recompute = Checkpointing::selective;
  c.time.step_s = 0.5;
  c.time.samples_per_s = 128;  // 64 samples in 0.5 s
  c.time.tokens_per_s = 131072;
  c.time.mfu = 0.4;
  return c;
}

planner::PlanTarget target() {
  return {"gpt2", "dgx-a100", 1, 8, "A100-80GB"};
}

Plan saved(const planner::Candidate3D& c, const std::string& name = "gpt2") {
  auto file = planner::layout_plan_file(c, {}, model(name), target());
  if (const auto* why = std::get_if<std::string>(&file)) FAIL(*why);
  return std::get<Plan>(file);
}

std::string refusal(const planner::Candidate3D& c, const std::string& name = "gpt2") {
  auto file = planner::layout_plan_file(c, {}, model(name), target());
  REQUIRE(std::holds_alternative<std::string>(file));
  return std::get<std::string>(file);
}

}  // namespace

TEST_CASE("layout plan: a Megatron-LM layout is its shape, batch and ZeRO-1 over dp") {
  const auto p = saved(gpt2_layout());
  CHECK(p.tp == 2);
  CHECK(p.pp == 2);
  CHECK(p.training.dp_size == 2);
  CHECK(p.training.strategy == Strategy::zero1);  // the distributed optimizer
  CHECK(p.training.micro_batch == 4);
  CHECK(p.grad_accum == 8);     // the pipeline's micro-batches
  CHECK(p.global_batch == 64);  // 4 x 8 x 2
  CHECK(p.no_sync);             // Megatron-LM reduces once, after the last micro-batch
  CHECK(p.training.optimizer_impl == OptimizerImpl::fused);  // its Adam step is always fused
  CHECK(p.training.seq_len == 1024);
  CHECK(p.training.checkpointing == Checkpointing::selective);
  CHECK(p.training.selective_policy == SelectivePolicy::modules);
  CHECK(p.params == 124439808);  // GPT-2's, pinned in test_model
  CHECK(p.model == "gpt2");
  CHECK(p.gpu == "A100-80GB");
  CHECK(p.training.gpus_per_node == 8);
  CHECK(p.predicted.step_time_s == 0.5);
  CHECK(p.predicted.samples_per_s == 128);
  // The plan reads back as the same layout.
  const auto json = to_json(p);
  CHECK(json.at("tp") == 2);
  CHECK(json.at("pp") == 2);
  CHECK(json.at("strategy") == "zero1");
}

TEST_CASE("layout plan: data-parallel sharding maps to the strategy the runtime runs") {
  auto c = gpt2_layout();
  c.layout.sharding = cost::DpSharding::none;
  CHECK(saved(c).training.strategy == Strategy::ddp);
  c.layout.pp = 1;  // FSDP2's sharded gradients cannot sum a tied embedding across stages
  c.layout.recompute = Checkpointing::full;  // torchtitan's selective policy is per op
  c.layout.framework = cost::Framework::fsdp2;
  c.layout.sharding = cost::DpSharding::parameters;
  const auto fsdp = saved(c);
  CHECK(fsdp.training.strategy == Strategy::fsdp_full);
  CHECK_FALSE(fsdp.no_sync);  // FSDP2 reduce-scatters in every micro-batch's backward (pp 1)
  CHECK(fsdp.training.checkpointing == Checkpointing::full);
  // dtplan-run rebuilds the attention core under selective recomputation; torchtitan reruns
  // what its per-op policy does not save.
  c.layout.recompute = Checkpointing::selective;
  CHECK_THAT(refusal(c), Contains("/recompute_modules: dtplan-run's selective checkpointing "
                                  "recomputes the attention core (core_attn) only"));
  c.layout.recompute = Checkpointing::full;
  c.layout.sharding = cost::DpSharding::gradients;
  CHECK(planner::strategy_of(c.layout) == Strategy::fsdp_grad_op);
  c.layout.framework = cost::Framework::megatron;
  CHECK(planner::strategy_of(c.layout) == Strategy::zero2);
}

TEST_CASE("layout plan: what dtplan-run does not execute is refused with the flag to drop it") {
  auto c = gpt2_layout();
  c.layout.sequence_parallel = true;
  CHECK(refusal(c) == "it has sequence parallelism (--sp off), which dtplan-run does not execute");
  c.layout.sequence_parallel = false;
  c.layout.interleave = 2;
  CHECK_THAT(refusal(c), Contains("an interleaved pipeline (2 chunks per GPU; --interleave 1)"));
  c.layout.interleave = 1;
  c.layout.schedule = cost::PipelineSchedule::zb_h1;
  CHECK_THAT(refusal(c), Contains("the zb-h1 schedule (--schedule 1f1b)"));
  c.layout.schedule.reset();
  c.layout.cp = 2;
  c.layout.offload = Offload::optimizer;
  CHECK(refusal(c) ==
        "it has context parallelism (cp 2; --cp 1) and offloaded states (--offload none), "
        "which dtplan-run does not execute");
}

TEST_CASE("layout plan: the runtime's own refusals come before anything is written") {
  auto c = gpt2_layout();
  c.layout.pp = 5;  // 12 blocks do not split into 5 equal stages
  CHECK_THAT(refusal(c), Contains("/pp: 5 pipeline stages do not divide layers 12"));
  c.layout.pp = 2;
  c.layout.recompute = Checkpointing::full;
  c.layout.framework = cost::Framework::fsdp2;
  c.layout.sharding = cost::DpSharding::parameters;
  CHECK_THAT(refusal(c), Contains("/strategy: fsdp-full with a tied embedding across pipeline "
                                  "stages"));
  // Llama 3.2 1B ties its embedding too; Llama 2 7B does not, so its stages may shard.
  CHECK_THAT(refusal(c, "llama-3.2-1b"), Contains("tied embedding"));
  CHECK(saved(c, "llama-2-7b").training.strategy == Strategy::fsdp_full);
}
