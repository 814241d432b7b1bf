// Names of the training enumerations, parsed with close-name suggestions.
#include "dtplan/model/training.hpp"

#include <algorithm>

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

std::string_view name_of(Fp8Recipe v) {
  return name_in(kFp8Recipes, v);
}

Fp8Recipe parse_fp8_recipe(std::string_view t) {
  return value_in(kFp8Recipes, t, "FP8 recipe");
}

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
std::string_view name_of(AttentionKernel v) {
  return name_in(kAttentionKernels, v);
}
std::string_view name_of(OptimizerImpl v) {
  return name_in(kOptimizerImpls, v);
}
std::string_view name_of(LayerKernels v) {
  return name_in(kLayerKernels, v);
}
std::string_view name_of(ZeroGrad v) {
  return name_in(kZeroGrads, v);
}

Precision parse_precision(std::string_view t) {
  return value_in(kPrecisions, t, "precision");
}
Optimizer parse_optimizer(std::string_view t) {
  return value_in(kOptimizers, t, "optimizer");
}
OptimizerImpl parse_optimizer_impl(std::string_view t) {
  return value_in(kOptimizerImpls, t, "optimizer implementation");
}
LayerKernels parse_layer_kernels(std::string_view t) {
  return value_in(kLayerKernels, t, "layer kernels");
}
ZeroGrad parse_zero_grad(std::string_view t) {
  return value_in(kZeroGrads, t, "zero_grad mode");
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
AttentionKernel parse_attention_kernel(std::string_view t) {
  return value_in(kAttentionKernels, t, "attention kernel");
}
std::string text_of(RecomputeModules m) {
  std::string out;
  for (const auto& [value, name, help] : kRecomputeModules) {
    if (!m.has(value)) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  return out.empty() ? "none" : out;
}

RecomputeModules parse_recompute_modules(std::string_view text) {
  auto out = RecomputeModules::empty();
  if (text == "none") return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const auto name = text.substr(start, comma - start);
    if (name.empty()) throw Error("'" + std::string(text) + "': an empty name in the list");
    const auto m = value_in(kRecomputeModules, name, "recompute module");
    if (out.has(m))
      throw Error("'" + std::string(text) + "' names " + std::string(name) + " twice");
    out.add(m);
    start = comma + 1;
  }
  return out;
}

void check_attention_kernel(Attention attention, AttentionKernel kernel) {
  if (kernel == AttentionKernel::framework || attention == Attention::flash) return;
  throw Error("{attention-kernel} " + std::string(name_of(kernel)) +
              " names a fused kernel, but {attention} " + std::string(name_of(attention)) +
              " runs none: choose flash attention");
}

namespace {

// "MAJOR.MINOR[.PATCH]" as three numbers (a missing patch is 0).
std::array<int, 3> release_numbers(std::string_view version) {
  std::array<int, 3> v{0, 0, 0};
  std::size_t part = 0;
  bool digit_seen = false;
  for (const char ch : version) {
    if (ch == '.' && digit_seen && part < 2) {
      ++part;
      digit_seen = false;
    } else if (ch >= '0' && ch <= '9' && v[part] < 10000) {
      v[part] = v[part] * 10 + (ch - '0');
      digit_seen = true;
    } else {
      digit_seen = false;
      break;
    }
  }
  if (!digit_seen || part == 0) {
    throw Error("'" + std::string(version) +
                "' is not a DeepSpeed release number like 0.14.4 or 0.5");
  }
  return v;
}

}  // namespace

Zero3Gathers zero3_gathers_of_deepspeed(std::string_view version) {
  const auto v = release_numbers(version);
  if (v < std::array<int, 3>{0, 3, 12}) {
    throw Error("DeepSpeed " + std::string(version) + " has no ZeRO-3 (it arrived in v0.3.12)");
  }
  if (v < std::array<int, 3>{0, 5, 5}) return Zero3Gathers::per_parameter_list;
  if (v < std::array<int, 3>{0, 6, 0}) return Zero3Gathers::per_parameter_flat;
  return Zero3Gathers::coalesced;
}

std::string_view releases_of(Zero3Gathers v) {
  switch (v) {
    case Zero3Gathers::coalesced:
      return "v0.6.0 and later";
    case Zero3Gathers::per_parameter_list:
      return "v0.3.12 to v0.5.4";
    case Zero3Gathers::per_parameter_flat:
      return "v0.5.5 to v0.5.10";
  }
  return "";
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

bool is_autocast(Precision p) {
  return p == Precision::amp_fp16 || p == Precision::amp_bf16;
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
