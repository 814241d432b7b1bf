// The CPU backend's collectives: MPI-3 non-blocking collectives over host buffers. A
// collective's time runs from issue to the moment its completion is observed (in wait() or
// progress()), so a bucket that finishes while backward computes is timed to the next check.
#include <chrono>
#include <limits>
#include <memory>

#include "dtplan/model/error.hpp"
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
  }
  return "?";
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
  }
  ~MpiCommunicator() override {
    for (auto& p : pending_) {
      if (p.request != MPI_REQUEST_NULL) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override { return "MPI: " + MpiSession::library_version(); }

  CommHandle all_reduce(float* data, std::int64_t count) override {
    const int n = mpi_count(count, Collective::all_reduce);
    return issue(Collective::all_reduce, count * 4, [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm_, r);
    });
  }
  CommHandle reduce_scatter(const float* in, float* out, std::int64_t count) override {
    const int n = mpi_count(count * size_, Collective::reduce_scatter) / size_;
    return issue(Collective::reduce_scatter, count * size_ * 4, [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, comm_, r);
    });
  }
  CommHandle all_gather(const float* in, float* out, std::int64_t count) override {
    const int n = mpi_count(count * size_, Collective::all_gather) / size_;
    const void* send = in == out + count * rank_ ? MPI_IN_PLACE : in;
    return issue(Collective::all_gather, count * size_ * 4, [&](MPI_Request* r) {
      return MPI_Iallgather(send, n, MPI_FLOAT, out, n, MPI_FLOAT, comm_, r);
    });
  }
  CommHandle broadcast(float* data, std::int64_t count, int root) override {
    const int n = mpi_count(count, Collective::broadcast);
    return issue(Collective::broadcast, count * 4,
                 [&](MPI_Request* r) { return MPI_Ibcast(data, n, MPI_FLOAT, root, comm_, r); });
  }
  CommHandle reduce(float* data, std::int64_t count, int root) override {
    const int n = mpi_count(count, Collective::reduce);
    const bool at_root = rank_ == root;
    return issue(Collective::reduce, count * 4, [&](MPI_Request* r) {
      return MPI_Ireduce(at_root ? MPI_IN_PLACE : data, at_root ? data : nullptr, n, MPI_FLOAT,
                         MPI_SUM, root, comm_, r);
    });
  }

  void wait(CommHandle h) override {
    auto& p = pending_.at(static_cast<std::size_t>(h));
    if (p.request == MPI_REQUEST_NULL) return;
    mpi_check(MPI_Wait(&p.request, MPI_STATUS_IGNORE), wait_what(p));
    finish(p);
  }

  void progress() override {
    for (auto& p : pending_) {
      if (p.request == MPI_REQUEST_NULL) continue;
      int done = 0;
      mpi_check(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE), wait_what(p));
      if (done) finish(p);
    }
  }

  const std::vector<CollectiveRecord>& records() override {
    for (std::size_t i = 0; i < pending_.size(); ++i)
      wait(static_cast<CommHandle>(i));
    pending_.clear();
    return records_;
  }

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::size_t record = 0;
    double start_s = 0;
  };

  template <class Start>
  CommHandle issue(Collective kind, std::int64_t bytes, Start start) {
    records_.push_back({kind, bytes, 0, phase_});
    Pending p{MPI_REQUEST_NULL, records_.size() - 1, now_s()};
    mpi_check(start(&p.request), "MPI " + std::string(name_of(kind)) + " of " +
                                     std::to_string(bytes) + " bytes in " + phase_);
    pending_.push_back(p);
    return static_cast<CommHandle>(pending_.size() - 1);
  }

  void finish(Pending& p) {
    if (p.record < records_.size()) records_[p.record].time_s = now_s() - p.start_s;
  }

  std::string wait_what(const Pending& p) const {
    const auto& r = records_.at(p.record);
    return "completing MPI " + std::string(name_of(r.kind)) + " of " + std::to_string(r.bytes) +
           " bytes in " + r.phase;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<Pending> pending_;
};

}  // namespace

std::unique_ptr<Communicator> MpiGroup::make_communicator() const {
  return std::make_unique<MpiCommunicator>(comm_);
}

}  // namespace dtplan::runtime
