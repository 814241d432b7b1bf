// Dropping the offscreen platform's notices in screenshot mode (see headless_messages.hpp).
#include "headless_messages.hpp"

namespace dtplan::gui {

namespace {

QtMessageHandler qt_handler = nullptr;

void filtered(QtMsgType type, const QMessageLogContext& context, const QString& message) {
  if (is_headless_notice(type, message)) return;
  if (qt_handler != nullptr) qt_handler(type, context, message);
}

}  // namespace

bool is_headless_notice(QtMsgType type, const QString& message) {
  if (type != QtDebugMsg && type != QtInfoMsg && type != QtWarningMsg) return false;
  return message == QLatin1String("This plugin does not support propagateSizeHints()") ||
         (message.startsWith(QLatin1String("QStandardPaths: XDG_RUNTIME_DIR not set")));
}

void quiet_headless_notices() {
  qt_handler = qInstallMessageHandler(filtered);
}

}  // namespace dtplan::gui
