// What every JSON report starts with: schema version and what produced it (tool, version,
// command line), so an output records its inputs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cli {

// The report's text (indented by 2, newline-terminated). nlohmann writes inf and NaN as null:
// a non-finite number anywhere is an internal error instead (NonFiniteInReport, format.hpp).
std::string report_text(const nlohmann::json& report);

nlohmann::json report_preamble(const std::string& command, const std::vector<std::string>& args);
nlohmann::json model_json(const ModelDesc& m);
nlohmann::json training_json(const TrainingConfig& c);
nlohmann::json overheads_json(const cost::OverheadConstants& k);

}  // namespace dtplan::cli
