// dtplan executable: forwards the command line to the CLI library, then makes sure what it
// printed reached standard output (a full disk or closed pipe is an error, not exit 0).
#include <iostream>

#include "dtplan/cli/app.hpp"
#include "dtplan/model/file_output.hpp"

int main(int argc, char** argv) {
  const int rc =
      dtplan::cli::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
  if (const std::string reason = dtplan::standard_output_error(); !reason.empty()) {
    std::cerr << "dtplan: error: cannot write the standard output: " << reason << '\n';
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
