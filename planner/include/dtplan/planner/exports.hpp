// What a user needs to run a plan: a DeepSpeed config (as DeepSpeed documents its keys), the
// torchrun and deepspeed command lines for every node, an Accelerate config, and our Plan.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/model/plan.hpp"

namespace dtplan::planner {

struct LaunchOptions {
  std::string script = "train.py";
  std::string script_args;  // passed through
  std::string master_addr;  // empty: $MASTER_ADDR in the printed lines
  std::int64_t master_port = 29500;
  std::string ds_config = "ds_config.json";
  std::optional<double> lr;  // optimizer learning rate for the DeepSpeed config
  // DeepSpeed reduce/allgather bucket (elements): what the memory model assumed
  // (zero_reduce_bucket_elements in data/overheads.json).
  std::int64_t zero_reduce_bucket_elements = 500'000'000;
  // GPUs one launcher runs where the topology's node spans several hosts (an NVL72 tray: 4);
  // 0: a node is a host.
  std::int64_t gpus_per_host = 0;
};

struct DeepSpeedExport {
  nlohmann::json config;
  std::vector<std::string> notes;  // where the plan had to be translated
};

DeepSpeedExport deepspeed_config(const Plan& p, const LaunchOptions& o);
// Lines for a shell: a torchrun line per node (DataParallel: one python process).
std::vector<std::string> torchrun_lines(const Plan& p, const LaunchOptions& o);
// The deepspeed launcher's line (run on node 0, with a hostfile beyond one node).
std::vector<std::string> deepspeed_lines(const Plan& p, const LaunchOptions& o);
// An Accelerate config file (YAML).
std::string accelerate_config(const Plan& p, const LaunchOptions& o);
// Where the Accelerate config cannot say what the plan does.
std::vector<std::string> accelerate_notes(const Plan& p);
// Whether the plan's strategy runs under DeepSpeed (ZeRO-1/2/3).
bool uses_deepspeed(const Plan& p);

}  // namespace dtplan::planner
