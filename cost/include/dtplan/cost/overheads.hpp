// Named constants for memory that is not model state or activations: CUDA context,
// communication-library buffers, framework bucket sizes, allocator slack. Defaults live in
// data/overheads.json (documented row by row in docs/memory-model.md); every one can be
// overridden from the command line as KEY=VALUE.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dtplan::cost {

struct OverheadConstants {
  std::int64_t cuda_context_bytes = 0;            // context, kernel images, cuBLAS workspace
  double allocator_slack_fraction = 0;            // caching-allocator fragmentation and rounding
  std::int64_t nccl_channels = 0;                 // channels per communicator
  std::int64_t nccl_connections_per_channel = 0;  // peers a rank receives from per channel
  std::int64_t nccl_buffer_bytes_per_connection = 0;   // SIMPLE + LL128 + LL receive buffers
  std::int64_t zero_reduce_bucket_elements = 0;        // DeepSpeed reduce_bucket_size
  std::int64_t zero3_max_reuse_distance_elements = 0;  // DeepSpeed stage3_max_reuse_distance
  std::int64_t adam8bit_block_elements = 0;            // bitsandbytes block-wise quantisation block

  std::int64_t nccl_bytes_per_communicator() const;
};

struct OverheadKey {
  std::string_view key;
  std::string_view description;
};
// Every key, for help text and error messages.
const std::vector<OverheadKey>& overhead_keys();

OverheadConstants load_overheads(const std::filesystem::path& path);
// Applies "key=value"; throws naming the key or value when either is wrong.
void apply_override(OverheadConstants& k, std::string_view assignment);

}  // namespace dtplan::cost
