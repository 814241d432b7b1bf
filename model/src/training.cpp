// Names of the training enumerations, parsed with close-name suggestions.
#include "dtplan/model/training.hpp"

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

std::string_view name_of(Precision v) {
  return name_in(kPrecisions, v);
}
std::string_view name_of(Optimizer v) {
  return name_in(kOptimizers, v);
}
std::string_view name_of(Strategy v) {
  return name_in(kStrategies, v);
}
std::string_view name_of(Offload v) {
  return name_in(kOffloads, v);
}
std::string_view name_of(Checkpointing v) {
  return name_in(kCheckpointings, v);
}
std::string_view name_of(Attention v) {
  return name_in(kAttentions, v);
}

Precision parse_precision(std::string_view t) {
  return value_in(kPrecisions, t, "precision");
}
Optimizer parse_optimizer(std::string_view t) {
  return value_in(kOptimizers, t, "optimizer");
}
Strategy parse_strategy(std::string_view t) {
  return value_in(kStrategies, t, "strategy");
}
Offload parse_offload(std::string_view t) {
  return value_in(kOffloads, t, "offload");
}
Checkpointing parse_checkpointing(std::string_view t) {
  return value_in(kCheckpointings, t, "checkpointing");
}
Attention parse_attention(std::string_view t) {
  return value_in(kAttentions, t, "attention");
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  names.reserve(kStrategies.size());
  for (const auto& row : kStrategies)
    names.emplace_back(row.name);
  return names;
}

bool is_mixed(Precision p) {
  return p != Precision::fp32;
}

std::string_view compute_type(Precision p) {
  switch (p) {
    case Precision::fp16:
    case Precision::amp_fp16:
      return "fp16";
    case Precision::bf16:
    case Precision::amp_bf16:
      return "bf16";
    case Precision::fp32:
      break;
  }
  return "fp32";
}

}  // namespace dtplan
