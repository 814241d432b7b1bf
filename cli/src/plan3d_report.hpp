// The tensor x pipeline x data-parallel part of `dtplan plan`: the best layouts with where their
// time goes, next to the best ZeRO-3 / FSDP full-sharding plan (or why it does not fit).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/search3d.hpp"

namespace dtplan::cli {

struct Plan3DReport {
  const planner::Result3D& layouts;
  const planner::PlanResult& sharded;  // the data-parallel plan (ZeRO, FSDP)
};

void print_plan_3d(std::ostream& out, const Plan3DReport& r);
nlohmann::json plan_3d_json(const Plan3DReport& r);
// One layout: its shape, memory by component and step by part.
nlohmann::json layout_json(const planner::Candidate3D& c);
// "tp 8 x pp 4 x dp 4, interleave 2, sequence parallel, micro-batch 1 x 64, selective recompute"
std::string layout_text(const cost::Layout3D& l);

}  // namespace dtplan::cli
