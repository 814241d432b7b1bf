// The fixed configurations calibration and accuracy run. They are disjoint: calibration fits
// the step correction on its set, accuracy reports errors on configurations the fit never saw.
// CPU runs use narrow models (--scale) so a configuration takes about a second on two cores;
// CUDA runs use full-width GPT-2 and scaled 7B models.
#pragma once

#include <string>
#include <vector>

#include "dtplan/runtime/trials.hpp"

namespace dtplan::runtime {

std::vector<RuntimeConfig> calibration_set(const std::string& backend);
std::vector<RuntimeConfig> accuracy_set(const std::string& backend);

}  // namespace dtplan::runtime
