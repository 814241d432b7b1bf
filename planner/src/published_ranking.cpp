// Whether dtplan orders the configurations of one published job as they were measured
// (published_accuracy.hpp, RankingSummary).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "dtplan/planner/published_accuracy.hpp"

namespace dtplan::planner {

namespace {

// A row's figure as a speed: larger is faster whatever the metric.
double speed(double value, const std::string& metric) {
  return larger_is_more(metric) ? value : 1.0 / value;
}

// The job a step row measured: what it trained on what, not how.
std::string job_of(const PublishedSet& set, const PublishedRow& row) {
  const auto field = [&](const char* key) {
    return row.config.contains(key) ? row.config.at(key).dump() : std::string("-");
  };
  return set.sources[row.source].id + "|" + field("model") + "|" + row.gpu + "|" +
         std::to_string(row.gpus) + "|" + field("global-batch") + "|" + field("seq-len") + "|" +
         row.metric;
}

}  // namespace

namespace {

// The pair (rows[x], rows[y]) ordered as measured: the faster first.
RankedPair pair_of(const PublishedSet& set, const std::vector<RowPrediction>& rows, std::size_t x,
                   std::size_t y) {
  const auto measured = [&](std::size_t i) {
    const auto& row = set.rows[rows[i].row];
    return speed(row.measured, row.metric);
  };
  const auto predicted = [&](std::size_t i) {
    return speed(rows[i].predicted, set.rows[rows[i].row].metric);
  };
  RankedPair pair;
  pair.faster = measured(x) > measured(y) ? x : y;
  pair.slower = pair.faster == x ? y : x;
  pair.measured_gap = measured(pair.faster) / measured(pair.slower) - 1.0;
  pair.predicted_gap = predicted(pair.faster) / predicted(pair.slower) - 1.0;
  return pair;
}

void tally(const RankedPair& pair, RankingSummary& out) {
  const bool tied = std::abs(pair.predicted_gap) < 1e-6;
  const bool agrees = !tied && pair.predicted_gap > 0;
  const bool clear = pair.measured_gap >= kClearRankingGap;
  ++out.pairs;
  out.agree += agrees ? 1 : 0;
  out.tied += tied ? 1 : 0;
  out.clear_pairs += clear ? 1 : 0;
  out.clear_agree += clear && agrees ? 1 : 0;
  if (tied) {
    out.ties.push_back(pair);
  } else if (!agrees) {
    out.disagreements.push_back(pair);
  }
}

// The held-out, predicted step rows of `rows` by job.
std::map<std::string, std::vector<std::size_t>> jobs_of(const PublishedSet& set,
                                                        const std::vector<RowPrediction>& rows) {
  std::map<std::string, std::vector<std::size_t>> jobs;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& p = rows[i];
    const auto& row = set.rows[p.row];
    if (p.status != RowStatus::predicted || row.family != Family::step) continue;
    if (set.sources[row.source].fitted_on) continue;
    if (!(row.measured > 0) || !(p.predicted > 0)) continue;
    jobs[job_of(set, row)].push_back(i);
  }
  return jobs;
}

}  // namespace

RankingSummary ranking_of(const PublishedSet& set, const std::vector<RowPrediction>& rows) {
  RankingSummary out;
  for (const auto& [job, members] : jobs_of(set, rows)) {
    for (std::size_t x = 0; x < members.size(); ++x) {
      for (std::size_t y = x + 1; y < members.size(); ++y) {
        const auto& a = set.rows[rows[members[x]].row];
        const auto& b = set.rows[rows[members[y]].row];
        if (a.config == b.config) continue;  // a repeat of one configuration
        if (speed(a.measured, a.metric) == speed(b.measured, b.metric)) continue;  // either order
        tally(pair_of(set, rows, members[x], members[y]), out);
      }
    }
  }
  for (auto* list : {&out.disagreements, &out.ties}) {
    std::sort(list->begin(), list->end(), [](const RankedPair& x, const RankedPair& y) {
      return std::tie(y.measured_gap, x.faster) < std::tie(x.measured_gap, y.faster);
    });
  }
  return out;
}

}  // namespace dtplan::planner
