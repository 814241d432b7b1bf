// A dtplan-gui session: every input the views depend on, as the CLI names them. Saved and
// opened as JSON (File > Save session / Open session); unknown keys and bad values are
// errors that name the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/planner/layout_spec.hpp"

namespace dtplan::gui {

// The range of each integer input, as the CLI's flags bound them (--nodes, --gpus-per-node,
// --gpus, --micro-batch, --grad-accum, --seq-len, --global-batch): a session file and the
// GUI's own flags may not ask for what a flag may not.
struct IntRange {
  std::int64_t min = 0, max = 0;
};
inline constexpr IntRange kNodesRange{1, 4096};
inline constexpr IntRange kGpusPerNodeRange{0, 1024};  // 0: every GPU of each node
inline constexpr IntRange kGpusRange{1, 1'000'000};
inline constexpr IntRange kMicroBatchRange{1, 1'000'000};
inline constexpr IntRange kGradAccumRange{1, 1'000'000};
inline constexpr IntRange kSeqLenRange{0, 100'000'000};  // 0: the model's maximum
inline constexpr IntRange kGlobalBatchRange{1, 100'000'000};

struct Session {
  std::string model = "gpt2-xl";  // preset name or path (config.json or layer JSON)
  std::string gpu = "A100-80GB";
  std::string topology = "pcie-split-8";  // preset, JSON file or nvidia-smi topo -m text
  std::int64_t nodes = 1;
  std::int64_t gpus_per_node = 0;  // of each node: its first hosts; 0: all of them
  std::int64_t gpus = 8;
  std::string strategy = "fsdp-grad-op";  // a data-parallel strategy, or megatron|fsdp2
  std::string precision = "bf16";
  std::string optimizer = "adamw";
  std::string optimizer_impl = "framework";  // as --optimizer-impl
  std::string layer_kernels = "framework";   // as --layer-kernels
  std::string zero_grad = "set-to-none";     // as --zero-grad
  std::int64_t micro_batch = 16;
  std::int64_t grad_accum = 4;
  std::int64_t seq_len = 1024;
  std::string checkpointing = "none";
  std::int64_t checkpoint_every = 1;           // with full checkpointing: every Nth block only
  std::string attention = "flash";             // flash|eager|hf-eager, as --attention
  std::string attention_kernel = "framework";  // as --attention-kernel
  std::string fp8_recipe = "none";             // as --fp8-recipe (layouts)
  std::string offload = "none";
  std::int64_t global_batch = 512;        // the planner's target
  std::vector<std::string> measurements;  // dtplan-run measurement files (validation view)
  std::string profile;                    // hardware profile for them; empty: the bundled one
  // Tensor, pipeline and context parallelism (the flags of dtplan estimate): with any of them,
  // or megatron|fsdp2 as the strategy, the session is a layout over gpus / (tp x cp x pp)
  // data-parallel ranks, with grad_accum micro-batches per pipeline per step.
  planner::LayoutSpec layout;
};

nlohmann::json to_json(const Session& s);
Session session_from_json(const nlohmann::json& j, const std::string& origin);
Session load_session(const std::filesystem::path& path);
void save_session(const Session& s, const std::filesystem::path& path);

}  // namespace dtplan::gui
