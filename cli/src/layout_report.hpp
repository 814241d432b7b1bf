// A tensor x context x pipeline layout in text: the heaviest stage's memory by component and
// the step by part (dtplan estimate --tp/--pp/--cp and the best of dtplan plan).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/planner/search3d.hpp"

namespace dtplan::cli {

void print_layout_figures(std::ostream& out, const planner::Candidate3D& c, const GpuSpec& gpu,
                          const std::string& indent);
// "explain" and "notes" of a layout's memory, in the CLI's flags.
void add_explanations(nlohmann::json& j, const cost::Memory3D& mem);

// The memory line alone (and its notes); against the GPU's capacity when one is given.
void print_layout_memory(std::ostream& out, const cost::Layout3D& l, const cost::Memory3D& mem,
                         const std::optional<GpuSpec>& gpu, const std::string& indent);

}  // namespace dtplan::cli
