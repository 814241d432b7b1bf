// Accelerate configs for FSDP2 layouts, key by key against Accelerate's documented options:
// the top-level keys `accelerate config` writes, fsdp_config with FSDP2's keys (docs,
// concept_guides/fsdp1_vs_fsdp2.md: fsdp_version, fsdp_reshard_after_forward replacing
// fsdp_sharding_strategy; fsdp_backward_prefetch, fsdp_sync_module_states, fsdp_use_orig_params
// and fsdp_forward_prefetch removed or unsupported), and parallelism_config
// (accelerate.parallelism_config.ParallelismConfig: dp_replicate_size, dp_shard_size, tp_size,
// cp_size, cp_comm_strategy).
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/planner/export_accelerate_fsdp2.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

const std::map<std::string, std::set<std::string>> kKeys{
    {"",
     {"compute_environment", "distributed_type", "downcast_bf16", "fsdp_config", "machine_rank",
      "main_process_ip", "main_process_port", "main_training_function", "mixed_precision",
      "num_machines", "num_processes", "parallelism_config", "rdzv_backend", "same_network",
      "use_cpu"}},
    {"fsdp_config",
     {"fsdp_activation_checkpointing", "fsdp_auto_wrap_policy", "fsdp_cpu_ram_efficient_loading",
      "fsdp_offload_params", "fsdp_reshard_after_forward", "fsdp_state_dict_type", "fsdp_version"}},
    {"parallelism_config",
     {"parallelism_config_cp_comm_strategy", "parallelism_config_cp_size",
      "parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
      "parallelism_config_tp_size"}},
};

// "section.key" -> value, checking each key is one Accelerate documents where it stands.
std::map<std::string, std::string> parsed(const std::string& yaml) {
  std::map<std::string, std::string> out;
  std::istringstream in(yaml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const bool nested = line.rfind("  ", 0) == 0;
    const auto colon = line.find(':');
    REQUIRE(colon != std::string::npos);
    const auto key = line.substr(nested ? 2 : 0, colon - (nested ? 2 : 0));
    if (!nested) section.clear();
    INFO(section << "." << key);
    CHECK(kKeys.at(section).count(key) == 1);
    const auto value = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string();
    std::string name = section.empty() ? key : section;
    if (!section.empty()) name.append(".").append(key);
    out[name] = value;
    if (!nested && value.empty()) section = key;
  }
  return out;
}

ModelDesc llama() {
  return load_model("llama-3-8b", resolve_data_dir("") / "models");
}

cost::Layout3D fsdp2(std::int64_t tp, std::int64_t cp, std::int64_t dp) {
  cost::Layout3D l;
  l.framework = cost::Framework::fsdp2;
  l.sharding = cost::DpSharding::parameters;
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.seq_len = 8192;
  l.micro_batch = 2;
  l.micro_batches = 4;
  return l;
}

}  // namespace

TEST_CASE("Accelerate FSDP2: tp 2 x cp 2 x dp 4 on two 8-GPU nodes, hybrid shard groups of 4") {
  auto l = fsdp2(2, 2, 4);
  l.shard_group = 4;  // of the dp x cp = 8 ranks holding the same weights: 2 groups
  planner::LaunchOptions o;
  o.master_addr = "10.0.0.1";
  const auto y = parsed(planner::accelerate_fsdp2_config(llama(), l, 8, o));
  CHECK(y.at("distributed_type") == "FSDP");
  CHECK(y.at("fsdp_config.fsdp_version") == "2");
  CHECK(y.at("fsdp_config.fsdp_reshard_after_forward") == "true");  // parameters sharding
  CHECK(y.at("fsdp_config.fsdp_activation_checkpointing") == "false");
  CHECK(y.at("mixed_precision") == "bf16");
  // 2 x 2 x 4 = 16 GPUs on 2 nodes of 8.
  CHECK(y.at("num_processes") == "16");
  CHECK(y.at("num_machines") == "2");
  CHECK(y.at("main_process_ip") == "10.0.0.1");
  // Accelerate shards over dp_shard x cp (as torchtitan): a shard group of 4 ranks with cp 2
  // is dp_shard 2; the 8 ranks that hold the same weights form 8 / 4 = 2 replicas.
  CHECK(y.at("parallelism_config.parallelism_config_dp_shard_size") == "2");
  CHECK(y.at("parallelism_config.parallelism_config_dp_replicate_size") == "2");
  CHECK(y.at("parallelism_config.parallelism_config_cp_size") == "2");
  CHECK(y.at("parallelism_config.parallelism_config_tp_size") == "2");
  // Ring attention passes K/V around the ring: torch's rotate method "alltoall".
  CHECK(y.at("parallelism_config.parallelism_config_cp_comm_strategy") == "alltoall");
  // The mesh covers every process: replicate x shard x cp x tp = 2 x 2 x 2 x 2 = 16.
  auto size = [&](const std::string& key) {
    return std::stoll(y.at("parallelism_config.parallelism_config_" + key));
  };
  CHECK(size("dp_replicate_size") * size("dp_shard_size") * size("cp_size") * size("tp_size") ==
        16);
}

TEST_CASE("Accelerate FSDP2: blocks kept gathered, full recompute, one node, all-gather CP") {
  auto l = fsdp2(1, 2, 4);
  l.sharding = cost::DpSharding::gradients;
  l.recompute = Checkpointing::full;
  l.cp_comm = cost::CpComm::all_gather;
  const auto text = planner::accelerate_fsdp2_config(llama(), l, 8, {});
  const auto y = parsed(text);
  CHECK(y.at("fsdp_config.fsdp_reshard_after_forward") == "false");
  CHECK(y.at("fsdp_config.fsdp_activation_checkpointing") == "true");
  CHECK(y.at("num_machines") == "1");
  CHECK(y.count("main_process_ip") == 0);
  CHECK(y.at("parallelism_config.parallelism_config_cp_comm_strategy") == "allgather");
  // All 8 ranks shard (no shard group): dp_shard = 8 / cp 2 = 4, one replica.
  CHECK(y.at("parallelism_config.parallelism_config_dp_shard_size") == "4");
  CHECK(y.at("parallelism_config.parallelism_config_dp_replicate_size") == "1");
  CHECK_THAT(text, Contains("micro-batch 2 per data-parallel rank and accumulate 4 micro-steps "
                            "(global batch 32)"));
  CHECK(y.at("fsdp_config.fsdp_offload_params") == "false");
  l.offload = Offload::optimizer_and_params;  // CPUOffloadPolicy
  CHECK(parsed(planner::accelerate_fsdp2_config(llama(), l, 8, {}))
            .at("fsdp_config.fsdp_offload_params") == "true");
}

TEST_CASE("Accelerate FSDP2: what Accelerate cannot run is refused with the reason") {
  const auto m = llama();
  auto refused = [&](const cost::Layout3D& l, const std::string& why) {
    CHECK_THROWS_WITH(planner::accelerate_fsdp2_config(m, l, 8, {}),
                      Contains("export_accelerate: ") && Contains(why));
  };
  auto l = fsdp2(2, 1, 4);
  l.framework = cost::Framework::megatron;
  l.sharding = cost::DpSharding::optimizer;
  refused(l, "runs under megatron, not FSDP2");
  l = fsdp2(1, 1, 4);
  l.pp = 2;
  refused(l, "no pipeline parallelism");
  l = fsdp2(1, 2, 4);
  l.cp_comm = cost::CpComm::a2a;
  refused(l, "not Ulysses");
  l = fsdp2(2, 1, 4);
  l.sequence_parallel = true;
  refused(l, "sequence parallelism off");
  l = fsdp2(1, 4, 2);
  l.shard_group = 2;
  refused(l, "a shard group of 2 does not divide by cp 4");
}
