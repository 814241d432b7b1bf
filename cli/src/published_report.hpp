// `dtplan accuracy --published`: dtplan's predictions against the measured runs of
// data/published, by family, by source and row by row (text or JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "dtplan/planner/published_accuracy.hpp"

namespace dtplan::cli {

nlohmann::json published_json(const planner::PublishedSet& set,
                              const planner::PublishedAccuracy& a);
// `rows`: also list every row (else the sources and the ten largest errors).
void print_published(std::ostream& out, const planner::PublishedSet& set,
                     const planner::PublishedAccuracy& a, bool rows);

}  // namespace dtplan::cli
