// NcclCommunicator: NCCL collectives on a communication stream, ordered against the compute
// stream with events, timed with CUDA events, watched for asynchronous errors and stalls.
//
//   compute stream:  ... kernels ... [ready] ............ wait(h) ─┐ ... kernels
//                                       │                          │
//   comm stream:               wait ────┘ [start] ncclXxx [end] ───┘
#include "nccl_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {

namespace {}  // namespace

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  // NCCL_VERSION_CODE: major*1000 + minor*100 + patch before 2.9, major*10000 + ... since.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

NcclCommunicator::NcclCommunicator(const MpiGroup& group, CudaDevice& device, double timeout_s)
    : device_(device), rank_(group.rank()), size_(group.size()), timeout_s_(timeout_s) {
  // Rank 0 sends a success flag with the id so that a failure there stops every rank.
  struct {
    int ok = 0;
    ncclUniqueId id{};
  } unique;
  check(cudaSetDevice(device_.index()), "cudaSetDevice");
  if (rank_ == 0) unique.ok = ncclGetUniqueId(&unique.id) == ncclSuccess ? 1 : 0;
  group.broadcast_bytes(&unique, sizeof unique, 0);
  if (!unique.ok) throw Error("ncclGetUniqueId failed on rank 0; no NCCL communicator was made");
  try {
    check_nccl(ncclCommInitRank(&comm_, size_, unique.id, rank_), "ncclCommInitRank");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  release();
}

void NcclCommunicator::release() noexcept {
  // Outstanding collectives finish (or time out and abort) before the communicator goes;
  // their errors cannot leave a destructor.
  if (comm_ != nullptr) {
    try {
      drain();
    } catch (...) {
    }
  }
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  comm_ = nullptr;
  for (const Op& op : ops_) {
    cudaEventDestroy(op.start);
    cudaEventDestroy(op.end);
  }
  for (cudaEvent_t e : spare_events_)
    cudaEventDestroy(e);
  ops_.clear();
  spare_events_.clear();
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  ready_ = nullptr;
  stream_ = nullptr;
}

std::string NcclCommunicator::description() const {
  return "NCCL " + nccl_version();
}

void NcclCommunicator::check(cudaError_t code, std::string_view call) const {
  cuda_check(code, std::string(call) + " (NCCL communicator, rank " + std::to_string(rank_) + ")",
             device_.index());
}

void NcclCommunicator::check_nccl(ncclResult_t code, std::string_view call) const {
  if (code == ncclSuccess) return;
  std::string message = std::string(call) + " failed on rank " + std::to_string(rank_) + " of " +
                        std::to_string(size_) + ", CUDA device " + std::to_string(device_.index()) +
                        ": " + ncclGetErrorString(code);
  if (const char* last = ncclGetLastError(comm_); last != nullptr && *last != '\0') {
    message += " (" + std::string(last) + ")";
  }
  throw Error(message);
}

cudaEvent_t NcclCommunicator::take_event() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

// clear_records() empties records_ behind this class's back; records_ only grows here, so a
// size below what was pushed means it was cleared, and older ops keep no record.
void NcclCommunicator::forget_cleared_records() {
  if (records_.size() >= recorded_) return;
  for (Op& op : ops_)
    op.record = kNoRecord;
  recorded_ = records_.size();
}

template <typename Call>
CommHandle NcclCommunicator::issue(Collective kind, std::int64_t bytes, std::string_view call_name,
                                   Call call) {
  if (comm_ == nullptr) {
    throw Error("NCCL " + std::string(name_of(kind)) +
                ": the communicator was aborted after an earlier error");
  }
  forget_cleared_records();
  check(cudaEventRecord(ready_, device_.stream()), "cudaEventRecord (compute stream)");
  check(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent (comm stream)");
  Op op{kind, bytes, phase_, take_event(), nullptr, records_.size()};
  try {
    op.end = take_event();
    check(cudaEventRecord(op.start, stream_), "cudaEventRecord (start)");
    check_nccl(call(), call_name);
    check(cudaEventRecord(op.end, stream_), "cudaEventRecord (end)");
  } catch (...) {
    spare_events_.push_back(op.start);
    if (op.end != nullptr) spare_events_.push_back(op.end);
    throw;
  }
  records_.push_back(CollectiveRecord{kind, bytes, 0, phase_});
  ++recorded_;
  ops_.push_back(std::move(op));
  return first_handle_ + static_cast<CommHandle>(ops_.size()) - 1;
}

CommHandle NcclCommunicator::all_reduce(float* data, std::int64_t count) {
  return issue(Collective::all_reduce, count * 4, "ncclAllReduce", [&] {
    return ncclAllReduce(data, data, static_cast<std::size_t>(count), ncclFloat, ncclSum, comm_,
                         stream_);
  });
}

CommHandle NcclCommunicator::all_reduce_max(float* data, std::int64_t count) {
  return issue(Collective::all_reduce, count * 4, "ncclAllReduce (max)", [&] {
    return ncclAllReduce(data, data, static_cast<std::size_t>(count), ncclFloat, ncclMax, comm_,
                         stream_);
  });
}

CommHandle NcclCommunicator::send_recv(const float* send, std::int64_t send_count, int to,
                                       float* recv, std::int64_t recv_count, int from) {
  const std::int64_t bytes = 4 * std::max(to < 0 ? 0 : send_count, from < 0 ? 0 : recv_count);
  return issue(Collective::send_recv, bytes, "ncclSend/ncclRecv", [&] {
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess && to >= 0) {
      r = ncclSend(send, static_cast<std::size_t>(send_count), ncclFloat, to, comm_, stream_);
    }
    if (r == ncclSuccess && from >= 0) {
      r = ncclRecv(recv, static_cast<std::size_t>(recv_count), ncclFloat, from, comm_, stream_);
    }
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

CommHandle NcclCommunicator::reduce_scatter(const float* in, float* out, std::int64_t count) {
  return issue(Collective::reduce_scatter, count * 4 * size_, "ncclReduceScatter", [&] {
    return ncclReduceScatter(in, out, static_cast<std::size_t>(count), ncclFloat, ncclSum, comm_,
                             stream_);
  });
}

CommHandle NcclCommunicator::all_gather(const float* in, float* out, std::int64_t count) {
  return issue(Collective::all_gather, count * 4 * size_, "ncclAllGather", [&] {
    return ncclAllGather(in, out, static_cast<std::size_t>(count), ncclFloat, comm_, stream_);
  });
}

CommHandle NcclCommunicator::broadcast(float* data, std::int64_t count, int root) {
  return issue(Collective::broadcast, count * 4, "ncclBroadcast", [&] {
    return ncclBroadcast(data, data, static_cast<std::size_t>(count), ncclFloat, root, comm_,
                         stream_);
  });
}

CommHandle NcclCommunicator::reduce(float* data, std::int64_t count, int root) {
  return issue(Collective::reduce, count * 4, "ncclReduce", [&] {
    return ncclReduce(data, data, static_cast<std::size_t>(count), ncclFloat, ncclSum, root, comm_,
                      stream_);
  });
}

// Only the compute stream waits: the host goes on queueing work behind the collective.
void NcclCommunicator::wait(CommHandle h) {
  if (h < first_handle_) return;  // completed and timed by an earlier records()
  const auto index = static_cast<std::size_t>(h - first_handle_);
  if (index >= ops_.size()) {
    throw Error("NCCL wait: handle " + std::to_string(h) + " was never issued");
  }
  check(cudaStreamWaitEvent(device_.stream(), ops_[index].end, 0), "cudaStreamWaitEvent (wait)");
}

[[noreturn]] void NcclCommunicator::fail(const Op& op, const std::string& why) {
  ncclCommAbort(comm_);
  comm_ = nullptr;
  std::ostringstream s;
  s << "NCCL " << name_of(op.kind) << " of " << op.bytes << " bytes (phase '" << op.phase
    << "') on rank " << rank_ << " of " << size_ << ", CUDA device " << device_.index() << ": "
    << why << "; the communicator was aborted";
  throw Error(s.str());
}

// Watchdog: ops complete in stream order, so the first unfinished one is the one holding
// the stream. The clock restarts whenever one completes: timeout_s bounds a stall, not the
// total time of a long queue.
void NcclCommunicator::drain() {
  using Clock = std::chrono::steady_clock;
  auto last_progress = Clock::now();
  std::size_t done = 0;
  while (done < ops_.size()) {
    const cudaError_t query = cudaEventQuery(ops_[done].end);
    if (query == cudaSuccess) {
      ++done;
      last_progress = Clock::now();
      continue;
    }
    if (query != cudaErrorNotReady) {
      fail(ops_[done], std::string("cudaEventQuery: ") + cudaGetErrorString(query));
    }
    ncclResult_t async = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(comm_, &async);
    if (asked != ncclSuccess || async != ncclSuccess) {
      fail(ops_[done], std::string("asynchronous NCCL error: ") +
                           ncclGetErrorString(asked != ncclSuccess ? asked : async));
    }
    const std::chrono::duration<double> stalled = Clock::now() - last_progress;
    if (stalled.count() > timeout_s_) {
      fail(ops_[done], "not complete after " + std::to_string(timeout_s_) + " s (timeout)");
    }
    // Busy-poll, as NCCL's own proxy thread does; yield lets other host threads run.
    std::this_thread::yield();
  }
}

const std::vector<CollectiveRecord>& NcclCommunicator::records() {
  if (comm_ == nullptr) return records_;  // aborted: nothing more completes
  drain();
  forget_cleared_records();
  for (const Op& op : ops_) {
    if (op.record != kNoRecord) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, op.start, op.end), "cudaEventElapsedTime");
      records_[op.record].time_s = static_cast<double>(ms) * 1e-3;
    }
    spare_events_.push_back(op.start);
    spare_events_.push_back(op.end);
  }
  first_handle_ += static_cast<CommHandle>(ops_.size());
  ops_.clear();
  return records_;
}

}  // namespace dtplan::runtime
