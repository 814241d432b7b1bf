// cuda_backend.hpp for builds without CUDA: nothing is visible, and asking for a device or
// an NCCL communicator says why there is none.
#include "dtplan/model/error.hpp"
#include "dtplan/runtime/cuda_backend.hpp"

namespace dtplan::runtime {

namespace {

constexpr const char* kNotBuilt =
    "the CUDA backend is not built: CMake did not find the CUDA toolkit and NCCL when dtplan "
    "was configured (see README)";

}  // namespace

bool cuda_backend_built() {
  return false;
}

int cuda_device_count() {
  return 0;
}

std::unique_ptr<Device> make_cuda_device(int /*local_rank*/, std::int64_t /*capacity_bytes*/) {
  throw Error(kNotBuilt);
}

std::unique_ptr<Communicator> make_nccl_communicator(const MpiGroup& /*group*/, Device& /*device*/,
                                                     double /*timeout_s*/) {
  throw Error(kNotBuilt);
}

std::string cuda_versions() {
  return "";
}

}  // namespace dtplan::runtime
