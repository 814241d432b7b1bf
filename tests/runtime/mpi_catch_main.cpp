// Catch2 main for runtime tests: MPI is initialised around the session, every rank runs the
// same tests in the same order (collectives line up), and the job fails if any rank failed.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

#include "dtplan/runtime/mpi_group.hpp"

int main(int argc, char** argv) {
  dtplan::runtime::MpiSession mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  int failed = session.run();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
