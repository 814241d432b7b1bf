// The CUDA build of cuda_backend.hpp: device and communicator factories, and the versions
// of the CUDA runtime, driver, cuBLAS and NCCL for reports.
#include "dtplan/runtime/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

#include "cuda_device.hpp"
#include "dtplan/model/error.hpp"
#include "nccl_communicator.hpp"

namespace dtplan::runtime {

namespace {

// CUDA encodes versions as major*1000 + minor*10.
std::string cuda_version(int code) {
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    return "unknown";
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

bool cuda_backend_built() {
  return true;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for the caller
    return 0;
  }
  return count;
}

std::unique_ptr<Device> make_cuda_device(int local_rank, std::int64_t capacity_bytes) {
  return std::make_unique<CudaDevice>(local_rank, capacity_bytes);
}

std::unique_ptr<Communicator> make_nccl_communicator(const MpiGroup& group, Device& device,
                                                     double timeout_s) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) {
    throw Error("the NCCL communicator needs a device made by make_cuda_device (got a " +
                device.kind() + " device)");
  }
  return std::make_unique<NcclCommunicator>(group, *cuda, timeout_s);
}

std::string cuda_versions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  const bool has_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  return "CUDA runtime " + cuda_version(runtime) + ", driver " +
         (has_driver ? cuda_version(driver) : std::string("none")) + ", cuBLAS " +
         cublas_version() + ", NCCL " + nccl_version();
}

}  // namespace dtplan::runtime
