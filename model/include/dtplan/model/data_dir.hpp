// Where dtplan finds its bundled data (presets, GPU catalogue, overhead constants).
#pragma once

#include <filesystem>
#include <string>

namespace dtplan {

// The explicit directory if non-empty; else $DTPLAN_DATA_DIR; else the directory configured at
// build time. Throws if the result is not a directory holding gpus.json.
std::filesystem::path resolve_data_dir(const std::string& explicit_dir);

}  // namespace dtplan
