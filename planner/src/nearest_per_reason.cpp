// Per reason, the nearest rejections a search keeps (see nearest_per_reason.hpp).
#include "nearest_per_reason.hpp"

namespace dtplan::planner::detail {

bool NearestPerReason::take(Reason why, const Rank& rank, std::vector<std::int64_t>& released) {
  if (!would_take(why, rank.amount)) return false;
  auto& heap = nearest_[index_of(why)];
  if (static_cast<std::int64_t>(heap.size()) == per_reason_) {
    released.push_back(heap.top().seq);
    heap.pop();
  }
  heap.push(rank);
  if (static_cast<std::int64_t>(heap.size()) == per_reason_)
    thresholds_[index_of(why)] = heap.top().amount;
  return true;
}

}  // namespace dtplan::planner::detail
