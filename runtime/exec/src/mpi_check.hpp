// MPI return codes to dtplan::Error (with MPI's own text), for the MPI-backed sources.
#pragma once

#include <string_view>

namespace dtplan::runtime {

void mpi_check(int code, std::string_view call);

}  // namespace dtplan::runtime
