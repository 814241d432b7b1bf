// Text and JSON of `dtplan accuracy --published` (published_report.hpp).
#include "published_report.hpp"

#include <algorithm>
#include <cmath>

#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

std::string_view status_name(planner::RowStatus s) {
  switch (s) {
    case planner::RowStatus::predicted:
      return "predicted";
    case planner::RowStatus::not_expressible:
      return "not_expressible";
    case planner::RowStatus::failed:
      return "failed";
  }
  return "?";
}

nlohmann::json summary_json(const planner::ErrorSummary& s) {
  return {{"name", s.name},
          {"predicted", s.predicted},
          {"not_expressible", s.not_expressible},
          {"failed", s.failed},
          {"mean_abs_error", s.mean_abs_error},
          {"median_abs_error", s.median_abs_error},
          {"max_abs_error", s.max_abs_error},
          {"bias", s.bias},
          {"fitted_on", s.fitted_on}};
}

void print_summaries(std::ostream& out, const std::vector<planner::ErrorSummary>& rows,
                     const std::string& first) {
  TextTable t(
      {first, "rows", "mean |error|", "median", "max", "bias", "not expressible", "failed"});
  for (const auto& s : rows) {
    const bool any = s.predicted > 0;
    t.add_row({s.name + (s.fitted_on ? " (fitted on)" : ""), std::to_string(s.predicted),
               any ? percent(s.mean_abs_error) : "-", any ? percent(s.median_abs_error) : "-",
               any ? percent(s.max_abs_error) : "-", any ? signed_percent(s.bias) : "-",
               std::to_string(s.not_expressible), std::to_string(s.failed)});
  }
  t.print(out);
}

std::string figure(double v) {
  return std::abs(v) >= 100 ? fixed(v, 0) : std::abs(v) >= 1 ? fixed(v, 2) : fixed(v, 4);
}

// The three largest parts of a predicted step, as shares of it: "GEMMs 61%, attention 22%, ...".
std::string shares(const planner::RowPrediction& p) {
  double total = 0;
  for (const auto& part : p.breakdown)
    total += part.second;
  std::string text;
  for (std::size_t i = 0; i < p.breakdown.size() && i < 3 && total > 0; ++i) {
    text += (i == 0 ? "" : ", ") + p.breakdown[i].first + " " +
            fixed(100.0 * p.breakdown[i].second / total, 0) + "%";
  }
  return text;
}

nlohmann::json ranking_json(const planner::PublishedSet& set, const planner::PublishedAccuracy& a) {
  const auto& r = a.ranking;
  nlohmann::json j{{"what",
                    "pairs of held-out step rows of one job (source, model, GPU, GPU count, "
                    "global batch, sequence, metric) in different configurations: does dtplan "
                    "order them as measured"},
                   {"pairs", r.pairs},
                   {"agree", r.agree},
                   {"tied", r.tied},
                   {"clear_gap", planner::kClearRankingGap},
                   {"clear_pairs", r.clear_pairs},
                   {"clear_agree", r.clear_agree}};
  const auto id = [&](std::size_t i) { return set.rows[a.rows[i].row].id; };
  const auto pairs = [&](const std::vector<planner::RankedPair>& list) {
    auto out = nlohmann::json::array();
    for (const auto& d : list) {
      out.push_back({{"source", set.sources[set.rows[a.rows[d.faster].row].source].id},
                     {"faster_measured", id(d.faster)},
                     {"slower_measured", id(d.slower)},
                     {"measured_gap", d.measured_gap},
                     {"predicted_gap", d.predicted_gap}});
    }
    return out;
  };
  j["disagreements"] = pairs(r.disagreements);
  j["ties"] = pairs(r.ties);
  return j;
}

// " (91.9%)": `part`'s share of `whole`, or nothing of none.
std::string share_text(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? " (" + percent(static_cast<double>(part) / static_cast<double>(whole)) + ")"
                   : std::string();
}

void print_ranking(std::ostream& out, const planner::PublishedSet& set,
                   const planner::PublishedAccuracy& a) {
  const auto& r = a.ranking;
  if (r.pairs == 0) return;
  out << "\nranking: pairs of step rows of one job (source, model, GPUs, global batch, sequence) "
         "in different configurations\n  dtplan orders "
      << r.agree << " of " << r.pairs << share_text(r.agree, r.pairs) << " as measured, "
      << r.disagreements.size() << " the other way, " << r.tied << " the same\n  of the "
      << r.clear_pairs << " pairs measured at least " << percent(planner::kClearRankingGap)
      << " apart: " << r.clear_agree << share_text(r.clear_agree, r.clear_pairs)
      << " as measured\n";
  if (r.disagreements.empty()) return;
  out << "  ordered the other way (measured gap, dtplan's gap; --json lists the ties too):\n";
  TextTable t({"source", "faster as measured", "slower as measured", "measured", "dtplan"});
  for (const auto& d : r.disagreements) {
    const auto& faster = set.rows[a.rows[d.faster].row];
    t.add_row({set.sources[faster.source].id, faster.id, set.rows[a.rows[d.slower].row].id,
               signed_percent(d.measured_gap), signed_percent(d.predicted_gap)});
  }
  t.print(out, {1, 2}, "    ");
}

}  // namespace

nlohmann::json published_json(const planner::PublishedSet& set,
                              const planner::PublishedAccuracy& a) {
  nlohmann::json j;
  j["error_definition"] =
      "throughput, bandwidth, MFU and memory: predicted / measured - 1; times: measured / "
      "predicted - 1 (positive: dtplan is optimistic, or predicts more memory)";
  j["by_family"] = nlohmann::json::array();
  for (const auto& s : a.by_family)
    j["by_family"].push_back(summary_json(s));
  j["by_workload"] = nlohmann::json::array();
  for (const auto& s : a.by_workload)
    j["by_workload"].push_back(summary_json(s));
  j["by_source"] = nlohmann::json::array();
  for (const auto& s : a.by_source)
    j["by_source"].push_back(summary_json(s));
  j["bands"] = planner::bands_json(a.bands)["bands"];
  j["ranking"] = ranking_json(set, a);
  j["rows"] = nlohmann::json::array();
  for (const auto& p : a.rows) {
    const auto& row = set.rows[p.row];
    nlohmann::json r{{"source", set.sources[row.source].id},
                     {"id", row.id},
                     {"family", std::string(planner::name_of(row.family))},
                     {"where", row.where},
                     {"config", row.config},
                     {"metric", row.metric},
                     {"measured", row.measured},
                     {"status", std::string(status_name(p.status))}};
    if (p.status == planner::RowStatus::predicted) {
      r["predicted"] = p.predicted;
      r["error"] = p.error;
      if (!p.breakdown.empty()) {
        r["breakdown_s"] = nlohmann::json::array();
        for (const auto& [part, seconds] : p.breakdown)
          r["breakdown_s"].push_back({{"part", part}, {"seconds", seconds}});
      }
    } else {
      r["reason"] = p.reason;
    }
    r["workloads"] = p.workloads;
    j["rows"].push_back(std::move(r));
  }
  return j;
}

void print_published(std::ostream& out, const planner::PublishedSet& set,
                     const planner::PublishedAccuracy& a, bool rows) {
  out << "dtplan accuracy --published: " << a.rows.size() << " measured runs from "
      << a.by_source.size() << " public sources (data/published)\n"
      << "  error = predicted / measured - 1 for throughput, bandwidth and memory, measured / "
         "predicted - 1 for times: positive is optimistic (or more memory)\n\n";
  print_summaries(out, a.by_family, "family (held out)");
  if (!a.by_workload.empty()) {
    out << "\n";
    print_summaries(out, a.by_workload, "workload (held out)");
  }
  out << "\n";
  print_summaries(out, a.by_source, "source");
  if (!a.bands.empty()) {  // none when the rows asked for hold no step prediction
    out << "\nerror bands of step predictions (what dtplan estimate shows beside a "
           "prediction):\n";
    TextTable bands({"framework on GPU generation", "rows", "median |error|", "mean", "bias"});
    for (const auto& b : a.bands) {
      bands.add_row({b.group, std::to_string(b.rows), percent(b.median_abs_error),
                     percent(b.mean_abs_error), signed_percent(b.bias)});
    }
    bands.print(out);
  }
  print_ranking(out, set, a);
  std::vector<const planner::RowPrediction*> listed;
  for (const auto& p : a.rows) {
    if (rows || p.status == planner::RowStatus::predicted) listed.push_back(&p);
  }
  if (!rows) {
    std::sort(listed.begin(), listed.end(),
              [](const auto* x, const auto* y) { return std::abs(x->error) > std::abs(y->error); });
    if (listed.size() > 10) listed.resize(10);
    out << "\nthe largest errors (--rows lists every row):\n";
  } else {
    out << "\nrows:\n";
  }
  TextTable t({"source / row", "metric", "measured", "predicted", "error",
               "where the predicted step goes"});
  for (const auto* p : listed) {
    const auto& row = set.rows[p->row];
    const bool ok = p->status == planner::RowStatus::predicted;
    t.add_row({set.sources[row.source].id + " / " + row.id, row.metric, figure(row.measured),
               ok ? figure(p->predicted) : std::string(status_name(p->status)),
               ok ? signed_percent(p->error) : p->reason, ok ? shares(*p) : ""});
  }
  t.print(out, {5});
}

}  // namespace dtplan::cli
