// Fuzz target: topology JSON (one node), then the graph that --topology builds from it.
#include "dtplan/model/interconnect.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/topology_io.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  static const auto table =
      dtplan::InterconnectTable::load(std::filesystem::path(DTPLAN_DATA_DIR) / "interconnect.json");
  const auto node = dtplan::node_from_json(
      dtplan::ObjectReader::root(dtplan::parse_json(std::string(text), "<fuzz>")));
  dtplan::Topology::build(node, 1, table);
}
