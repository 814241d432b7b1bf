// MPI control plane: placement, host reductions of measurements, errors as exceptions.
#include "dtplan/runtime/mpi_group.hpp"

#include <unistd.h>

#include <array>
#include <string>

#include "dtplan/model/error.hpp"
#include "mpi_check.hpp"

namespace dtplan::runtime {

void mpi_check(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(code, text.data(), &length);
  throw Error(std::string(call) + " failed: " + std::string(text.data(), length));
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  // The main thread makes every MPI call; a watchdog thread only ends the process.
  mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (and become exceptions) instead of aborting silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiSession::library_version() {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> text{};
  int length = 0;
  MPI_Get_library_version(text.data(), &length);
  std::string v(text.data(), length);
  if (auto nl = v.find_first_of("\n,"); nl != std::string::npos) v.resize(nl);
  return v;
}

MpiGroup::MpiGroup(MPI_Comm comm) : comm_(comm) {
  mpi_check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  // Ranks sharing a node form the local group (rank order inside it = local rank).
  MPI_Comm local = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type");
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
}

std::optional<MpiGroup> MpiGroup::split_consecutive(int size) const {
  if (size < 1 || size > size_) {
    throw Error("communicator size " + std::to_string(size) + " outside 1.." +
                std::to_string(size_));
  }
  const bool member = rank_ < size_ / size * size;
  MPI_Comm sub = MPI_COMM_NULL;
  // The sub-communicator lives until MPI_Finalize (profiles make a handful).
  mpi_check(MPI_Comm_split(comm_, member ? rank_ / size : MPI_UNDEFINED, rank_, &sub),
            "MPI_Comm_split");
  if (!member) return std::nullopt;
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return MpiGroup(sub);
}

std::optional<MpiGroup> MpiGroup::split(int color) const {
  MPI_Comm sub = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, rank_, &sub),
            "MPI_Comm_split");
  if (color < 0) return std::nullopt;
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return MpiGroup(sub);
}

MpiGroup MpiGroup::world() {
  return MpiGroup(MPI_COMM_WORLD);
}
MpiGroup MpiGroup::self() {
  return MpiGroup(MPI_COMM_SELF);
}

void MpiGroup::barrier() const {
  mpi_check(MPI_Barrier(comm_), "MPI_Barrier");
}

double MpiGroup::sum(double x) const {
  double r = 0;
  mpi_check(MPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce(sum)");
  return r;
}

double MpiGroup::max(double x) const {
  double r = 0;
  mpi_check(MPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce(max)");
  return r;
}

std::int64_t MpiGroup::max(std::int64_t x) const {
  std::int64_t r = 0;
  mpi_check(MPI_Allreduce(&x, &r, 1, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce(max)");
  return r;
}

std::vector<double> MpiGroup::all_gather(const std::vector<double>& mine) const {
  const int n = static_cast<int>(mine.size());
  if (max(static_cast<std::int64_t>(n)) != n) {
    throw Error("MpiGroup::all_gather: ranks contribute different counts");
  }
  std::vector<double> all(static_cast<std::size_t>(n) * size_);
  mpi_check(MPI_Allgather(mine.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, comm_),
            "MPI_Allgather");
  return all;
}

void MpiGroup::broadcast_bytes(void* data, std::int64_t bytes, int root) const {
  mpi_check(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_), "MPI_Bcast");
}

std::string MpiGroup::host_name() const {
  std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
  int length = 0;
  MPI_Get_processor_name(name.data(), &length);
  return std::string(name.data(), length);
}

}  // namespace dtplan::runtime
