// torchtitan job configs, key by key against the dataclasses of torchtitan's
// torchtitan/config/job_config.py (Training, Parallelism, ActivationCheckpoint, Optimizer).
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/planner/export_torchtitan.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

const std::map<std::string, std::set<std::string>> kKeys{
    {"training",
     {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
      "mixed_precision_reduce", "enable_cpu_offload"}},
    {"parallelism",
     {"data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
      "tensor_parallel_degree", "context_parallel_degree", "context_parallel_rotate_method",
      "pipeline_parallel_degree", "pipeline_parallel_schedule", "pipeline_parallel_microbatch_size",
      "pipeline_parallel_layers_per_stage", "pipeline_parallel_split_points",
      // torchtitan/config/configs.py, Parallelism
      "expert_parallel_degree"}},
    {"activation_checkpoint", {"mode", "selective_ac_option"}},
    // The TOML era's float8 converter (job_config.py at 238fa9953e4a: Model, Float8Linear).
    {"model", {"converters"}},
    {"quantize.linear.float8", {"recipe_name", "filter_fqns"}},
    // job_config.py's Optimizer: implementation "for-loop", "foreach" or "fused" (its default).
    {"optimizer", {"name", "implementation"}},
};

// "section.key" -> the value as written, checking each key is one torchtitan documents.
std::map<std::string, std::string> parsed(const std::string& toml) {
  std::map<std::string, std::string> out;
  std::istringstream in(toml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.size() - 2);
      REQUIRE(kKeys.count(section) == 1);
      continue;
    }
    const auto eq = line.find(" = ");
    REQUIRE(eq != std::string::npos);
    const auto key = line.substr(0, eq);
    INFO(section << "." << key);
    CHECK(kKeys.at(section).count(key) == 1);
    out[section + "." + key] = line.substr(eq + 3);
  }
  return out;
}

ModelDesc llama(std::int64_t layers) {
  auto spec = *load_model("llama-3-8b", resolve_data_dir("") / "models").transformer;
  spec.num_layers = layers;
  return model_from_transformer(spec, "llama", "test");
}

cost::Layout3D fsdp2(std::int64_t tp, std::int64_t cp, std::int64_t pp, std::int64_t dp) {
  cost::Layout3D l;
  l.framework = cost::Framework::fsdp2;
  l.sharding = cost::DpSharding::parameters;
  l.tp = tp;
  l.cp = cp;
  l.pp = pp;
  l.dp = dp;
  l.sequence_parallel = tp > 1;
  l.seq_len = 8192;
  l.micro_batch = 2;
  l.micro_batches = 8;
  return l;
}

}  // namespace

TEST_CASE("torchtitan config: FSDP x TP x PP as torchtitan's Llama 3.1 405B (FSDP8 TP8 PP8)") {
  // The layout the TorchTitan paper (Liang et al. 2024) runs Llama 3.1 405B with on 512 GPUs;
  // 128 layers here so the 8 stages split evenly (the uneven case is the next test's).
  auto l = fsdp2(8, 1, 8, 8);
  l.recompute = Checkpointing::full;
  const auto a = parsed(planner::torchtitan_config(llama(128), l));
  CHECK(a.at("parallelism.tensor_parallel_degree") == "8");
  CHECK(a.at("parallelism.pipeline_parallel_degree") == "8");
  CHECK(a.at("parallelism.data_parallel_shard_degree") == "8");
  CHECK(a.at("parallelism.data_parallel_replicate_degree") == "1");
  CHECK(a.at("parallelism.fsdp_reshard_after_forward") == "\"always\"");
  CHECK(a.at("parallelism.pipeline_parallel_schedule") == "\"1F1B\"");
  CHECK(a.at("parallelism.pipeline_parallel_microbatch_size") == "2");
  CHECK(a.at("parallelism.pipeline_parallel_layers_per_stage") == "16");
  // Per data-parallel rank the pipeline's 8 micro-batches of 2; 16 x dp 8 in all.
  CHECK(a.at("training.local_batch_size") == "16");
  CHECK(a.at("training.global_batch_size") == "128");
  CHECK(a.at("training.seq_len") == "8192");
  CHECK(a.at("training.mixed_precision_param") == "\"bfloat16\"");
  CHECK(a.at("training.mixed_precision_reduce") == "\"float32\"");
  CHECK(a.at("activation_checkpoint.mode") == "\"full\"");
  CHECK(a.at("optimizer.name") == "\"AdamW\"");
  l.optimizer = Optimizer::adam;
  CHECK(parsed(planner::torchtitan_config(llama(128), l)).at("optimizer.name") == "\"Adam\"");
}

TEST_CASE("torchtitan config: hybrid sharding with context parallelism, uneven split points") {
  // dp 4 x cp 2 = 8 ranks hold the same weights; shard over 4 of them (dp_shard 2 x cp 2),
  // replicate twice.
  auto l = fsdp2(2, 2, 1, 4);
  l.shard_group = 4;
  l.cp_comm = cost::CpComm::all_gather;
  l.sharding = cost::DpSharding::gradients;
  l.recompute = Checkpointing::selective;
  const auto a = parsed(planner::torchtitan_config(llama(32), l));
  CHECK(a.at("parallelism.data_parallel_shard_degree") == "2");
  CHECK(a.at("parallelism.data_parallel_replicate_degree") == "2");
  CHECK(a.at("parallelism.context_parallel_degree") == "2");
  CHECK(a.at("parallelism.context_parallel_rotate_method") == "\"allgather\"");
  CHECK(a.at("parallelism.fsdp_reshard_after_forward") == "\"never\"");
  CHECK(a.at("activation_checkpoint.selective_ac_option") == "\"op\"");
  // Full checkpointing of every 2nd block is torchtitan's layer-wise selective mode.
  auto every = l;
  every.recompute = Checkpointing::full;
  every.checkpoint_every = 2;
  const auto layer = parsed(planner::torchtitan_config(llama(32), every));
  CHECK(layer.at("activation_checkpoint.mode") == "\"selective\"");
  CHECK(layer.at("activation_checkpoint.selective_ac_option") == "\"2\"");
  CHECK(a.at("training.local_batch_size") == "2");    // accumulation without a pipeline
  CHECK(a.at("training.global_batch_size") == "64");  // 2 x 8 x dp 4
  CHECK(a.at("training.enable_cpu_offload") == "false");
  l.offload = Offload::optimizer_and_params;  // FSDP2's CPUOffloadPolicy
  CHECK(parsed(planner::torchtitan_config(llama(32), l)).at("training.enable_cpu_offload") ==
        "true");
  // 30 layers over 4 stages, Megatron's embedding-and-loss rule: 7, 8, 8, 7.
  auto p = fsdp2(1, 1, 4, 2);
  const auto b = parsed(planner::torchtitan_config(llama(30), p));
  CHECK(b.at("parallelism.pipeline_parallel_split_points") ==
        "[\"layers.7\", \"layers.15\", \"layers.23\"]");
}

TEST_CASE("torchtitan config: what torchtitan cannot run is refused with the reason") {
  auto l = fsdp2(2, 1, 1, 4);
  l.sequence_parallel = false;
  CHECK_THROWS_WITH(planner::torchtitan_config(llama(32), l), Contains("add sp"));
  l = fsdp2(1, 2, 1, 4);
  l.cp_comm = cost::CpComm::a2a;
  CHECK_THROWS_WITH(planner::torchtitan_config(llama(32), l), Contains("not Ulysses"));
  l = fsdp2(1, 1, 4, 2);
  l.schedule = cost::PipelineSchedule::zb_h1;
  CHECK_THROWS_WITH(planner::torchtitan_config(llama(32), l), Contains("ZBVZeroBubble"));
  l = fsdp2(1, 1, 1, 4);
  l.framework = cost::Framework::megatron;
  l.sharding = cost::DpSharding::optimizer;
  CHECK_THROWS_WITH(planner::torchtitan_config(llama(32), l), Contains("not FSDP2"));
}

TEST_CASE("torchtitan config: expert parallelism borrows its ranks from FSDP and TP") {
  // Mixtral 8x7B, tp 2 x dp 8 with its 8 experts over ep 8, each whole: torchtitan's
  // parallel_dims.py lays the experts out as efsdp x ep = dp_shard x cp x tp = 16, efsdp 2.
  const auto m = load_model("mixtral-8x7b", resolve_data_dir("") / "models");
  auto l = fsdp2(2, 1, 1, 8);
  l.ep = 8;
  l.etp = 1;
  l.seq_len = 4096;
  const auto c = parsed(planner::torchtitan_config(m, l));
  CHECK(c.at("parallelism.expert_parallel_degree") == "8");
  CHECK(c.at("parallelism.tensor_parallel_degree") == "2");
  CHECK(c.at("parallelism.data_parallel_shard_degree") == "8");
  // A dense model writes no expert key.
  CHECK(parsed(planner::torchtitan_config(llama(32), fsdp2(2, 1, 1, 8)))
            .count("parallelism.expert_parallel_degree") == 0);
}

TEST_CASE("torchtitan config: torchao's float8 Linears, the LM head left in bf16") {
  auto l = fsdp2(2, 1, 1, 8);
  l.fp8 = Fp8Recipe::rowwise;
  const auto c = parsed(planner::torchtitan_config(llama(32), l));
  CHECK(c.at("model.converters") == "[\"quantize.linear.float8\"]");
  CHECK(c.at("quantize.linear.float8.recipe_name") == "\"rowwise\"");
  CHECK(c.at("quantize.linear.float8.filter_fqns") == "[\"output\"]");
  CHECK(
      parsed(planner::torchtitan_config(llama(32), fsdp2(2, 1, 1, 8))).count("model.converters") ==
      0);
}
