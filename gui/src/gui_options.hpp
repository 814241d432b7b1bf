// dtplan-gui's command line: the session's inputs with the CLI's flag names, a session file,
// and headless rendering of one view (--screenshot OUT.png --view NAME).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "session.hpp"

namespace dtplan::gui {

struct GuiOptions {
  Session session;
  std::string screenshot;  // PNG (or .svg) to write; empty: interactive
  std::string view = "memory";
  int width = 1400, height = 900;
};

// Throws dtplan::Error on bad flags; returns nullopt after --help (printed).
std::optional<GuiOptions> parse_gui_options(int argc, char** argv);

}  // namespace dtplan::gui
