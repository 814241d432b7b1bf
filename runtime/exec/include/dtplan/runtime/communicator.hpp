// The data-parallel seam: collectives over device buffers (fp32 sums). Two backends: MPI over
// host buffers (CPU) and NCCL over device buffers on a communication stream (CUDA). Every
// operation returns a handle and may still run when it returns (NCCL) or have completed (MPI,
// which runs Open MPI's blocking collective at issue); wait() makes the result visible to the
// compute side. A caller issues a collective once its input is final and touches its output
// only after wait(), so both orders are correct. Every collective is recorded with its size and
// time, labelled with the phase that issued it, so the runtime can report each one against the cost
// model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtplan::runtime {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, reduce, send_recv };
std::string_view name_of(Collective c);

// One collective as issued. bytes is the message size as nccl-tests counts it: the buffer
// for all-reduce, broadcast and reduce; the whole (gathered / unscattered) buffer for
// all-gather and reduce-scatter; for a point-to-point exchange the larger of what it sent and
// what it received.
struct CollectiveRecord {
  Collective kind = Collective::all_reduce;
  std::int64_t bytes = 0;
  // The collective's own duration: the blocking MPI call, or CUDA events around it on NCCL's
  // stream (time spent waiting for a late peer included, as in any collective).
  double time_s = 0;
  std::string phase;
};

using CommHandle = std::int64_t;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string description() const = 0;  // "MPI: Open MPI v4.1.4" / "NCCL 2.28.3"

  // data[count] summed over ranks, in place.
  virtual CommHandle all_reduce(float* data, std::int64_t count) = 0;
  // data[count] the element-wise maximum over ranks, in place (recorded as an all-reduce).
  virtual CommHandle all_reduce_max(float* data, std::int64_t count) = 0;
  // in[size x count] summed over ranks; rank r receives block r in out[count].
  virtual CommHandle reduce_scatter(const float* in, float* out, std::int64_t count) = 0;
  // in[count] from every rank gathered into out[size x count] in rank order. `in` may be
  // out + rank x count (in place).
  virtual CommHandle all_gather(const float* in, float* out, std::int64_t count) = 0;
  virtual CommHandle broadcast(float* data, std::int64_t count, int root) = 0;
  // data[count] summed into root's data (other ranks' buffers are left as they were).
  virtual CommHandle reduce(float* data, std::int64_t count, int root) = 0;
  // Point to point, as pipeline stages exchange activations and their gradients: send[send_count]
  // to rank `to` and recv[recv_count] from rank `from` at once (a peer of -1: that half is
  // skipped), so that neighbours sending to each other never deadlock (MPI_Sendrecv; NCCL's
  // grouped ncclSend and ncclRecv).
  virtual CommHandle send_recv(const float* send, std::int64_t send_count, int to, float* recv,
                               std::int64_t recv_count, int from) = 0;
  // Completes `h`: afterwards the compute side may read and write its buffers.
  virtual void wait(CommHandle h) = 0;
  // Lets queued collectives advance while the caller computes (NCCL notes completed ones).
  virtual void progress() {}

  void set_phase(std::string phase) { phase_ = std::move(phase); }
  // Every collective since the last clear, times resolved (waits for outstanding timing).
  virtual const std::vector<CollectiveRecord>& records() { return records_; }
  void clear_records() { records_.clear(); }

 protected:
  std::vector<CollectiveRecord> records_;
  std::string phase_;
};

}  // namespace dtplan::runtime
