// Qt's messages while dtplan-gui renders a screenshot without a display: the offscreen
// platform's notices that have no bearing on a rendered file are dropped, everything else
// (Qt's real warnings and errors) still reaches stderr.
#pragma once

#include <QString>
#include <QtGlobal>

namespace dtplan::gui {

// True for the notices a headless render always prints and a user can do nothing about: the
// offscreen plugin's "does not support propagateSizeHints()" and QStandardPaths' fallback
// when XDG_RUNTIME_DIR is unset (usual as root or in a container).
bool is_headless_notice(QtMsgType type, const QString& message);

// Installs the filter above in front of Qt's handler, for the rest of the process.
void quiet_headless_notices();

}  // namespace dtplan::gui
