// Collective rows priced on their groups (rule_pricing.hpp).
#include "rule_pricing.hpp"

#include <map>
#include <utility>
#include <vector>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

// Adds `n` messages of `size` bytes taking `time_s` each to `op`.
void count(CommOp& op, Bytes size, std::int64_t n, double time_s, double bus) {
  const Bytes all = Bytes{checked_mul(size.value, n, "message bytes")};
  op.time_s += time_s * static_cast<double>(n);
  op.bytes += all;
  op.wire_bytes += Bytes{static_cast<std::int64_t>(static_cast<double>(all.value) * bus)};
  op.messages += n;
}

// Messages counted per (algorithm, protocol) the estimates chose.
struct ChoiceCounts {
  std::vector<std::pair<std::pair<Algorithm, Protocol>, std::int64_t>> counts;

  void add(const CollectiveEstimate& e, std::int64_t n) {
    const auto key = std::make_pair(e.algorithm, e.protocol);
    for (auto& [k, count] : counts) {
      if (k == key) {
        count += n;
        return;
      }
    }
    counts.emplace_back(key, n);
  }
  // "ring/Simple": the choice most messages use; on a tie the first label in text order.
  std::string most_used() const {
    std::string best;
    std::int64_t best_n = 0;
    for (const auto& [key, n] : counts) {
      auto label = std::string(name_of(key.first)) + "/" + std::string(name_of(key.second));
      if (best.empty() || n > best_n || (n == best_n && label < best)) {
        best = std::move(label);
        best_n = n;
      }
    }
    return best;
  }
};

}  // namespace

Messages buckets(std::int64_t total, std::int64_t cap) {
  Messages out;
  if (total <= 0) return out;
  const std::int64_t full = total / cap;
  if (full > 0) out.push_back({cap, full});
  if (total % cap > 0) out.push_back({total % cap, 1});
  return out;
}

Messages shards_of(const Messages& units, std::int64_t g) {
  Messages out;
  out.reserve(units.size());
  for (const auto& u : units)
    out.push_back({ceil_div(u.elements, g), u.count});
  return out;
}

CommOp price_rule(const CollectiveRule& rule, const RuleSources& sources) {
  const auto& group = sources.group(rule.group);
  const std::int64_t element_bytes = rule.payload == Payload::weights
                                         ? sources.recipe.parameter_comm_bytes()
                                         : sources.recipe.gradient_comm_bytes();
  const CommWhen when =
      rule.deferred_by_no_sync && sources.no_sync ? CommWhen::deferrable : rule.when;
  CommOp op;
  op.name = std::string(rule.name);
  op.collective = rule.collective;
  op.group = group.label;
  op.gradient_sync = when == CommWhen::deferrable;
  op.when = when;
  op.phase = rule.phase;
  op.blocking = rule.blocking;
  const double copies_s =
      rule.per_rank_copies ? static_cast<double>(group.ranks) * sources.copy_kernel_s : 0.0;
  const bool once =
      when == CommWhen::once_per_step || (when == CommWhen::deferrable && sources.no_sync);
  op.runs = once ? 1 : sources.micro_steps;
  ChoiceCounts choices;
  std::map<std::int64_t, CollectiveEstimate> seen;
  for (const auto& run : sources.messages(rule.messages)) {
    const Bytes size = bytes_of(run.elements, element_bytes, "message bytes");
    // Units repeat sizes; estimate each size once.
    auto found = seen.find(size.value);
    if (found == seen.end())
      found = seen.emplace(size.value, group.estimate(rule.collective, size, rule.algorithm)).first;
    const auto& e = found->second;
    count(op, size, run.count, e.time_s + copies_s, bus_factor(rule.collective, group.ranks));
    choices.add(e, run.count);
  }
  op.algorithm = group.algorithm.empty() ? choices.most_used() : group.algorithm;
  return op;
}

}  // namespace dtplan::cost
