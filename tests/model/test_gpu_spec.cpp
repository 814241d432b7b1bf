// Tests for model/src/gpu_spec.cpp: the bundled catalogue loads, names match
// case-insensitively, figures agree with NVIDIA's datasheets (docs/gpus.md cites each row).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_spec.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
GpuCatalog catalog() {
  return GpuCatalog::load(std::filesystem::path(DTPLAN_DATA_DIR) / "gpus.json");
}
}  // namespace

TEST_CASE("the catalogue holds the GPUs users ask for") {
  const auto c = catalog();
  for (const char* name : {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-SXM",
                           "H100-PCIe", "H200", "L40S", "A10", "RTX-3090", "RTX-4090", "T4"}) {
    INFO(name);
    CHECK(c.find(name).name == name);
  }
}

TEST_CASE("names and aliases match case-insensitively") {
  const auto c = catalog();
  CHECK(c.find("a100-80gb").name == "A100-80GB");
  CHECK(c.find("NVIDIA A100-SXM4-80GB").name == "A100-80GB");
  CHECK(c.find("h100").name == "H100-SXM");
}

TEST_CASE("datasheet figures") {
  const auto c = catalog();
  // A100 80GB: 81920 MiB as nvidia-smi reports, 2039 GB/s HBM2e, 312 TFLOP/s dense BF16,
  // 19.5 TFLOP/s FP32, NVLink 600 GB/s bidirectional = 300 GB/s per direction.
  const auto& a100 = c.find("A100-80GB");
  CHECK(a100.memory.value == 81920LL * 1048576);
  CHECK(a100.memory_bandwidth_bytes_per_s == Approx(2039e9));
  CHECK(a100.peak_flops_for(Precision::bf16) == Approx(312e12));
  CHECK(a100.peak_flops_for(Precision::fp32) == Approx(19.5e12));
  CHECK(a100.nvlink_bytes_per_s_per_direction == Approx(300e9));
  // H100 SXM: 989.5 TFLOP/s dense BF16 (1979 with sparsity), 3.35 TB/s, 18 NVLink links.
  const auto& h100 = c.find("H100-SXM");
  CHECK(h100.peak_flops.bf16 == Approx(989.5e12));
  CHECK(h100.memory_bandwidth_bytes_per_s == Approx(3.35e12));
  CHECK(h100.nvlink_links == 18);
  // V100 and T4 have no bf16 tensor cores.
  CHECK(c.find("V100-32GB").peak_flops.bf16 == 0.0);
  CHECK(c.find("T4").peak_flops.bf16 == 0.0);
}

TEST_CASE("unknown GPUs suggest close names") {
  try {
    catalog().find("A100-80");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("unknown GPU 'A100-80'") && Contains("A100-80GB"));
  }
}

TEST_CASE("a catalogue with a typo in a key is rejected") {
  const auto path = std::filesystem::temp_directory_path() / "dtplan_test_gpus.json";
  std::ofstream(path) << R"({"schema_version": 1, "gpus": [{"name": "X", "aliases": [],
    "memory_bytes": 1, "hbm_bandwidth_bytes_per_s": 1, "peak_flops": {"fp32": 1, "tf32": 0,
    "fp16": 0, "bf16": 0, "fp8": 0, "fp6": 0, "fp4": 0, "int8": 0}, "nvlink_links": 0,
    "nvlink_bytes_per_s_per_direction": 0, "pcie_generation": 4, "pcie_lanes": 16,
    "tdp_watt": 300}]})";
  CHECK_THROWS_WITH(GpuCatalog::load(path),
                    Contains("/gpus/0/tdp_watts: missing required key (found 'tdp_watt'"));
  std::ofstream(path) << R"({"schema_version": 1, "gpus": [{"name": "X", "aliases": [],
    "memory_bytes": 1, "hbm_bandwidth_bytes_per_s": 1, "peak_flops": {"fp32": 1, "tf32": 0,
    "fp16": 0, "bf16": 0, "fp8": 0, "fp6": 0, "fp4": 0, "int8": 0}, "nvlink_links": 0,
    "nvlink_bytes_per_s_per_direction": 0, "pcie_generation": 4, "pcie_lanes": 16,
    "tdp_watts": 300, "architecture": "blackwel"}]})";
  CHECK_THROWS_WITH(GpuCatalog::load(path), Contains("/gpus/0/architecture") &&
                                                Contains("unknown architecture 'blackwel'") &&
                                                Contains("hopper"));
  std::ofstream(path) << R"({"schema_version": 1, "gpus": [{"name": "X", "aliases": [],
    "memory_bytes": 1, "hbm_bandwidth_bytes_per_s": 1, "peak_flops": {"fp32": 1, "tf32": 0,
    "fp16": 0, "bf16": 0, "fp8": 0, "fp6": 0, "fp4": 0, "int8": 0}, "nvlink_links": 0,
    "nvlink_bytes_per_s_per_direction": 0, "xgmi_links": 7, "pcie_generation": 4,
    "pcie_lanes": 16, "tdp_watts": 300, "architecture": "cdna3"}]})";
  CHECK_THROWS_WITH(GpuCatalog::load(path),
                    Contains("/gpus/0/xgmi_links") && Contains("go together"));
  std::ofstream(path) << R"({"schema_version": 1, "gpus": [{"name": "X", "aliases": [],
    "memory_bytes": 1, "hbm_bandwidth_bytes_per_s": 1, "peak_flops": {"fp32": 1, "tf32": 0,
    "fp16": 0, "bf16": 312e12, "fp8": 0, "fp6": 0, "fp4": 0, "int8": 0}, "nvlink_links": 0,
    "nvlink_bytes_per_s_per_direction": 0, "max_achievable_matmul_flops": {"bf16": 271.2},
    "pcie_generation": 4, "pcie_lanes": 16, "tdp_watts": 300, "architecture": "ampere"}]})";
  CHECK_THROWS_WITH(GpuCatalog::load(path), Contains("/gpus/0/max_achievable_matmul_flops") &&
                                                Contains("bf16 271.2") &&
                                                Contains("between 5% and 100%"));
  std::filesystem::remove(path);
}

TEST_CASE("the 2026 parts: Blackwell Ultra, export Hopper, AMD Instinct, GeForce Blackwell") {
  const auto c = catalog();
  // HGX B300 (NVIDIA HGX specification per 8 GPUs, sparse, halved): BF16 2.25 PF, FP8 4.5 PF;
  // nvidia-smi "NVIDIA B300 SXM6 AC, 275040 MiB"; NVLink 5 at 1.8 TB/s bidirectional.
  const auto& b300 = c.find("NVIDIA B300 SXM6 AC");
  CHECK(b300.name == "B300");
  CHECK(b300.memory.value == 275040LL * 1048576);
  CHECK(b300.peak_flops.bf16 == Approx(2250e12));
  CHECK(b300.nvlink_bytes_per_s_per_direction == Approx(900e9));
  // GB300 NVL72 (per 72 GPUs: FP4 1,080 PF dense; FP16/BF16 360 PF sparse): 15 PF FP4 and
  // 2.5 PF BF16 per GPU; NVLink-C2C to Grace, not PCIe, is its host link.
  const auto& gb300 = c.find("GB300");
  CHECK(gb300.peak_flops.fp4 == Approx(1080e15 / 72));
  CHECK(gb300.peak_flops.bf16 == Approx(360e15 / 72 / 2));
  CHECK(gb300.host_link_bytes_per_s_per_direction == Approx(225e9));
  // H20: 148 TFLOP/s BF16, 4.0 TB/s, NVLink 4 at 900 GB/s bidirectional.
  CHECK(c.find("H20").peak_flops.bf16 == Approx(148e12));
  CHECK(c.find("H20").nvlink_bytes_per_s_per_direction == Approx(450e9));
  // MI325X: MI300X's compute, 6 TB/s HBM3E, 7 xGMI links of 64 GB/s per direction.
  const auto& mi325x = c.find("MI325X");
  CHECK(mi325x.peak_flops.bf16 == c.find("MI300X").peak_flops.bf16);
  CHECK(mi325x.memory_bandwidth_bytes_per_s == Approx(6e12));
  CHECK(mi325x.xgmi_links == 7);
  CHECK(mi325x.xgmi_bytes_per_s_per_direction == Approx(7 * 64e9));
  CHECK(mi325x.nvlink_links == 0);
  // MI355X: 2,516.6 TFLOP/s BF16, MXFP4 10,066.4 (AMD), 7 links of 153.6 GB/s bidirectional.
  const auto& mi355x = c.find("MI355X");
  CHECK(mi355x.peak_flops.bf16 == Approx(2516.6e12));
  CHECK(mi355x.peak_flops.fp4 == Approx(4 * 2516.6e12));
  CHECK(mi355x.xgmi_bytes_per_s_per_direction == Approx(7 * 153.6e9 / 2));
  CHECK(mi355x.architecture == "cdna4");
  // RTX 5090: no NVLink, PCIe 5.0 x16, nvidia-smi 32607 MiB.
  const auto& rtx = c.find("NVIDIA GeForce RTX 5090");
  CHECK(rtx.memory.value == 32607LL * 1048576);
  CHECK(rtx.nvlink_links == 0);
  CHECK(rtx.pcie_generation == 5);
}
