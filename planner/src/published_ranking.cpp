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

RankingSummary ranking_of(const PublishedSet& set, const std::vector<RowPrediction>& rows) {
  std::map<std::string, std::vector<std::size_t>> jobs;  // job -> indices into rows
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& p = rows[i];
    const auto& row = set.rows[p.row];
    if (p.status != RowStatus::predicted || row.family != Family::step) continue;
    if (set.sources[row.source].fitted_on) continue;
    if (!(row.measured > 0) || !(p.predicted > 0)) continue;
    jobs[job_of(set, row)].push_back(i);
  }
  RankingSummary out;
  for (const auto& [job, members] : jobs) {
    for (std::size_t x = 0; x < members.size(); ++x) {
      for (std::size_t y = x + 1; y < members.size(); ++y) {
        const auto& a = rows[members[x]];
        const auto& b = rows[members[y]];
        const auto& ra = set.rows[a.row];
        const auto& rb = set.rows[b.row];
        if (ra.config == rb.config) continue;  // a repeat of one configuration
        const double ma = speed(ra.measured, ra.metric), mb = speed(rb.measured, rb.metric);
        if (ma == mb) continue;  // measured equal: either order is right
        const bool a_faster = ma > mb;
        RankedPair pair;
        pair.faster = a_faster ? members[x] : members[y];
        pair.slower = a_faster ? members[y] : members[x];
        const auto& f = rows[pair.faster];
        const auto& s = rows[pair.slower];
        const auto& rf = set.rows[f.row];
        const auto& rs = set.rows[s.row];
        pair.measured_gap = speed(rf.measured, rf.metric) / speed(rs.measured, rs.metric) - 1.0;
        pair.predicted_gap = speed(f.predicted, rf.metric) / speed(s.predicted, rs.metric) - 1.0;
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
