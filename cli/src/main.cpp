// dtplan executable: forwards the command line to the CLI library.
#include <iostream>

#include "dtplan/cli/app.hpp"

int main(int argc, char** argv) {
  return dtplan::cli::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                              std::cerr);
}
