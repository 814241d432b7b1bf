// Per-strategy collectives of one optimizer step.
#include "dtplan/cost/training_comm.hpp"

#include <algorithm>
#include <map>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {

namespace {

// DeepSpeed ZeRO-3 gathers parameters in prefetch buckets of stage3_prefetch_bucket_size
// (5e7 elements by default) when no module shapes are known.
constexpr std::int64_t kZero3BucketElements = 50'000'000;

// `count` messages of `elements` each. Buckets repeat one size many times (a 1e15-parameter
// model has millions of them): runs keep the work per operation independent of model size.
struct MessageRun {
  std::int64_t elements;
  std::int64_t count;
};
using Messages = std::vector<MessageRun>;

// Buckets of at most `cap` elements covering `total`: all full but the last.
Messages buckets(std::int64_t total, std::int64_t cap) {
  Messages out;
  if (total <= 0) return out;
  const std::int64_t full = total / cap;
  if (full > 0) out.push_back({cap, full});
  if (total % cap > 0) out.push_back({total % cap, 1});
  return out;
}

// Message sizes of what is gathered or reduced unit by unit.
Messages unit_messages(const ModelDesc& m) {
  const auto units = gather_units(m);
  Messages out;
  for (const auto b : units.blocks)
    out.push_back({b, 1});
  if (units.root > 0) out.push_back({units.root, 1});
  if (!units.known) {
    const auto rest = buckets(m.params, kZero3BucketElements);
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;
}

class Builder {
 public:
  Builder(const ModelDesc& m, const TrainingConfig& c, std::int64_t micro_steps, bool no_sync,
          CommModels models, std::int64_t zero_bucket)
      : m_(m),
        c_(c),
        t_(traits_of(c.strategy)),
        layout_(layout_for(c, t_)),
        models_(models),
        zero_bucket_(zero_bucket) {
    r_.strategy = c.strategy;
    r_.micro_steps = micro_steps;
    r_.no_sync = no_sync;
  }

  TrainingComm build() {
    const auto units = unit_messages(m_);
    for (const auto& rule : t_.collectives)
      price(rule, units);
    if (!t_.no_sync) no_sync_unsupported(std::string(t_.no_sync_refusal));
    total();
    const bool fsdp_sharded = t_.fsdp && t_.shards_gradients;
    if (fsdp_sharded && r_.no_sync && r_.micro_steps > 1) {
      r_.notes.push_back("FSDP's no_sync keeps unsharded gradients (" +
                         format_gib(bytes_of(m_.params, gb_bytes(), "gradients")) +
                         ") on every GPU until the last micro-step");
    }
    return r_;
  }

 private:
  std::int64_t gb_bytes() const { return layout_.gradient_comm_bytes(); }

  // The messages of a rule (strategy_traits.hpp).
  Messages messages_of(MessageSplit split, const Messages& units) const {
    switch (split) {
      case MessageSplit::whole_model:
        return {{m_.params, 1}};
      case MessageSplit::ddp_buckets:
        return ddp_buckets(gb_bytes());
      case MessageSplit::zero_buckets:
        return buckets(m_.params, zero_bucket_);
      case MessageSplit::units:
        return units;
      case MessageSplit::unit_shards: {
        // Each GPU of a node holds 1/g of every unit.
        const auto g = models_.node.gpus();
        Messages shards;
        for (const auto& u : units)
          shards.push_back({ceil_div(u.elements, g), u.count});
        return shards;
      }
    }
    return {};
  }

  // One rule priced on its group, in its payload's communication type.
  void price(const CollectiveRule& rule, const Messages& units) {
    const auto messages = messages_of(rule.messages, units);
    const std::int64_t bytes = rule.payload == Payload::weights ? layout_.parameter_comm_bytes()
                                                                : layout_.gradient_comm_bytes();
    const CommWhen when = rule.deferred_by_no_sync && r_.no_sync ? CommWhen::deferrable : rule.when;
    const std::string name(rule.name);
    switch (rule.group) {
      case CommGroup::data_parallel:
        add(name, rule.collective, rule.algorithm, messages, bytes, when, rule.phase);
        break;
      case CommGroup::node:
        add(name, rule.collective, rule.algorithm, messages, bytes, when, rule.phase,
            &models_.node);
        break;
      case CommGroup::replicas:
        across_replicas(name, messages, bytes, when, rule.phase);
        break;
    }
  }

  // DDP's buckets: the first holds 1 MiB (_DEFAULT_FIRST_BUCKET_BYTES), the rest at most
  // bucket_cap_mb; they are filled in reverse parameter order as gradients arrive.
  Messages ddp_buckets(std::int64_t gb) const {
    const std::int64_t first = std::min<std::int64_t>(m_.params, 1048576 / gb);
    auto rest = buckets(m_.params - first, std::max<std::int64_t>(1, c_.bucket_cap_bytes / gb));
    rest.insert(rest.begin(), {first, 1});
    return rest;
  }

  void no_sync_unsupported(const std::string& why) {
    r_.no_sync_supported = false;
    if (r_.micro_steps > 1) {
      r_.notes.push_back(std::string(name_of(c_.strategy)) +
                         " synchronises gradients every micro-step (" + why + ")");
    }
  }

  // An all-reduce of each shard across the replica groups: GPU i of every node, one ring per
  // rail.
  void across_replicas(const std::string& name, const Messages& shards, std::int64_t bytes,
                       CommWhen when, CommPhase phase) {
    CommOp op;
    op.name = name;
    op.collective = Collective::all_reduce;
    const auto replicas = models_.all.nodes();
    op.group = std::to_string(replicas) + " replicas across nodes (per GPU of a node)";
    op.gradient_sync = when == CommWhen::deferrable;
    op.when = when;
    op.phase = phase;
    for (const auto& s : shards) {
      const Bytes size = bytes_of(s.elements, bytes, "message bytes");
      const auto e = models_.all.replica_all_reduce(size);
      count(op, size, s.count, e.time_s, bus_factor(Collective::all_reduce, replicas));
      op.algorithm = replicas > 1 ? "ring per rail" : "none (one node)";
    }
    op.runs = 1;
    ops_.push_back(op);
  }

  void add(const std::string& name, Collective coll, Algorithm algo, const Messages& messages,
           std::int64_t bytes_per_element, CommWhen when, CommPhase phase,
           CommModel* group = nullptr) {
    CommModel& model = group ? *group : models_.all;
    CommOp op;
    op.name = name;
    op.collective = coll;
    op.group = std::to_string(model.gpus()) + " GPUs" + (group ? " of a node" : "");
    op.gradient_sync = when == CommWhen::deferrable;
    op.when = when;
    op.phase = phase;
    op.runs = when == CommWhen::once_per_step ? 1 : r_.micro_steps;
    std::map<std::string, std::int64_t> labels;  // the label most messages use
    std::map<std::int64_t, CollectiveEstimate> seen;
    for (const auto& run : messages) {
      const Bytes size = bytes_of(run.elements, bytes_per_element, "message bytes");
      // Units repeat sizes; estimate each size once.
      auto found = seen.find(size.value);
      if (found == seen.end())
        found = seen.emplace(size.value, model.estimate(coll, size, algo)).first;
      const auto& e = found->second;
      count(op, size, run.count, e.time_s, bus_factor(coll, model.gpus()));
      labels[std::string(name_of(e.algorithm)) + "/" + std::string(name_of(e.protocol))] +=
          run.count;
    }
    for (const auto& [label, count] : labels) {
      if (op.algorithm.empty() || count > labels[op.algorithm]) op.algorithm = label;
    }
    ops_.push_back(op);
  }

  // Adds `n` messages of `size` bytes taking `time_s` each to `op`.
  static void count(CommOp& op, Bytes size, std::int64_t n, double time_s, double bus) {
    const Bytes all = Bytes{checked_mul(size.value, n, "message bytes")};
    op.time_s += time_s * static_cast<double>(n);
    op.bytes += all;
    op.wire_bytes += Bytes{static_cast<std::int64_t>(static_cast<double>(all.value) * bus)};
    op.messages += n;
  }

  void total() {
    const auto micro = r_.micro_steps;
    for (auto& op : ops_) {
      // Deferrable ops run every micro-step without no_sync, once with it.
      const std::int64_t runs_synced = op.gradient_sync ? micro : op.runs;
      const std::int64_t runs = op.gradient_sync && r_.no_sync ? 1 : runs_synced;
      op.runs = runs;
      r_.time_per_step_s += op.time_s * static_cast<double>(runs);
      r_.time_synced_every_micro_step_s += op.time_s * static_cast<double>(runs_synced);
      r_.bytes_per_step += Bytes{checked_mul(op.bytes.value, runs, "bytes per step")};
      r_.wire_bytes_per_step += Bytes{checked_mul(op.wire_bytes.value, runs, "bytes per step")};
      r_.wire_bytes_synced_every_micro_step +=
          Bytes{checked_mul(op.wire_bytes.value, runs_synced, "bytes per step")};
    }
    r_.ops = ops_;
  }

  const ModelDesc& m_;
  const TrainingConfig& c_;
  const StrategyTraits& t_;
  NumericRecipe layout_;
  CommModels models_;
  std::int64_t zero_bucket_;
  TrainingComm r_;
  std::vector<CommOp> ops_;
};

}  // namespace

TrainingComm estimate_training_comm(const ModelDesc& m, const TrainingConfig& c,
                                    std::int64_t micro_steps, bool no_sync, CommModels models,
                                    const OverheadConstants& k) {
  if (micro_steps < 1) throw FieldError("grad_accum", "must be a positive integer");
  if (k.zero_reduce_bucket_elements < 1) {
    throw Error("overhead constant zero_reduce_bucket_elements: must be a positive count, got " +
                std::to_string(k.zero_reduce_bucket_elements));
  }
  check_supported(c);
  if (models.all.gpus() != c.dp_size) {
    throw Error("internal: communication model for " + std::to_string(models.all.gpus()) +
                " GPUs, data-parallel size " + std::to_string(c.dp_size));
  }
  return Builder(m, c, micro_steps, no_sync, models, k.zero_reduce_bucket_elements).build();
}

}  // namespace dtplan::cost
