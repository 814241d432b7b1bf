// Per reason, the nearest rejections a search keeps: what the layout search
// (rejected_keeper.hpp) and the data-parallel search (dp_rejections.hpp) share.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

#include "dtplan/planner/planner.hpp"

namespace dtplan::planner::detail {

// Reason's enumerators, for tables indexed by reason.
inline constexpr std::size_t kReasonCount = static_cast<std::size_t>(Reason::slower) + 1;
inline std::size_t index_of(Reason r) {
  return static_cast<std::size_t>(r);
}

// A rejection's place among those of its reason: nearer is less amount (GiB over, % behind),
// and of equal amounts the one met first.
struct Rank {
  double amount = std::numeric_limits<double>::infinity();
  std::int64_t seq = -1;
  bool operator<(const Rank& o) const {
    return amount != o.amount ? amount < o.amount : seq < o.seq;
  }
};

// The `per_reason` nearest ranks of each reason, and how many each reason was offered.
class NearestPerReason {
 public:
  explicit NearestPerReason(std::int64_t per_reason) : per_reason_(per_reason) {
    thresholds_.fill(per_reason > 0 ? std::numeric_limits<double>::infinity()
                                    : -std::numeric_limits<double>::infinity());
  }

  void count(Reason why, std::int64_t n = 1) { offered_[index_of(why)] += n; }
  std::int64_t offered(Reason why) const { return offered_[index_of(why)]; }

  // Whether a rank of `amount`, met after every rank taken so far, enters its reason's list;
  // the same answer `take` gives, without touching the list.
  bool would_take(Reason why, double amount) const { return amount < thresholds_[index_of(why)]; }

  // Enters `rank` when it is among its reason's nearest; the rank it pushes out, if any, is
  // appended to `released`. Returns whether it entered.
  bool take(Reason why, const Rank& rank, std::vector<std::int64_t>& released);

 private:
  std::int64_t per_reason_;
  std::array<std::priority_queue<Rank>, kReasonCount> nearest_;  // the worst kept on top
  // Amounts below which a new rank enters: infinite until a list is full, then its worst.
  std::array<double, kReasonCount> thresholds_{};
  std::array<std::int64_t, kReasonCount> offered_{};
};

}  // namespace dtplan::planner::detail
