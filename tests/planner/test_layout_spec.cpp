// Tests for planner/src/layout_spec.cpp and cluster_inputs.cpp: a layout and a cluster from the
// names a front end uses, their defaults, and errors that name the field.
#include <catch2/catch.hpp>

#include "cluster_fixture.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/planner/cluster_inputs.hpp"
#include "dtplan/planner/layout_spec.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

TrainingConfig config(std::int64_t gpus, std::int64_t gpus_per_node, std::int64_t seq) {
  TrainingConfig c;
  c.dp_size = gpus;
  c.gpus_per_node = gpus_per_node;
  c.micro_batch = 1;
  c.seq_len = seq;
  return c;
}

// The field a FieldError names, or "" for any other outcome.
std::string field_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FieldError& e) {
    return e.field();
  } catch (...) {
    return "(not a FieldError)";
  }
  return "";
}

}  // namespace

TEST_CASE("Layout spec: Llama 3 405B as published, 126 layers over 16 stages") {
  // Llama 3 paper (Dubey et al. 2024), section 3.3.2 and Table 4: TP 8, PP 16, sequence 8192;
  // the first and the last stage hold one layer fewer: 7 + 14 x 8 + 7 = 126 layers.
  const auto data = resolve_data_dir("");
  const auto m = load_model("llama-3.1-405b", data / "models");
  planner::LayoutSpec s;
  s.tp = 8;
  s.pp = 16;
  s.sequence_parallel = true;
  const auto l = planner::layout_of(s, "megatron", m, config(8192, 8, 8192), 16);
  CHECK(l.dp == 8192 / (8 * 16));
  CHECK(l.framework == cost::Framework::megatron);
  CHECK(l.sharding == cost::DpSharding::optimizer);  // Megatron's distributed optimizer
  REQUIRE(l.stage_layers.size() == 16);
  CHECK(l.stage_layers.front() == 7);
  CHECK(l.stage_layers.back() == 7);
  for (std::size_t i = 1; i + 1 < l.stage_layers.size(); ++i)
    CHECK(l.stage_layers[i] == 8);
  CHECK(l.global_batch() == 64 * 16);
}

TEST_CASE("Layout spec: the framework's sharding, and the strategy naming it") {
  const auto data = resolve_data_dir("");
  const auto m = load_model("llama-2-7b", data / "models");
  planner::LayoutSpec s;
  s.tp = 2;
  // torchtitan's FSDP2 shards parameters by default (fully_shard); megatron the optimizer.
  CHECK(planner::layout_of(s, "fsdp2", m, config(8, 8, 4096), 1).sharding ==
        cost::DpSharding::parameters);
  CHECK(planner::layout_of(s, "", m, config(8, 8, 4096), 1).framework == cost::Framework::megatron);
  // Under pipeline parallelism torchtitan keeps blocks gathered from forward to backward
  // (reshard_after_forward_policy "default": not pp_enabled).
  auto piped = s;
  piped.pp = 2;
  CHECK(planner::layout_of(piped, "fsdp2", m, config(8, 8, 4096), 2).sharding ==
        cost::DpSharding::gradients);
  CHECK(planner::layout_of(piped, "megatron", m, config(8, 8, 4096), 2).sharding ==
        cost::DpSharding::optimizer);
  s.sharding = "gradients";
  s.dp_shard = 2;
  const auto hybrid = planner::layout_of(s, "fsdp2", m, config(8, 8, 4096), 1);
  CHECK(hybrid.sharding == cost::DpSharding::gradients);
  CHECK(hybrid.shard_ranks() == 2);
  CHECK(planner::wants_layout({}, "megatron"));
  CHECK_FALSE(planner::wants_layout({}, "zero3"));
}

TEST_CASE("Layout spec: each broken rule names its field") {
  const auto data = resolve_data_dir("");
  const auto m = load_model("llama-2-7b", data / "models");
  const auto c = config(8, 8, 4096);
  const auto with = [&](auto edit, const std::string& strategy = "megatron") {
    return field_of([&] {
      planner::LayoutSpec s;
      edit(s);
      planner::layout_of(s, strategy, m, c, 1);
    });
  };
  CHECK(with([](auto& s) { s.tp = 0; }) == "tp");
  CHECK(with([](auto& s) { s.pp = -1; }) == "pp");
  CHECK(with([](auto& s) { s.cp = 0; }) == "cp");
  CHECK(with([](auto& s) { s.interleave = 0; }) == "interleave");
  CHECK(with([](auto& s) { s.dp_shard = -2; }) == "dp_shard");
  CHECK(with([](auto& s) { s.cp_comm = "a2a"; }) == "cp_comm");
  CHECK(with([](auto& s) { s.schedule = "zbv"; }) == "schedule");
  CHECK(with([](auto& s) { s.sequence_parallel = true; }) == "sequence_parallel");
  CHECK(with([](auto& s) { s.tp = 3; }) == "gpus");  // 8 GPUs, tp 3
  CHECK(with([](auto& s) { s.framework = "megatron"; }, "fsdp2") == "framework");
  CHECK(with([](auto& s) { s.tp = 2; }, "zero3") == "strategies");
  try {
    planner::LayoutSpec s;
    s.tp = 3;
    planner::layout_of(s, "megatron", m, c, 1);
  } catch (const FieldError& e) {
    CHECK(e.problem() == "8 is not divisible by {tp} x {cp} x {pp} = 3");
  }
}

TEST_CASE("Cluster inputs by name: loaded and owned, missing names refused by field") {
  const auto data = resolve_data_dir("");
  const planner::ClusterInputs c(data, {"dgx-h100", 2, "H100-SXM"});
  CHECK(c.topology.gpu_count() == 16);  // two DGX H100 of 8 GPUs
  CHECK(c.topology.gpus_per_node() == 8);
  CHECK(c.gpu.name == "H100-SXM");
  CHECK(field_of([&] { planner::ClusterInputs(data, {"", 1, "H100-SXM"}); }) == "topology");
  CHECK(field_of([&] { planner::ClusterInputs(data, {"dgx-h100", 0, "H100-SXM"}); }) == "nodes");
  CHECK(field_of([&] { planner::ClusterInputs(data, {"dgx-h100", 1, ""}); }) == "gpu");
}
