// The GPU backend: a CUDA device (cudaMalloc'ed buffers, cuBLAS GEMMs, CUDA kernels on one
// compute stream) and an NCCL communicator (its own stream, ordered against compute with
// events, timed with CUDA events; the unique id travels over MPI). Built whenever CMake finds
// the CUDA toolkit and NCCL; otherwise these functions throw dtplan::Error saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/device.hpp"
#include "dtplan/runtime/mpi_group.hpp"

namespace dtplan::runtime {

bool cuda_backend_built();
// Number of visible CUDA devices (0 when the backend is not built or no driver answers).
int cuda_device_count();
// The device local_rank % count. capacity_bytes = 0 uses the device's free memory.
std::unique_ptr<Device> make_cuda_device(int local_rank, std::int64_t capacity_bytes);
// One NCCL communicator over `group` (ncclGetUniqueId on rank 0, MPI broadcast), working on
// buffers of `device`, which must come from make_cuda_device. An NCCL asynchronous error or a
// collective that does not finish within `timeout_s` aborts the communicator and throws.
std::unique_ptr<Communicator> make_nccl_communicator(const MpiGroup& group, Device& device,
                                                     double timeout_s);
// "CUDA runtime 13.0, driver 13.0, cuBLAS 13.0.0, NCCL 2.28.3" (empty when not built).
std::string cuda_versions();

}  // namespace dtplan::runtime
