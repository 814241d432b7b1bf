// Tests for planner/src/search3d.cpp: the rules every layout it returns obeys, and the ranking.
#include <catch2/catch.hpp>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/planner/search3d.hpp"

using namespace dtplan;

TEST_CASE("3D search: Llama 2 70B on 16 DGX H100 nodes, every layout valid, fastest first") {
  // The case: global batch 1024, sequence 4096.
  const auto data = resolve_data_dir("");
  const auto m = load_model("llama-2-70b", data / "models");
  const auto table = InterconnectTable::load(data / "interconnect.json");
  const auto topo = Topology::build(load_node_template("dgx-h100", data / "topologies"), 16, table);
  const auto gpu = GpuCatalog::load(data / "gpus.json").find("H100-SXM");
  planner::Request3D r;
  r.global_batch = 1024;
  r.seq_len = 4096;
  r.top_k = 10;
  const auto res = planner::search_3d(m, topo, table, gpu, r,
                                      cost::load_compute_constants(data / "compute.json"),
                                      cost::load_overheads(data / "overheads.json"));
  REQUIRE(!res.ranked.empty());
  CHECK(res.out_of_memory > 0);  // 70B without enough splitting does not fit 80 GB
  for (std::size_t i = 0; i < res.ranked.size(); ++i) {
    const auto& l = res.ranked[i].layout;
    INFO("tp " << l.tp << " pp " << l.pp << " v " << l.interleave);
    CHECK(l.tp * l.pp * l.dp == 128);
    CHECK(l.tp <= 8);                        // inside a node
    CHECK(64 % l.tp == 0);                   // 64 heads
    CHECK(8 % l.tp == 0);                    // 8 key/value heads
    CHECK(80 % (l.pp * l.interleave) == 0);  // 80 layers
    CHECK(l.micro_batch * l.micro_batches * l.dp == 1024);
    CHECK(double(res.ranked[i].memory.total().value) <= res.usable_bytes);
    if (i > 0) CHECK(res.ranked[i - 1].time.step_s <= res.ranked[i].time.step_s);
  }
  // Restricting the search keeps only what was asked for.
  r.tps = {8};
  r.pps = {4};
  const auto only = planner::search_3d(m, topo, table, gpu, r,
                                       cost::load_compute_constants(data / "compute.json"),
                                       cost::load_overheads(data / "overheads.json"));
  REQUIRE(!only.ranked.empty());
  for (const auto& c : only.ranked) {
    CHECK(c.layout.tp == 8);
    CHECK(c.layout.pp == 4);
  }
}
