// The one exception type dtplan libraries throw. Its message is complete and user-facing:
// it names the input (file:line, key path, flag) and the problem. Only cli/ and gui/ turn it
// into an exit code or a dialog.
#pragma once

#include <stdexcept>
#include <string>

namespace dtplan {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace dtplan
