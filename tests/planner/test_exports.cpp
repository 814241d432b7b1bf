// Tests for planner/src/exports.cpp: DeepSpeed config keys as DeepSpeed documents them
// (deepspeed.ai/docs/config-json), launch lines per node, the Accelerate config.
#include <catch2/catch.hpp>

#include "dtplan/planner/exports.hpp"

using namespace dtplan;
using namespace dtplan::planner;
using Catch::Contains;

namespace {
Plan make_plan(Strategy s, Precision p, std::int64_t dp, std::int64_t mb, std::int64_t accum) {
  Plan plan;
  plan.model = "gpt2-xl";
  plan.params = 1'557'611'200;
  plan.topology = "pcie-split-8";
  plan.nodes = (dp + 7) / 8;
  plan.gpu = "A100-80GB";
  plan.training.strategy = s;
  plan.training.precision = p;
  plan.training.dp_size = dp;
  plan.training.gpus_per_node = 8;
  plan.training.micro_batch = mb;
  plan.training.seq_len = 1024;
  plan.grad_accum = accum;
  plan.global_batch = mb * accum * dp;
  return plan;
}
}  // namespace

TEST_CASE("DeepSpeed: train_batch_size = micro-batch x accumulation x world size") {
  const auto p = make_plan(Strategy::zero2, Precision::bf16, 8, 16, 4);
  const auto ds = deepspeed_config(p, {}).config;
  // DeepSpeed checks exactly this identity at start-up.
  CHECK(ds["train_batch_size"] == 512);
  CHECK(ds["train_micro_batch_size_per_gpu"] == 16);
  CHECK(ds["gradient_accumulation_steps"] == 4);
  CHECK(ds["bf16"]["enabled"] == true);
  CHECK_FALSE(ds.contains("fp16"));
  CHECK(ds["zero_optimization"]["stage"] == 2);
  CHECK(ds["zero_optimization"]["reduce_bucket_size"] == 500'000'000);
  CHECK_FALSE(ds.contains("optimizer"));  // the script's optimizer is used
}

TEST_CASE("DeepSpeed: stage per strategy, fp16 loss scaling, offload devices") {
  CHECK(deepspeed_config(make_plan(Strategy::ddp, Precision::bf16, 8, 1, 1), {})
            .config["zero_optimization"]["stage"] == 0);
  CHECK(deepspeed_config(make_plan(Strategy::zero1, Precision::bf16, 8, 1, 1), {})
            .config["zero_optimization"]["stage"] == 1);
  CHECK(deepspeed_config(make_plan(Strategy::fsdp_full, Precision::bf16, 8, 1, 1), {})
            .config["zero_optimization"]["stage"] == 3);
  auto p = make_plan(Strategy::zero3, Precision::fp16, 16, 2, 2);
  p.training.offload = Offload::optimizer_and_params;
  LaunchOptions o;
  o.lr = 2e-4;
  o.zero_reduce_bucket_elements = 200'000'000;
  const auto ds = deepspeed_config(p, o);
  CHECK(ds.config["fp16"]["enabled"] == true);
  CHECK(ds.config["fp16"]["loss_scale"] == 0);  // 0 selects dynamic loss scaling
  const auto& z = ds.config["zero_optimization"];
  CHECK(z["offload_optimizer"]["device"] == "cpu");
  CHECK(z["offload_param"]["device"] == "cpu");
  CHECK(z["reduce_bucket_size"] == 200'000'000);
  CHECK(z.contains("stage3_prefetch_bucket_size"));
  CHECK(ds.config["optimizer"]["params"]["lr"] == 2e-4);
  CHECK_FALSE(ds.config["optimizer"]["params"].contains("torch_adam"));  // its FusedAdam
  CHECK(ds.config["train_batch_size"] == 64);
  // --optimizer-impl foreach: torch.optim's AdamW, as priced (DeepSpeed's torch_adam).
  auto foreach = make_plan(Strategy::zero2, Precision::bf16, 8, 1, 1);
  foreach
    .training.optimizer_impl = OptimizerImpl::foreach;
  CHECK(deepspeed_config(foreach, o).config["optimizer"]["params"]["torch_adam"] == true);
  // A plan translated to DeepSpeed says so.
  const auto fsdp = deepspeed_config(make_plan(Strategy::fsdp_full, Precision::bf16, 8, 1, 1), {});
  REQUIRE_FALSE(fsdp.notes.empty());
  CHECK_THAT(fsdp.notes.front(), Contains("ZeRO stage 3"));
}

TEST_CASE("launch lines: standalone on one node, one torchrun per node beyond") {
  const auto plan = make_plan(Strategy::ddp, Precision::bf16, 8, 1, 1);
  CHECK(torchrun_lines(plan, {}) ==
        std::vector<std::string>{"torchrun --standalone --nnodes=1 --nproc_per_node=8 train.py"});
  CHECK(deepspeed_lines(plan, {}) ==
        std::vector<std::string>{"deepspeed --num_nodes=1 --num_gpus=8 train.py --deepspeed "
                                 "--deepspeed_config ds_config.json"});
  LaunchOptions o;
  o.master_addr = "10.0.0.1";
  o.master_port = 29400;
  o.script = "pretrain.py";
  o.script_args = "--data /data";
  const auto two = make_plan(Strategy::zero3, Precision::bf16, 16, 1, 1);
  const auto lines = torchrun_lines(two, o);
  REQUIRE(lines.size() == 2);
  for (std::size_t rank = 0; rank < 2; ++rank) {
    CHECK_THAT(lines[rank], Contains("torchrun --nnodes=2 --nproc_per_node=8 --node_rank=" +
                                     std::to_string(rank) +
                                     " --master_addr=10.0.0.1 --master_port=29400 pretrain.py "
                                     "--data /data"));
  }
  CHECK_THAT(deepspeed_lines(two, o).back(),
             Contains("deepspeed --hostfile=hostfile --num_nodes=2 --num_gpus=8 "
                      "--master_addr=10.0.0.1 --master_port=29400 pretrain.py --data /data "
                      "--deepspeed"));
  // Without an address the lines use $MASTER_ADDR and say to set it.
  const auto unset = torchrun_lines(two, {});
  CHECK_THAT(unset.front(), Contains("MASTER_ADDR"));
  CHECK_THAT(unset[1], Contains("--master_addr=$MASTER_ADDR"));
  // DataParallel needs no launcher: one process sees every GPU.
  const auto dp = torchrun_lines(make_plan(Strategy::dp, Precision::bf16, 4, 1, 1), {});
  REQUIRE(dp.size() == 1);
  CHECK_THAT(dp[0], Contains("CUDA_VISIBLE_DEVICES=0,1,2,3 python train.py"));
}

TEST_CASE("launch lines start one launcher per host where a node spans hosts (NVL72 trays)") {
  // 144 GPUs on two NVL72 racks (72-GPU nodes) of 4-GPU trays: 36 hosts of 4 processes.
  auto plan = make_plan(Strategy::fsdp_full, Precision::bf16, 144, 1, 1);
  plan.training.gpus_per_node = 72;
  LaunchOptions o;
  o.gpus_per_host = 4;
  const auto lines = torchrun_lines(plan, o);
  REQUIRE(lines.size() == 1 + 36);  // the MASTER_ADDR note, then a line per tray
  CHECK_THAT(lines[1], Contains("--nnodes=36 --nproc_per_node=4 --node_rank=0"));
  CHECK_THAT(lines.back(), Contains("--node_rank=35"));
  CHECK_THAT(deepspeed_lines(plan, o).back(), Contains("--num_nodes=36 --num_gpus=4"));
  CHECK_THAT(accelerate_config(plan, o), Contains("num_machines: 36"));
}

TEST_CASE("Accelerate: FSDP settings, or DeepSpeed with the precision left to its file") {
  auto p = make_plan(Strategy::fsdp_grad_op, Precision::bf16, 16, 4, 2);
  p.training.checkpointing = Checkpointing::full;
  const auto fsdp = accelerate_config(p, {});
  CHECK_THAT(fsdp, Contains("distributed_type: FSDP\n") &&
                       Contains("fsdp_sharding_strategy: SHARD_GRAD_OP\n") &&
                       Contains("fsdp_activation_checkpointing: true\n") &&
                       Contains("fsdp_offload_params: false\n") &&
                       Contains("mixed_precision: bf16\n") && Contains("num_machines: 2\n") &&
                       Contains("num_processes: 16\n") && Contains("machine_rank: 0\n"));
  const auto zero = accelerate_config(make_plan(Strategy::zero3, Precision::bf16, 8, 1, 1), {});
  CHECK_THAT(zero, Contains("distributed_type: DEEPSPEED\n") &&
                       Contains("deepspeed_config_file: ds_config.json\n") &&
                       Contains("zero3_init_flag: true\n") && Contains("mixed_precision: 'no'\n"));
  CHECK_THAT(accelerate_config(make_plan(Strategy::ddp, Precision::fp32, 8, 1, 1), {}),
             Contains("distributed_type: MULTI_GPU\n") && Contains("mixed_precision: 'no'\n"));
}

TEST_CASE("DeepSpeed: parameter offload only in stage 3, optimizer type as the plan's") {
  // An FSDP SHARD_GRAD_OP plan with parameter offload has no stage-2 form in DeepSpeed
  // (offload_param is valid only with stage 3).
  auto p = make_plan(Strategy::fsdp_grad_op, Precision::bf16, 8, 1, 1);
  p.training.offload = Offload::optimizer_and_params;
  const auto ds = deepspeed_config(p, {});
  CHECK(ds.config["zero_optimization"]["stage"] == 3);
  CHECK(ds.config["zero_optimization"].contains("offload_param"));
  bool said = false;
  for (const auto& n : ds.notes)
    said = said || n.find("only in ZeRO stage 3") != std::string::npos;
  CHECK(said);
  // SGD with momentum goes to torch.optim.SGD; offloaded, DeepSpeed must not force CPU Adam.
  auto sgd = make_plan(Strategy::zero2, Precision::bf16, 8, 1, 1);
  sgd.training.optimizer = Optimizer::sgd_momentum;
  sgd.training.offload = Offload::optimizer;
  LaunchOptions o;
  o.lr = 0.1;
  const auto s = deepspeed_config(sgd, o).config;
  CHECK(s["optimizer"]["type"] == "SGD");
  CHECK(s["optimizer"]["params"]["momentum"] == 0.9);
  CHECK(s["optimizer"]["params"]["lr"] == 0.1);
  CHECK(s["zero_force_ds_cpu_optimizer"] == false);
  // Adam keeps DeepSpeed's CPU Adam: no override.
  auto adam = sgd;
  adam.training.optimizer = Optimizer::adam;
  const auto a = deepspeed_config(adam, o).config;
  CHECK(a["optimizer"]["type"] == "Adam");
  CHECK_FALSE(a.contains("zero_force_ds_cpu_optimizer"));
}

TEST_CASE("Accelerate: selective checkpointing is left to the model, and said") {
  auto p = make_plan(Strategy::fsdp_full, Precision::bf16, 8, 1, 1);
  p.training.checkpointing = Checkpointing::selective;
  CHECK_THAT(accelerate_config(p, {}), Contains("fsdp_activation_checkpointing: false\n"));
  REQUIRE(accelerate_notes(p).size() == 1);
  CHECK_THAT(accelerate_notes(p).front(), Contains("selective"));
  CHECK_THAT(accelerate_notes(make_plan(Strategy::dp, Precision::bf16, 4, 1, 1)).front(),
             Contains("MULTI_GPU runs DDP"));
  CHECK(uses_deepspeed(make_plan(Strategy::zero1, Precision::bf16, 8, 1, 1)));
  CHECK_FALSE(uses_deepspeed(make_plan(Strategy::fsdp_full, Precision::bf16, 8, 1, 1)));
}
