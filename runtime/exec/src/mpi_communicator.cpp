// The CPU backend's collectives: Open MPI's blocking collectives over host buffers, run to
// completion when issued. Open MPI progresses a non-blocking collective (libnbc) only inside MPI
// calls, so on the compute thread MPI_Iallreduce overlapped too little to change a DDP step's
// time and cost up to 3.6x the blocking call of the same size (bench/bench_runtime_collectives,
// docs/performance.md); its time was also the span from issue to the next MPI_Test, backward's
// compute included.
// Run at issue, a collective uses Open MPI's tuned algorithms and its record is its duration.
// wait() then has nothing left to do, which is a valid order for every caller: a caller issues
// a collective only once its input is final and reads the output only after wait().
#include <algorithm>
#include <limits>
#include <memory>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/duration_clock.hpp"
#include "dtplan/runtime/mpi_group.hpp"
#include "mpi_check.hpp"

namespace dtplan::runtime {

std::string_view name_of(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::send_recv:
      return "send_recv";
  }
  return "?";
}

namespace {

int mpi_count(std::int64_t count, Collective kind) {
  if (count < 0 || count > std::numeric_limits<int>::max()) {
    throw Error(std::string(name_of(kind)) + " of " + std::to_string(count) +
                " floats: more than MPI's int count allows");
  }
  return static_cast<int>(count);
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    (void)DurationClock::instance();  // its rate is measured now, not inside the first call
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override { return "MPI: " + MpiSession::library_version(); }

  CommHandle all_reduce(float* data, std::int64_t count) override {
    const int n = mpi_count(count, Collective::all_reduce);
    return run(Collective::all_reduce, count * 4,
               [&] { return MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm_); });
  }
  CommHandle all_reduce_max(float* data, std::int64_t count) override {
    const int n = mpi_count(count, Collective::all_reduce);
    return run(Collective::all_reduce, count * 4,
               [&] { return MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_MAX, comm_); });
  }
  CommHandle reduce_scatter(const float* in, float* out, std::int64_t count) override {
    const int n = mpi_count(count * size_, Collective::reduce_scatter) / size_;
    return run(Collective::reduce_scatter, count * size_ * 4,
               [&] { return MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, comm_); });
  }
  CommHandle all_gather(const float* in, float* out, std::int64_t count) override {
    const int n = mpi_count(count * size_, Collective::all_gather) / size_;
    const void* send = in == out + count * rank_ ? MPI_IN_PLACE : in;
    return run(Collective::all_gather, count * size_ * 4,
               [&] { return MPI_Allgather(send, n, MPI_FLOAT, out, n, MPI_FLOAT, comm_); });
  }
  CommHandle broadcast(float* data, std::int64_t count, int root) override {
    const int n = mpi_count(count, Collective::broadcast);
    return run(Collective::broadcast, count * 4,
               [&] { return MPI_Bcast(data, n, MPI_FLOAT, root, comm_); });
  }
  CommHandle reduce(float* data, std::int64_t count, int root) override {
    const int n = mpi_count(count, Collective::reduce);
    const bool at_root = rank_ == root;
    return run(Collective::reduce, count * 4, [&] {
      return MPI_Reduce(at_root ? MPI_IN_PLACE : data, at_root ? data : nullptr, n, MPI_FLOAT,
                        MPI_SUM, root, comm_);
    });
  }

  CommHandle send_recv(const float* send, std::int64_t send_count, int to, float* recv,
                       std::int64_t recv_count, int from) override {
    const int n_send = to < 0 ? 0 : mpi_count(send_count, Collective::send_recv);
    const int n_recv = from < 0 ? 0 : mpi_count(recv_count, Collective::send_recv);
    check_peer(to, "to");
    check_peer(from, "from");
    const std::int64_t bytes = 4 * std::max<std::int64_t>(n_send, n_recv);
    return run(Collective::send_recv, bytes, [&] {
      return MPI_Sendrecv(send, n_send, MPI_FLOAT, to < 0 ? MPI_PROC_NULL : to, kP2pTag, recv,
                          n_recv, MPI_FLOAT, from < 0 ? MPI_PROC_NULL : from, kP2pTag, comm_,
                          MPI_STATUS_IGNORE);
    });
  }

  // The collective completed when it was issued; only the handle is checked.
  void wait(CommHandle h) override {
    if (h < 0 || h >= issued_) {
      throw Error("waiting on collective handle " + std::to_string(h) + ": only " +
                  std::to_string(issued_) + " collectives were issued");
    }
  }

 private:
  static constexpr int kP2pTag = 17;

  void check_peer(int peer, const char* which) const {
    if (peer < -1 || peer >= size_ || peer == rank_) {
      throw Error("send_recv " + std::string(which) + " rank " + std::to_string(peer) +
                  ": not another rank of the " + std::to_string(size_) + " (rank " +
                  std::to_string(rank_) + ")");
    }
  }

  template <class Call>
  CommHandle run(Collective kind, std::int64_t bytes, Call call) {
    const auto& clock = DurationClock::instance();
    const std::uint64_t start = clock.ticks();
    const int code = call();
    const double time_s = clock.seconds(start, clock.ticks());
    if (code != MPI_SUCCESS) {
      mpi_check(code, "MPI " + std::string(name_of(kind)) + " of " + std::to_string(bytes) +
                          " bytes in " + phase_);
    }
    records_.push_back({kind, bytes, time_s, phase_});
    return issued_++;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  CommHandle issued_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> MpiGroup::make_communicator() const {
  return std::make_unique<MpiCommunicator>(comm_);
}

}  // namespace dtplan::runtime
