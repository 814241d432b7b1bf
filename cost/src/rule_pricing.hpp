// Prices the collective rows of the strategy registry (strategy_traits.hpp) as CommOps, for
// the data-parallel strategies (training_comm.cpp) and for the layouts (parallel3d.cpp) alike:
// the caller says what the messages of each split are and how a message costs on each group.
// Private to cost/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/cost/training_comm.hpp"

namespace dtplan::cost {

// `count` messages of `elements` each. Buckets repeat one size many times (a 1e15-parameter
// model has millions of them): runs keep the work per operation independent of model size.
struct MessageRun {
  std::int64_t elements;
  std::int64_t count;
};
using Messages = std::vector<MessageRun>;

// Buckets of at most `cap` elements covering `total`: all full but the last.
Messages buckets(std::int64_t total, std::int64_t cap);

// Each unit's 1/g share (MessageSplit::unit_shards: hybrid sharding's gradient shards).
Messages shards_of(const Messages& units, std::int64_t g);

// The GPUs a rule runs on, and what one message of `size` bytes costs there.
struct RuleGroup {
  std::string label;  // "8 GPUs", "4 replicas across nodes (per GPU of a node)"
  std::int64_t ranks = 1;
  std::function<CollectiveEstimate(Collective, Bytes, Algorithm)> estimate;
  std::string algorithm;  // the algorithm's name in reports; empty: the estimate's own
};

// Where a rule's messages and groups come from.
struct RuleSources {
  std::function<Messages(MessageSplit)> messages;
  std::function<const RuleGroup&(CommGroup)> group;
  NumericRecipe recipe;  // the payload's element bytes
  std::int64_t micro_steps = 1;
  bool no_sync = false;      // rows deferred by no_sync then run once per step
  double copy_kernel_s = 0;  // per rank and call of a list-form rule (CommModels)
};

// One rule priced: each message size estimated once, times summed over the messages; runs is
// once per step or every micro-step (TrainingComm's totals settle deferrable ops).
CommOp price_rule(const CollectiveRule& rule, const RuleSources& sources);

}  // namespace dtplan::cost
