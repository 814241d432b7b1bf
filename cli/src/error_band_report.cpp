// The error band of a prediction: how far dtplan was from published runs like it.
#include "error_band_report.hpp"

#include "format.hpp"

namespace dtplan::cli {

BandReport band_of(const std::filesystem::path& data, std::string_view strategy,
                   const GpuSpec& gpu) {
  BandReport r{planner::band_group(strategy, gpu.architecture), std::nullopt};
  const auto file = data / "error_bands.json";
  if (!std::filesystem::exists(file)) return r;
  const auto bands = planner::load_error_bands(file);
  if (const auto* b = planner::find_band(bands, r.group)) r.band = *b;
  return r;
}

void print_band(std::ostream& out, const BandReport& r) {
  if (!r.band) {
    out << "  accuracy: no published measurements of " << r.group
        << " runs to say how far to trust this (dtplan accuracy --published)\n";
    return;
  }
  const auto& b = *r.band;
  out << "  accuracy: on " << b.rows << " published runs of " << r.group
      << ", dtplan's step predictions were off by " << percent(b.median_abs_error) << " (median), "
      << signed_percent(b.bias) << " on average (+: optimistic; dtplan "
      << "accuracy --published)"
      << (b.rows < planner::kFewBandRows ? "; so few runs are a weak guide" : "") << '\n';
}

nlohmann::json band_json(const BandReport& r) {
  if (!r.band) return {{"group", r.group}, {"rows", 0}};
  return {{"group", r.group},
          {"rows", r.band->rows},
          {"median_abs_error", r.band->median_abs_error},
          {"mean_abs_error", r.band->mean_abs_error},
          {"bias", r.band->bias}};
}

}  // namespace dtplan::cli
