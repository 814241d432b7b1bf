// Tests for model/src/node_subset.cpp: part of a multi-host node, as a job given 16 trays of
// each NVL72 rack sees it.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/model/error.hpp"
#include "dtplan/model/node_subset.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;

std::int64_t count(const NodeTemplate& n, DeviceKind k) {
  std::int64_t c = 0;
  for (const auto& d : n.devices)
    c += d.kind == k ? 1 : 0;
  return c;
}
}  // namespace

TEST_CASE("the first 16 trays of an NVL72 rack: their GPUs, Graces and NICs, the rack's switch") {
  // A tray: 4 GPUs, 2 Grace CPUs, 4 NICs (gb200-nvl72.json). 16 trays: 64 GPUs, 32 CPUs, 64
  // NICs and the one NVSwitch vertex; per GPU an NVSwitch and a C2C link, per NIC a PCIe link:
  // 3 x 64 = 192 links. Host memory, 16,093 GiB a rack, 16/18 of it.
  const auto rack = load_node_template("gb200-nvl72", kData / "topologies");
  const auto part = first_hosts(rack, 64);
  CHECK(part.gpu_count() == 64);
  CHECK(count(part, DeviceKind::cpu) == 32);
  CHECK(count(part, DeviceKind::nic) == 64);
  CHECK(count(part, DeviceKind::nvswitch) == 1);
  CHECK(part.links.size() == 192);
  CHECK(part.devices.back().id == "t15nic3");
  REQUIRE(part.host_memory);
  CHECK(part.host_memory->value == 16093LL * 1073741824 * 16 / 18);
  CHECK_THAT(part.assumptions.back(),
             Contains("64 of the node's 72 GPUs") && Contains("16 of 18 hosts"));
  // Four such racks: 256 GPUs, 64 per node, each on its own NVSwitch.
  const auto table = InterconnectTable::load(kData / "interconnect.json");
  const auto four = Topology::build(part, 4, table);
  CHECK(four.gpu_count() == 256);
  CHECK(four.gpus_per_node() == 64);
  // The whole rack is itself; whole trays only, up to the rack; a one-host node has no part.
  CHECK(first_hosts(rack, 72).devices.size() == rack.devices.size());
  CHECK_THROWS_WITH(first_hosts(rack, 66), Contains("{gpus_per_node} 66") &&
                                               Contains("whole hosts of 4 GPUs, up to its 72"));
  CHECK_THROWS_WITH(first_hosts(rack, 76), Contains("up to its 72"));
  CHECK_THROWS_WITH(first_hosts(rack, 0), Contains("a positive number"));
  const auto dgx = load_node_template("dgx-h100", kData / "topologies");
  CHECK_THROWS_WITH(first_hosts(dgx, 4), Contains("is one host of 8 GPUs"));
  CHECK(first_hosts(dgx, 8).devices.size() == dgx.devices.size());  // all of it: itself
}
