// The scratch file of fuzz_support.hpp.
#include "fuzz_support.hpp"

#include <unistd.h>

#include <fstream>
#include <stdexcept>

namespace dtplan::fuzz {

std::filesystem::path scratch_file(std::string_view bytes, std::string_view name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("dtplan-fuzz-" + std::to_string(static_cast<long>(::getpid())));
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto path = dir / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("fuzz: cannot write the scratch file " + path.string());
  return path;
}

}  // namespace dtplan::fuzz
