// Command-line options shared by the commands that take a model and a training configuration
// (memory now; estimate and plan later), and their conversion into library inputs.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/topology.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cli {

// DDP's bucket_cap_mb, MiB.
inline constexpr NumberRange kBucketCapMiB = NumberRange::positive(1e6);

struct ModelOptions {
  std::string model;     // preset name or path
  std::string params;    // raw count text, e.g. "7.5B"
  std::string data_dir;  // overrides DTPLAN_DATA_DIR
};

struct TrainingOptions {
  std::int64_t gpus = 1;
  std::optional<std::int64_t> gpus_per_node;
  std::string precision = "bf16";
  std::string optimizer = "adamw";
  std::string optimizer_impl = "framework";
  std::string layer_kernels = "framework";
  std::string zero_grad = "set-to-none";
  bool grad_bucket_view = false;
  double bucket_cap_mb = 25.0;
  bool fp32_grad_accumulation = false;
  std::string offload = "none";
  std::int64_t micro_batch = 1;
  std::optional<std::int64_t> seq_len;
  std::string checkpointing = "none";
  std::int64_t checkpoint_every = 1;  // with full checkpointing: every Nth block only
  std::string attention = "flash";
  std::string attention_kernel = "framework";
  std::string fp8_recipe;  // empty: none, or delayed with --precision fp8
  std::string gpu;
  std::vector<std::string> overhead_overrides;
  std::string overheads_file;
  std::string host_memory;        // per node, e.g. "512GiB"; empty: the topology's (or the default)
  std::string deepspeed_version;  // empty: a current release (coalesced ZeRO-3 gathers)
};

struct TopologyOptions {
  std::string topology;  // preset name or file (JSON or nvidia-smi topo -m text)
  std::int64_t nodes = 1;
  std::string pcie_class = "pcie4";  // assumptions for nvidia-smi input
  std::string socket_class = "upi";
  std::string nvlink_class;
  std::string nic_class = "ib_hdr";
  // GPUs used in each node; fewer than the node's takes its first hosts (node_subset.hpp).
  std::optional<std::int64_t> gpus_per_node;
};

// Compute constants (data/compute.json) and overrides.
struct ComputeOptions {
  std::vector<std::string> overrides;  // KEY=VALUE
  std::string file;
};

// The constants table and the cluster built from it; the table outlives what refers to it.
struct LoadedTopology {
  InterconnectTable table;
  Topology topology;
};

void add_model_options(CLI::App& app, ModelOptions& o);
// `gpus_per_node`: whether to add --gpus-per-node (commands whose training options have it
// set TopologyOptions::gpus_per_node themselves).
void add_topology_options(CLI::App& app, TopologyOptions& o, bool required,
                          bool gpus_per_node = true);
LoadedTopology load_topology(const TopologyOptions& o, const std::filesystem::path& data);
void add_training_options(CLI::App& app, TrainingOptions& o);

void add_compute_options(CLI::App& app, ComputeOptions& o);
cost::ComputeConstants compute_constants_of(const ComputeOptions& o,
                                            const std::filesystem::path& data);
// A GPU by name; `flag` names the option in errors.
GpuSpec find_gpu(const std::string& name, const std::filesystem::path& data, const char* flag);

std::filesystem::path data_dir_of(const ModelOptions& o);
ModelDesc resolve_model(const ModelOptions& o);
// Strategy is filled by the caller; everything else checked and converted here.
TrainingConfig training_config(const TrainingOptions& o);
// A count flag's value from 1 to `limit`; beyond it is a typing mistake (or CLI11 clamping an
// out-of-range number). Errors name the flag and echo the value.
void require_positive(std::int64_t value, const char* flag, std::int64_t limit = 100'000'000);
// --deepspeed-version describes DeepSpeed's ZeRO: refused with any other strategy (`runs_on`:
// the strategy's name, or a layout's framework), which would ignore it. "all" accepts it.
// The fused attention kernel of --attention-kernel; refused with an --attention that runs none.
AttentionKernel attention_kernel_of(std::string_view kernel, Attention attention);
void check_deepspeed_version(const TrainingOptions& o, std::string_view runs_on);
cost::OverheadConstants overheads_of(const TrainingOptions& o, const std::filesystem::path& data);
std::optional<GpuSpec> gpu_of(const TrainingOptions& o, const std::filesystem::path& data);
// --host-memory as bytes per node; nullopt when not given.
std::optional<Bytes> host_memory_of(const std::string& text);

// `parse(text)`, its failure prefixed with the flag: "--precision: unknown precision 'fp8'".
template <class Parse>
auto parse_flag(std::string_view flag, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const Error& e) {
    throw Error(std::string(flag) + ": " + e.what());
  }
}

}  // namespace dtplan::cli
