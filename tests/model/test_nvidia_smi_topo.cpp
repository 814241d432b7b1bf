// Tests for model/src/nvidia_smi_topo.cpp: `nvidia-smi topo -m` matrices of a DGX-1 (V100,
// hybrid cube-mesh) and an A100 node (NVSwitch) read into graphs, and malformed ones refused.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
const std::filesystem::path kSmi = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "smi";
NodeTemplate read(const std::string& file) {
  return load_node_template((kSmi / file).string(), DTPLAN_DATA_DIR);
}
std::string error_of(const std::string& file) {
  try {
    read(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
std::int64_t nvlinks(const NodeTemplate& n, const std::string& a, const std::string& b) {
  for (const auto& l : n.links) {
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l.count;
  }
  return 0;
}
}  // namespace

TEST_CASE("DGX-1 hybrid cube-mesh: direct NVLinks with their counts") {
  const auto n = read("dgx1v.txt");
  CHECK(n.gpu_count() == 8);
  CHECK(n.nic_count() == 4);
  CHECK(nvlinks(n, "gpu0", "gpu3") == 2);  // NV2
  CHECK(nvlinks(n, "gpu0", "gpu1") == 1);  // NV1
  CHECK(nvlinks(n, "gpu0", "gpu5") == 0);  // SYS: no NVLink
  std::int64_t nv_links = 0;
  for (const auto& l : n.links)
    nv_links += l.link_class == "nvlink2" ? l.count : 0;
  CHECK(nv_links == 8 * 6 / 2);  // 6 links per V100, each shared by two GPUs
  std::int64_t cpus = 0;
  for (const auto& d : n.devices)
    cpus += d.kind == DeviceKind::cpu ? 1 : 0;
  CHECK(cpus == 2);  // NUMA affinity 0 and 1
}

TEST_CASE("a complete NV12 matrix is an NVSwitch") {
  const auto n = read("a100_numa.txt");
  bool nvswitch = false;
  for (const auto& d : n.devices)
    nvswitch |= d.kind == DeviceKind::nvswitch;
  CHECK(nvswitch);
  CHECK(nvlinks(n, "gpu0", "nvswitch") == 12);
  CHECK(nvlinks(n, "gpu0", "gpu1") == 0);
  CHECK_FALSE(n.assumptions.empty());
}

TEST_CASE("NV4 between each of 4 GPUs is a direct mesh, not a switch") {
  // 4 x A100 HGX: 12 links per GPU, 4 to each peer; CRLF line endings as saved on Windows.
  const auto n = read("hgx4_mesh.txt");
  for (const auto& d : n.devices)
    CHECK(d.kind != DeviceKind::nvswitch);
  CHECK(nvlinks(n, "gpu0", "gpu3") == 4);
  for (const auto& l : n.links) {
    if (l.from.rfind("gpu", 0) == 0 && l.to.rfind("gpu", 0) == 0) CHECK(l.link_class == "nvlink3");
  }
}

TEST_CASE("a header underlined with terminal escapes reads as plain text") {
  const auto n = read("coloured_header.txt");
  CHECK(n.gpu_count() == 8);
  CHECK(nvlinks(n, "gpu0", "nvswitch") == 12);
}

TEST_CASE("malformed matrices are refused with the line and cell") {
  CHECK_THAT(error_of("bad_token.txt"), Contains("bad_token.txt:5:") &&
                                            Contains("row GPU3, column GPU1") &&
                                            Contains("unknown connection 'NVX'"));
  CHECK_THAT(error_of("bad_asymmetric.txt"), Contains("not symmetric between GPU1 and GPU2"));
  CHECK_THAT(error_of("bad_twice.txt"), Contains("GPU1 listed twice"));
  CHECK_THAT(error_of("bad_short_row.txt"),
             Contains("row GPU5 has 9 cells, the header 10 columns"));
  CHECK_THAT(error_of("bad_no_header.txt"), Contains("no header line starting with GPU0"));
}

TEST_CASE("every header column and row is accounted for, or the matrix is refused") {
  const auto bad = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "bad";
  auto error_in = [&](const char* file) {
    try {
      load_node_template((bad / file).string(), DTPLAN_DATA_DIR);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  // GPU3 written with an Arabic-Indic digit: it was read as a NIC, leaving 7 GPUs.
  CHECK_THAT(error_in("smi_non_ascii_gpu.txt"),
             Contains("smi_non_ascii_gpu.txt:1: nvidia-smi topo -m: header column 'GPU\u0663'") &&
                 Contains("neither GPU<number>"));
  // A 13th row under a 12-column header was never read.
  CHECK_THAT(error_in("smi_extra_row.txt"),
             Contains("smi_extra_row.txt:14:") && Contains("'mlx5_4' after the 12 rows"));
}

// Found by fuzzing (tests/fuzz/regressions/smi_topo): counts past 2^63 made std::stoll throw
// std::out_of_range, which no command caught.
TEST_CASE("an NVLink or NUMA count too large is refused with its line") {
  CHECK_THAT(error_of("bad_huge_count.txt"),
             Contains("bad_huge_count.txt:2") &&
                 Contains("row GPU0, column GPU1: '99999999999999999999' is out of range"));
  CHECK_THAT(error_of("bad_huge_numa.txt"),
             Contains("bad_huge_numa.txt:2") && Contains("NUMA affinity: '99999999999999999999'"));
}
