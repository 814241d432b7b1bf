// Runs the dtplan command line in-process for CLI tests, with the bundled data directory.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "dtplan/cli/app.hpp"

namespace dtplan::test {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

inline CliResult run_dtplan(std::vector<std::string> args) {
  std::ostringstream out, err;
  args.insert(args.end(), {"--data-dir", DTPLAN_DATA_DIR});
  const int code = dtplan::cli::run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace dtplan::test
