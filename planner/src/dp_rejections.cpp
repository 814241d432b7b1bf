// Which rejected configurations the data-parallel search keeps (see dp_rejections.hpp).
#include "dp_rejections.hpp"

#include <iterator>

namespace dtplan::planner::detail {

void DataParallelRejections::keep_always(const Candidate& c, Reason why, double amount,
                                         std::string detail) {
  held_.emplace_hint(held_.end(), seq_++, Held{entry_of(c, why, amount, std::move(detail)), 1});
}

void DataParallelRejections::keep_nearer(const Candidate& c, Reason why, double amount,
                                         std::string detail) {
  const Rank rank{amount, seq_++};
  released_.clear();
  int roles = nearest_.take(why, rank, released_) ? 1 : 0;
  auto& best = best_of(why, c.strategy);
  if (rank < best) {
    if (best.seq >= 0) released_.push_back(best.seq);
    best = rank;
    ++roles;
  }
  if (roles > 0) {
    held_.emplace_hint(held_.end(), rank.seq,
                       Held{entry_of(c, why, amount, std::move(detail)), roles});
  }
  for (const auto seq : released_)
    release(seq);
}

void DataParallelRejections::release(std::int64_t seq) {
  const auto it = held_.find(seq);
  if (--it->second.roles == 0) held_.erase(it);
}

void DataParallelRejections::finish(PlanResult& out) {
  if (per_reason_ < 0) {
    out.rejected.insert(out.rejected.end(), std::make_move_iterator(all_.begin()),
                        std::make_move_iterator(all_.end()));
    all_.clear();
    return;
  }
  std::array<std::int64_t, kReasonCount> kept{};
  out.rejected.reserve(out.rejected.size() + held_.size());
  for (auto& [seq, held] : held_) {
    ++kept[index_of(held.entry.reason)];
    out.rejected.push_back(std::move(held.entry));
  }
  held_.clear();
  for (std::size_t i = 0; i < kReasonCount; ++i) {
    const auto why = static_cast<Reason>(i);
    if (!was_evaluated(why)) continue;
    const auto offered = nearest_.offered(why);
    if (offered > kept[i]) out.rejected_omitted[why] = offered - kept[i];
  }
}

}  // namespace dtplan::planner::detail
