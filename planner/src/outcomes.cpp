// Per-strategy outcome of a search: why each strategy lost.
#include <algorithm>

#include "dtplan/planner/planner.hpp"

namespace dtplan::planner {

namespace {

// Lower is the nearer miss: least over memory first, then the other reasons.
bool nearer(const Rejected& a, const Rejected& b) {
  // A configuration that fits but misses the deadline is nearer than one that does not fit.
  auto rank = [](Reason r) {
    if (r == Reason::past_deadline) return 0;
    return r == Reason::out_of_memory || r == Reason::host_out_of_memory ? 1 : 2;
  };
  if (rank(a.reason) != rank(b.reason)) return rank(a.reason) < rank(b.reason);
  return a.amount < b.amount;
}

StrategyOutcome outcome(Strategy s, const PlanResult& r) {
  StrategyOutcome out;
  out.strategy = s;
  if (r.best && r.best->strategy == s) out.best = r.best;
  for (const auto& rejected : r.rejected) {
    // An unreachable batch is about GPU counts, not strategies.
    if (rejected.config.strategy != s || rejected.reason == Reason::batch_unreachable) continue;
    if (rejected.reason == Reason::slower) {
      if (!out.best || rejected.config.objective < out.best->objective) {
        out.best = rejected.config;
        out.behind_pct = rejected.amount;
      }
    } else if (!out.nearest_miss || nearer(rejected, *out.nearest_miss)) {
      out.nearest_miss = rejected;
    }
  }
  if (out.best) out.nearest_miss.reset();
  return out;
}

}  // namespace

std::vector<StrategyOutcome> by_strategy(const PlanResult& r) {
  std::vector<StrategyOutcome> out;
  for (const auto& row : kStrategies) {
    auto o = outcome(row.value, r);
    if (o.best || o.nearest_miss) out.push_back(std::move(o));
  }
  return out;
}

std::optional<StrategyOutcome> best_among(const PlanResult& r,
                                          const std::vector<Strategy>& strategies) {
  std::optional<StrategyOutcome> best;
  for (const auto s : strategies) {
    auto o = outcome(s, r);
    if (o.best && (!best || o.best->objective < best->best->objective)) best = std::move(o);
  }
  return best;
}

}  // namespace dtplan::planner
