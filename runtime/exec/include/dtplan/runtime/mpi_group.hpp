// MPI as the job's control plane: process placement (rank, local rank, world size), host-side
// reductions of measurements, the NCCL unique id, and the MPI data communicator of the CPU
// backend. MPI errors are returned, not fatal, and become dtplan::Error with MPI's text.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/runtime/communicator.hpp"

namespace dtplan::runtime {

// MPI_Init_thread / MPI_Finalize for the life of the process (one per process).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  static std::string library_version();
};

class MpiGroup {
 public:
  static MpiGroup world();
  static MpiGroup self();  // a group of one: single-process reference runs

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  void barrier() const;
  double sum(double x) const;
  double max(double x) const;
  std::int64_t max(std::int64_t x) const;
  // Every rank's values, concatenated in rank order, on every rank.
  std::vector<double> all_gather(const std::vector<double>& mine) const;
  void broadcast_bytes(void* data, std::int64_t bytes, int root) const;
  std::string host_name() const;

  // Consecutive ranks in groups of `size` (ranks 0..size-1, size..2 size-1, ...); ranks past
  // the last whole group get nullopt. Collective over this group.
  std::optional<MpiGroup> split_consecutive(int size) const;
  // The ranks giving the same colour together, in rank order; a negative colour joins none
  // (nullopt). Collective over this group.
  std::optional<MpiGroup> split(int color) const;

  // The CPU backend's data communicator over this group.
  std::unique_ptr<Communicator> make_communicator() const;
  MPI_Comm handle() const { return comm_; }

 private:
  explicit MpiGroup(MPI_Comm comm);
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace dtplan::runtime
