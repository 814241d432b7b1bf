// GPU hardware figures (data/gpus.json): memory, dense peak FLOP/s per dtype, memory
// bandwidth, NVLink and PCIe. Sources per row are in docs/gpus.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dtplan/model/training.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan {

struct PeakFlops {  // dense (no 2:4 sparsity) FLOP/s; 0 = no tensor-core support
  double fp32 = 0;
  double tf32 = 0;
  double fp16 = 0;
  double bf16 = 0;
  double fp8 = 0;
  double fp6 = 0;  // Blackwell and CDNA4: FP6 (MXFP6) tensor cores
  double fp4 = 0;  // Blackwell (NVFP4, MXFP4) and CDNA4 (MXFP4)
  double int8 = 0;
};

struct GpuSpec {
  std::string name;
  std::vector<std::string> aliases;
  Bytes memory;                             // framebuffer as nvidia-smi reports it
  double memory_bandwidth_bytes_per_s = 0;  // HBM or GDDR
  PeakFlops peak_flops;
  std::int64_t nvlink_links = 0;
  double nvlink_bytes_per_s_per_direction = 0;  // all links together
  // AMD Instinct's Infinity Fabric (xGMI) links to the node's peers: the GPU-to-GPU fabric of
  // AMD boards, as NVLink is of NVIDIA's; 0 on boards without.
  std::int64_t xgmi_links = 0;
  double xgmi_bytes_per_s_per_direction = 0;  // all links together
  // The link to the host CPU when it is not the PCIe of pcie_generation x pcie_lanes
  // (NVLink-C2C to Grace on GB200/GB300), per direction; 0: PCIe.
  double host_link_bytes_per_s_per_direction = 0;
  // Maximum achievable matmul FLOP/s: the fastest large bf16 and FP8 matmul a brute-force
  // search over shapes measured on this GPU (stas00/ml-engineering's MAMF table); 0: unknown.
  // Over the dense peak, it says how far this GPU's GEMMs get (docs/gpus.md).
  double mamf_bf16_flops = 0;
  double mamf_fp8_flops = 0;
  std::int64_t pcie_generation = 0;
  std::int64_t pcie_lanes = 0;
  double tdp_watts = 0;
  // Streaming multiprocessors, where the catalogue states them (the vendor's whitepaper); 0:
  // unknown. What kernels that take some of them away from a GEMM cost it.
  std::int64_t streaming_multiprocessors = 0;
  // The tensor-core generation: volta, turing, ampere, ada, hopper, blackwell (NVIDIA), cdna3,
  // cdna4 (AMD Instinct). Kernels written for one
  // generation run below the peak of a later one (FlashAttention-2 on Hopper).
  std::string architecture;

  // Peak FLOP/s for the GEMMs of a training precision (fp32 uses the CUDA-core rate).
  double peak_flops_for(Precision p) const;
};

class GpuCatalog {
 public:
  static GpuCatalog load(const std::filesystem::path& path);

  // Case-insensitive match on name or alias; unknown names throw with close names.
  const GpuSpec& find(std::string_view name) const;
  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  std::vector<std::string> names() const;

 private:
  std::vector<GpuSpec> gpus_;
};

}  // namespace dtplan
