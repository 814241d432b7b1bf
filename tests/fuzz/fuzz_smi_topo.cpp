// Fuzz target: the text `nvidia-smi topo -m` prints, then the graph built from it.
#include "dtplan/model/interconnect.hpp"
#include "dtplan/model/topology_io.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  static const auto table =
      dtplan::InterconnectTable::load(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json");
  const auto node = dtplan::parse_nvidia_smi_topo(text, "<fuzz>", dtplan::SmiAssumptions{});
  dtplan::Topology::build(node, 1, table);
}
