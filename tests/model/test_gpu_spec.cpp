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
  std::filesystem::remove(path);
}
