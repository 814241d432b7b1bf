// The `dtplan` command line: subcommands registered on one CLI11 app. run_cli() is what
// main() calls; tests call it too, with string streams.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace dtplan::cli {

// args excludes the program name. Returns the process exit code: 0 success, 1 bad input or
// failed computation (one-line message on `err`), 2 command-line syntax errors.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dtplan::cli
