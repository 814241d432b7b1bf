// The forms that ask for a calibration's or an autotune's settings before it runs
// (workflows.hpp runs them). Each returns nothing when the user closes it.
#pragma once

#include <optional>

#include "session.hpp"
#include "workflows.hpp"

class QWidget;

namespace dtplan::gui {

std::optional<CalibrateChoice> ask_calibrate(QWidget* parent);
// The session's model, GPU, topology, precision and optimizer are tuned; the form asks for the
// rest (ranks, backend, the runtime's width, batch, trials, the results file).
std::optional<AutotuneChoice> ask_autotune(QWidget* parent, const Session& s);

}  // namespace dtplan::gui
