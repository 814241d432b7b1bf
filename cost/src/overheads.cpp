// Loading and overriding the overhead constants table.
#include "dtplan/cost/overheads.hpp"

#include <cmath>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::cost {

std::int64_t OverheadConstants::nccl_bytes_per_communicator() const {
  const auto connections =
      checked_mul(nccl_channels, nccl_connections_per_channel, "NCCL connections");
  return checked_mul(connections, nccl_buffer_bytes_per_connection, "NCCL buffer bytes");
}

const std::vector<OverheadKey>& overhead_keys() {
  static const std::vector<OverheadKey> keys = {
      {"cuda_context_bytes", "CUDA context, kernel images and library workspaces per GPU"},
      {"allocator_slack_fraction", "caching-allocator slack as a fraction of allocated bytes"},
      {"nccl_channels", "NCCL channels per communicator"},
      {"nccl_connections_per_channel", "receive connections per channel (ring 1 + tree 1)"},
      {"nccl_buffer_bytes_per_connection", "NCCL SIMPLE + LL128 + LL buffers per connection"},
      {"zero_reduce_bucket_elements", "DeepSpeed ZeRO reduce_bucket_size (elements)"},
      {"zero3_max_reuse_distance_elements",
       "DeepSpeed stage3_max_reuse_distance: parameters used again within it stay gathered"},
      {"adam8bit_block_elements", "bitsandbytes 8-bit optimizer block size (elements)"},
  };
  return keys;
}

namespace {

void set_value(OverheadConstants& k, std::string_view key, double value, const std::string& where) {
  auto as_count = [&](std::int64_t minimum) {
    if (!std::isfinite(value) || std::floor(value) != value ||
        value < static_cast<double>(minimum) || value >= 9.2e18) {
      throw Error(where + ": " + std::string(key) +
                  " must be an integer >= " + std::to_string(minimum));
    }
    return static_cast<std::int64_t>(value);
  };
  if (key == "cuda_context_bytes") {
    k.cuda_context_bytes = as_count(0);
  } else if (key == "allocator_slack_fraction") {
    if (!(value >= 0.0 && value < 1.0)) {
      throw Error(where + ": allocator_slack_fraction must be in [0, 1)");
    }
    k.allocator_slack_fraction = value;
  } else if (key == "nccl_channels") {
    k.nccl_channels = as_count(0);
  } else if (key == "nccl_connections_per_channel") {
    k.nccl_connections_per_channel = as_count(0);
  } else if (key == "nccl_buffer_bytes_per_connection") {
    k.nccl_buffer_bytes_per_connection = as_count(0);
  } else if (key == "zero_reduce_bucket_elements") {
    k.zero_reduce_bucket_elements = as_count(1);
  } else if (key == "zero3_max_reuse_distance_elements") {
    k.zero3_max_reuse_distance_elements = as_count(0);
  } else if (key == "adam8bit_block_elements") {
    k.adam8bit_block_elements = as_count(1);
  } else {
    std::vector<std::string> names;
    for (const auto& o : overhead_keys())
      names.emplace_back(o.key);
    throw Error(where + ": " + unknown_name_message("overhead constant", key, names));
  }
}

}  // namespace

OverheadConstants load_overheads(const std::filesystem::path& path) {
  const auto root = ObjectReader::root(read_json_file(path));
  root.check_schema_version(1);
  OverheadConstants k;
  for (const auto& o : overhead_keys()) {
    set_value(k, o.key, root.number(o.key), root.location(o.key));
  }
  root.reject_unknown_keys();
  return k;
}

void apply_override(OverheadConstants& k, std::string_view assignment) {
  const std::string where = "{overhead} '" + std::string(assignment) + "'";
  const auto a = parse_assignment(assignment, where);
  set_value(k, a.key, a.value, where);
}

}  // namespace dtplan::cost
