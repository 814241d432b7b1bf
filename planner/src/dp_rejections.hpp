// Which rejected configurations the data-parallel search keeps (PlanRequest::rejected_kept).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dtplan/planner/planner.hpp"
#include "nearest_per_reason.hpp"

namespace dtplan::planner::detail {

// Either every rejection, or: every combination never evaluated (unsupported, an unreachable
// batch: a few per strategy and GPU count), per reason the `per_reason` nearest evaluated
// ones, and per reason and strategy the nearest -- what the reports list, what by_strategy and
// the suggestions read. The others are only counted. The search rejects most of what it
// evaluates (9,202 of 9,468 configurations for Llama 2 70B on 1,024 GPUs), and writing each
// rejection bounded the search loop.
class DataParallelRejections {
 public:
  explicit DataParallelRejections(std::int64_t per_reason)
      : per_reason_(per_reason), nearest_(per_reason) {}

  // The next rejection, met after every one offered before. Inline: the search offers one for
  // most configurations it evaluates, and most are neither kept nor copied.
  void offer(const Candidate& c, Reason why, double amount, std::string detail = {}) {
    if (per_reason_ < 0) {
      all_.push_back(entry_of(c, why, amount, std::move(detail)));
      return;
    }
    if (!was_evaluated(why)) {
      keep_always(c, why, amount, std::move(detail));
      return;
    }
    nearest_.count(why);
    if (!nearest_.would_take(why, amount) && !(amount < best_of(why, c.strategy).amount)) return;
    keep_nearer(c, why, amount, std::move(detail));
  }

  // Whether offer() would keep a rejection; when not, the caller may count it instead.
  bool would_keep(Reason why, double amount, Strategy s) const {
    if (per_reason_ < 0 || !was_evaluated(why)) return true;
    return nearest_.would_take(why, amount) ||
           amount < group_best_[index_of(why)][static_cast<std::size_t>(s)].amount;
  }

  // `n` rejections for `why` that would_keep() said none of the lists keeps: counted only.
  void count_unkept(Reason why, std::int64_t n) {
    if (per_reason_ >= 0) nearest_.count(why, n);
  }

  // Room for `n` more rejections where every one is kept.
  void reserve(std::size_t n) {
    if (per_reason_ < 0) all_.reserve(all_.size() + n);
  }

  // Moves the kept rejections into `out.rejected` in the order they were met, and counts the
  // others per reason in `out.rejected_omitted`.
  void finish(PlanResult& out);

 private:
  struct Held {
    Rejected entry;
    int roles = 0;  // places in its reason's nearest list and as its strategy's nearest
  };
  static constexpr std::size_t kStrategyCount =
      static_cast<std::size_t>(Strategy::fsdp_no_shard) + 1;

  static Rejected entry_of(const Candidate& c, Reason why, double amount, std::string detail) {
    Rejected r;
    r.config = c;
    r.reason = why;
    r.amount = amount;
    r.detail = std::move(detail);
    return r;
  }
  Rank& best_of(Reason why, Strategy s) {
    return group_best_[index_of(why)][static_cast<std::size_t>(s)];
  }
  void keep_always(const Candidate& c, Reason why, double amount, std::string detail);
  void keep_nearer(const Candidate& c, Reason why, double amount, std::string detail);
  void release(std::int64_t seq);

  std::int64_t per_reason_;
  std::vector<Rejected> all_;  // per_reason_ < 0: every rejection, in the order met
  NearestPerReason nearest_;
  std::array<std::array<Rank, kStrategyCount>, kReasonCount> group_best_{};  // none: infinite
  std::int64_t seq_ = 0;
  std::map<std::int64_t, Held> held_;  // by the order met
  std::vector<std::int64_t> released_;
};

}  // namespace dtplan::planner::detail
