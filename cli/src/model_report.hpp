// Human-readable description of one model: parameters by component, shapes, and for layer
// lists a per-layer table of output shapes, activation sizes and parameters.
#pragma once

#include <ostream>

#include "dtplan/model/model_desc.hpp"

namespace dtplan::cli {

void print_model_detail(std::ostream& out, const ModelDesc& m);

}  // namespace dtplan::cli
