// Collective rows priced on their groups (rule_pricing.hpp).
#include "rule_pricing.hpp"

#include <map>

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

}  // namespace

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
  std::map<std::string, std::int64_t> labels;  // the label most messages use
  std::map<std::int64_t, CollectiveEstimate> seen;
  for (const auto& run : sources.messages(rule.messages)) {
    const Bytes size = bytes_of(run.elements, element_bytes, "message bytes");
    // Units repeat sizes; estimate each size once.
    auto found = seen.find(size.value);
    if (found == seen.end())
      found = seen.emplace(size.value, group.estimate(rule.collective, size, rule.algorithm)).first;
    const auto& e = found->second;
    count(op, size, run.count, e.time_s + copies_s, bus_factor(rule.collective, group.ranks));
    labels[std::string(name_of(e.algorithm)) + "/" + std::string(name_of(e.protocol))] += run.count;
  }
  if (!group.algorithm.empty()) {
    op.algorithm = group.algorithm;
    return op;
  }
  for (const auto& [label, n] : labels) {
    if (op.algorithm.empty() || n > labels[op.algorithm]) op.algorithm = label;
  }
  return op;
}

}  // namespace dtplan::cost
