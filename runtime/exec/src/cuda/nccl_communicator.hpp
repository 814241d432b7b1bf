// NcclCommunicator: the Communicator of the CUDA backend. Collectives run on their own
// stream, ordered after the compute stream's queued work with an event and bracketed by
// timing events; a watchdog turns NCCL asynchronous errors and stalls into an abort and a
// dtplan::Error. Private to the runtime; built by make_nccl_communicator.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_device.hpp"
#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/mpi_group.hpp"

namespace dtplan::runtime {

// The loaded NCCL library's version, "2.28.9" ("unknown" when NCCL does not say).
std::string nccl_version();

class NcclCommunicator final : public Communicator {
 public:
  // Collective over all ranks of `group`; `timeout_s` bounds how long records() waits
  // without any collective completing.
  NcclCommunicator(const MpiGroup& group, CudaDevice& device, double timeout_s);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override;

  CommHandle all_reduce(float* data, std::int64_t count) override;
  CommHandle all_reduce_max(float* data, std::int64_t count) override;
  CommHandle reduce_scatter(const float* in, float* out, std::int64_t count) override;
  CommHandle all_gather(const float* in, float* out, std::int64_t count) override;
  CommHandle broadcast(float* data, std::int64_t count, int root) override;
  CommHandle reduce(float* data, std::int64_t count, int root) override;
  CommHandle send_recv(const float* send, std::int64_t send_count, int to, float* recv,
                       std::int64_t recv_count, int from) override;
  void wait(CommHandle h) override;
  const std::vector<CollectiveRecord>& records() override;

 private:
  // One issued collective; `record` indexes records_, or is kNoRecord once cleared.
  struct Op {
    Collective kind;
    std::int64_t bytes;
    std::string phase;
    cudaEvent_t start;
    cudaEvent_t end;
    std::size_t record;
  };
  static constexpr std::size_t kNoRecord = static_cast<std::size_t>(-1);

  template <typename Call>
  CommHandle issue(Collective kind, std::int64_t bytes, std::string_view call_name, Call call);
  void drain();
  [[noreturn]] void fail(const Op& op, const std::string& why);
  void forget_cleared_records();
  cudaEvent_t take_event();
  void release() noexcept;
  void check(cudaError_t code, std::string_view call) const;
  void check_nccl(ncclResult_t code, std::string_view call) const;

  CudaDevice& device_;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // compute stream -> comm stream ordering, reused
  std::vector<Op> ops_;          // issued since the last records(), in stream order
  std::vector<cudaEvent_t> spare_events_;
  CommHandle first_handle_ = 0;  // the handle of ops_[0]
  std::size_t recorded_ = 0;     // entries of records_ pushed here since the last clear
};

}  // namespace dtplan::runtime
