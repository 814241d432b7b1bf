// How far predictions of a kind of run have been from published measurements
// (data/error_bands.json, written by dtplan accuracy --published --write-bands): the line
// estimate and plan print beside a prediction, and its JSON.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/planner/published_accuracy.hpp"

namespace dtplan::cli {

struct BandReport {
  std::string group;  // band_group of the framework or strategy and the GPU's generation
  std::optional<planner::ErrorBand> band;  // none: no published runs of that group
};

// `strategy`: a data-parallel strategy's name or a layout framework's (megatron, fsdp2).
BandReport band_of(const std::filesystem::path& data, std::string_view strategy,
                   const GpuSpec& gpu);
void print_band(std::ostream& out, const BandReport& r);
nlohmann::json band_json(const BandReport& r);

}  // namespace dtplan::cli
