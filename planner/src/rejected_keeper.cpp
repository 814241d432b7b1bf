// Which rejected layouts a search keeps (see rejected_keeper.hpp).
#include "rejected_keeper.hpp"

namespace dtplan::planner::detail {

namespace {

// The groups the plan's notes compare at their best (plan_decisions.cpp): the expert layout
// (ep x expert tp, etp kept apart so that "is etp named" survives) and the recompute mode with
// its modules, each per reason.
std::array<std::array<std::int64_t, 5>, 2> groups_of(Reason why, const cost::Layout3D& l) {
  const auto reason = static_cast<std::int64_t>(why);
  return {{{reason, 0, l.ep, l.etp, l.expert_tp()},
           {reason, 1, static_cast<std::int64_t>(l.recompute),
            static_cast<std::int64_t>(l.recompute_modules.bits), 0}}};
}

}  // namespace

int RejectedKeeper::take_roles(Reason why, const Rank& rank, const cost::Layout3D& l,
                               std::vector<std::int64_t>& released) {
  int roles = nearest_.take(why, rank, released) ? 1 : 0;
  for (const auto& key : groups_of(why, l)) {
    const auto [it, inserted] = group_best_.try_emplace(key, rank);
    if (inserted) {
      ++roles;
    } else if (rank < it->second) {
      released.push_back(it->second.seq);
      it->second = rank;
      ++roles;
    }
  }
  return roles;
}

void RejectedKeeper::release(std::int64_t seq) {
  const auto it = held_.find(seq);
  if (--it->second.roles == 0) held_.erase(it);
}

void RejectedKeeper::finish(Result3D& out) {
  if (per_reason_ < 0) {
    out.rejected = std::move(all_);
    return;
  }
  std::map<Reason, std::int64_t> kept;
  for (auto& [seq, held] : held_) {
    ++kept[held.entry.reason];
    out.rejected.push_back(std::move(held.entry));
  }
  held_.clear();
  for (std::size_t i = 0; i < kReasonCount; ++i) {
    const auto why = static_cast<Reason>(i);
    const auto n = nearest_.offered(why);
    if (n > kept[why]) out.rejected_omitted[why] = n - kept[why];
  }
}

}  // namespace dtplan::planner::detail
