// Names of the training enumerations, parsed with close-name suggestions.
#include "dtplan/model/training.hpp"

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

namespace {

template <class E, std::size_t N>
std::string_view lookup_name(const std::array<NamedValue<E>, N>& table, E v) {
  for (const auto& row : table) {
    if (row.value == v) return row.name;
  }
  return "?";
}

template <class E, std::size_t N>
E lookup_value(const std::array<NamedValue<E>, N>& table, std::string_view text,
               std::string_view what) {
  const std::string lowered = to_lower(text);
  std::vector<std::string> names;
  for (const auto& row : table) {
    if (row.name == lowered) return row.value;
    names.emplace_back(row.name);
  }
  throw Error(unknown_name_message(what, text, names));
}

}  // namespace

std::string_view name_of(Precision v) {
  return lookup_name(kPrecisions, v);
}
std::string_view name_of(Optimizer v) {
  return lookup_name(kOptimizers, v);
}
std::string_view name_of(Strategy v) {
  return lookup_name(kStrategies, v);
}
std::string_view name_of(Offload v) {
  return lookup_name(kOffloads, v);
}
std::string_view name_of(Checkpointing v) {
  return lookup_name(kCheckpointings, v);
}
std::string_view name_of(Attention v) {
  return lookup_name(kAttentions, v);
}

Precision parse_precision(std::string_view t) {
  return lookup_value(kPrecisions, t, "precision");
}
Optimizer parse_optimizer(std::string_view t) {
  return lookup_value(kOptimizers, t, "optimizer");
}
Strategy parse_strategy(std::string_view t) {
  return lookup_value(kStrategies, t, "strategy");
}
Offload parse_offload(std::string_view t) {
  return lookup_value(kOffloads, t, "offload");
}
Checkpointing parse_checkpointing(std::string_view t) {
  return lookup_value(kCheckpointings, t, "checkpointing");
}
Attention parse_attention(std::string_view t) {
  return lookup_value(kAttentions, t, "attention");
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
