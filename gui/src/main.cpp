// dtplan-gui: parses flags, opens the window or renders one view headless. main() only wires.
#include <QApplication>
#include <cstdio>

#include "gui_options.hpp"
#include "headless_messages.hpp"
#include "labels.hpp"
#include "main_window.hpp"

int main(int argc, char** argv) {
  try {
    const auto options = dtplan::gui::parse_gui_options(argc, argv);
    if (!options) return 0;
    // Headless rendering needs no display.
    if (!options->screenshot.empty()) {
      if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
      dtplan::gui::quiet_headless_notices();
    }
    QApplication app(argc, argv);
    dtplan::gui::MainWindow window(options->session);
    window.resize(options->width, options->height);
    if (options->screenshot.empty()) {
      window.show();
      window.start();
      return QApplication::exec();
    }
    return dtplan::gui::render_screenshot(window, *options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtplan-gui: %s\n", dtplan::gui::message_of(e).c_str());
    return 1;
  }
}
