// Which rejected layouts a search keeps (search3d.hpp, Request3D::rejected_kept).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "dtplan/planner/search3d.hpp"
#include "nearest_per_reason.hpp"

namespace dtplan::planner::detail {

// Either every rejected layout, or per reason the `per_reason` nearest (least amount; equal
// amounts in the order met) and the nearest of each expert layout and recompute mode -- what the
// reports list and what the plan's notes compare (plan_decisions.cpp). A large search rejects
// 10^5 layouts, and keeping each was most of a plan's peak memory.
class RejectedKeeper {
 public:
  explicit RejectedKeeper(std::int64_t per_reason)
      : per_reason_(per_reason), nearest_(per_reason) {}

  // The next rejected layout, met after every one offered before; `make` builds its entry and
  // runs only if the entry is kept.
  template <class Make>
  void offer(Reason why, double amount, const cost::Layout3D& l, Make&& make) {
    if (per_reason_ < 0) {
      all_.push_back(make());
      return;
    }
    const Rank rank{amount, seq_++};
    nearest_.count(why);
    std::vector<std::int64_t> released;
    const int roles = take_roles(why, rank, l, released);
    if (roles > 0) held_.emplace(rank.seq, Held{make(), roles});
    for (const auto seq : released)
      release(seq);
  }

  // Moves the kept entries into `out.rejected` in the order they were met, and counts the others
  // per reason in `out.rejected_omitted`.
  void finish(Result3D& out);

 private:
  struct Held {
    RejectedLayout entry;
    int roles = 0;  // places in the nearest lists and the groups' bests
  };
  using GroupKey = std::array<std::int64_t, 5>;

  int take_roles(Reason why, const Rank& rank, const cost::Layout3D& l,
                 std::vector<std::int64_t>& released);
  void release(std::int64_t seq);

  std::int64_t per_reason_;
  std::deque<RejectedLayout> all_;
  std::int64_t seq_ = 0;
  NearestPerReason nearest_;
  std::map<GroupKey, Rank> group_best_;
  std::map<std::int64_t, Held> held_;  // by the order met
};

}  // namespace dtplan::planner::detail
