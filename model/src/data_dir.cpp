// Resolution of the data directory.
#include "dtplan/model/data_dir.hpp"

#include <cstdlib>
#include <system_error>

#include "dtplan/model/error.hpp"

namespace dtplan {

std::filesystem::path resolve_data_dir(const std::string& explicit_dir) {
  std::string chosen = explicit_dir;
  std::string how = "--data-dir";
  if (chosen.empty()) {
    if (const char* env = std::getenv("DTPLAN_DATA_DIR"); env != nullptr && *env != '\0') {
      chosen = env;
      how = "DTPLAN_DATA_DIR";
    } else {
      chosen = DTPLAN_DEFAULT_DATA_DIR;
      how = "the build's data directory";
    }
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(chosen) / "gpus.json", ec)) {
    throw Error(how + " '" + chosen + "' is not a dtplan data directory (no gpus.json in it)");
  }
  return chosen;
}

}  // namespace dtplan
