// Per-strategy collectives of one optimizer step.
#include "dtplan/cost/training_comm.hpp"

#include <algorithm>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "rule_pricing.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {

namespace {

// DeepSpeed ZeRO-3 gathers parameters in prefetch buckets of stage3_prefetch_bucket_size
// (5e7 elements by default) when no module shapes are known.
constexpr std::int64_t kZero3BucketElements = 50'000'000;

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

// One message per parameter tensor where the model's layers are known, else its units.
Messages tensor_messages(const ModelDesc& m, const Messages& units) {
  if (!m.transformer) return units;
  Messages out;
  for (const auto& run : block_runs(*m.transformer)) {
    for (const auto t : layer_parameter_tensors(run.block))
      out.push_back({t, run.layers});
  }
  for (const auto t : root_parameter_tensors(*m.transformer))
    out.push_back({t, 1});
  return out;
}

// The block submodules full recomputation gathers again (strategy_traits.hpp
// recompute_regather): submodule j's next use after its recomputed forward is its backward,
// with every later submodule's forward and backward between, 2 x their elements away. For
// `layers` blocks shaped as `block`; regathered() sums the model's kinds of blocks.
Messages regathered_blocks(const TransformerSpec& block, std::int64_t layers,
                           std::int64_t max_reuse, bool per_tensor) {
  Messages out;
  const auto modules = layer_submodules(block);
  auto elements_of = [](const std::vector<std::int64_t>& tensors) {
    std::int64_t n = 0;
    for (const auto t : tensors)
      n = checked_add(n, t, "submodule elements");
    return n;
  };
  std::int64_t later = 0;  // elements of the submodules after the one at hand
  for (const auto& module : modules)
    later = checked_add(later, elements_of(module), "reuse distance");
  for (const auto& module : modules) {
    later -= elements_of(module);
    if (checked_mul(2, later, "reuse distance") <= max_reuse) continue;
    if (!per_tensor) {
      out.push_back({elements_of(module), layers});
      continue;
    }
    for (const auto t : module)
      out.push_back({t, layers});
  }
  return out;
}

Messages regathered(const ModelDesc& m, std::int64_t max_reuse, bool per_tensor) {
  Messages out;
  if (!m.transformer) return out;
  for (const auto& run : block_runs(*m.transformer)) {  // a mixture's dense blocks apart
    const auto more = regathered_blocks(run.block, run.layers, max_reuse, per_tensor);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

// The data-parallel group, or the GPUs of a node (hybrid sharding's shard group).
RuleGroup model_group(CommModel& model, bool node) {
  return {.label = std::to_string(model.gpus()) + " GPUs" + (node ? " of a node" : ""),
          .ranks = model.gpus(),
          .estimate = [&model](Collective c, Bytes size,
                               Algorithm a) { return model.estimate(c, size, a); },
          .algorithm = ""};
}

// Hybrid sharding's replicas: GPU i of every node, one ring per rail.
RuleGroup replica_group(CommModel& all) {
  const auto replicas = all.nodes();
  return {.label = std::to_string(replicas) + " replicas across nodes (per GPU of a node)",
          .ranks = replicas,
          .estimate = [&all](Collective, Bytes size,
                             Algorithm) { return all.replica_all_reduce(size); },
          .algorithm = replicas > 1 ? "ring per rail" : "none (one node)"};
}

class Builder {
 public:
  Builder(const ModelDesc& m, const TrainingConfig& c, std::int64_t micro_steps, bool no_sync,
          CommModels models, std::int64_t zero_bucket, std::int64_t max_reuse)
      : m_(m),
        c_(c),
        t_(traits_of(c.strategy)),
        layout_(layout_for(c, t_)),
        models_(models),
        zero_bucket_(zero_bucket),
        max_reuse_(max_reuse) {
    r_.strategy = c.strategy;
    r_.micro_steps = micro_steps;
    r_.no_sync = no_sync;
  }

  TrainingComm build() {
    const auto units = unit_messages(m_);
    const RuleGroup all = model_group(models_.all, false);
    const RuleGroup node = model_group(models_.node, true);
    const RuleGroup replicas = replica_group(models_.all);
    RuleSources sources{.messages = [&](MessageSplit split) { return messages_of(split, units); },
                        .group = [&](CommGroup g) -> const RuleGroup& {
                          return g == CommGroup::data_parallel ? all
                                 : g == CommGroup::shard_group ? node
                                                               : replicas;
                        },
                        .recipe = layout_,
                        .micro_steps = r_.micro_steps,
                        .no_sync = r_.no_sync,
                        .copy_kernel_s = models_.copy_kernel_s};
    for (const auto& rule : strategy_collectives(c_)) {
      auto op = price_rule(rule, sources);
      // A collective over one GPU moves nothing: not listed unless something still costs time.
      if (sources.group(rule.group).ranks > 1 || op.time_s > 0) ops_.push_back(std::move(op));
    }
    if (const auto again = recompute_regather(c_)) {
      auto op = price_rule(*again, sources);
      if (op.messages > 0) ops_.push_back(std::move(op));
    }
    if (!t_.no_sync) no_sync_unsupported(std::string(t_.no_sync_refusal));
    legacy_zero3_note();
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
      case MessageSplit::unit_shards:  // each GPU of a node holds 1/g of every unit
        return shards_of(units, models_.node.gpus());
      case MessageSplit::parameter_tensors:
        return tensor_messages(m_, units);
      case MessageSplit::recompute_regathers:
        return regathered(m_, max_reuse_, c_.zero3_gathers != Zero3Gathers::coalesced);
      case MessageSplit::megatron_buckets:  // the layouts' only (parallel3d.cpp)
        return {{m_.params, 1}};
    }
    return {};
  }

  // DDP's buckets: the first holds 1 MiB (_DEFAULT_FIRST_BUCKET_BYTES), the rest at most
  // bucket_cap_mb; they are filled in reverse parameter order as gradients arrive.
  Messages ddp_buckets(std::int64_t gb) const {
    const std::int64_t first = std::min<std::int64_t>(m_.params, 1048576 / gb);
    auto rest = buckets(m_.params - first, std::max<std::int64_t>(1, c_.bucket_cap_bytes / gb));
    rest.insert(rest.begin(), {first, 1});
    return rest;
  }

  void legacy_zero3_note() {
    if (c_.strategy != Strategy::zero3 || c_.zero3_gathers == Zero3Gathers::coalesced) return;
    const bool list = c_.zero3_gathers == Zero3Gathers::per_parameter_list;
    std::string note = "ZeRO-3 of DeepSpeed " + std::string(releases_of(c_.zero3_gathers)) +
                       " gathers each parameter tensor on its own after torch.cuda.synchronize(),"
                       " so no gather or reduce-scatter overlaps compute";
    if (list) {
      note += "; list-form calls copy each of the " + std::to_string(models_.all.gpus()) +
              " ranks' chunks, one copy kernel per rank per call";
    } else {
      note += "; list-form reduce-scatters copy each of the " + std::to_string(models_.all.gpus()) +
              " ranks' chunks";
    }
    r_.notes.push_back(note);
  }

  void no_sync_unsupported(const std::string& why) {
    r_.no_sync_supported = false;
    if (r_.micro_steps > 1) {
      r_.notes.push_back(std::string(name_of(c_.strategy)) +
                         " synchronises gradients every micro-step (" + why + ")");
    }
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
  std::int64_t max_reuse_;
  TrainingComm r_;
  std::vector<CommOp> ops_;
};

}  // namespace

nlohmann::json to_json(const CommOp& op) {
  return {{"name", op.name},
          {"collective", std::string(name_of(op.collective))},
          {"group", op.group},
          {"messages", op.messages},
          {"bytes", op.bytes.value},
          {"wire_bytes_per_gpu", op.wire_bytes.value},
          {"runs_per_step", op.runs},
          {"time_s", op.time_s},
          {"deferred_by_no_sync", op.gradient_sync},
          {"algorithm", op.algorithm}};
}

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
  return Builder(m, c, micro_steps, no_sync, models, k.zero_reduce_bucket_elements,
                 k.zero3_max_reuse_distance_elements)
      .build();
}

}  // namespace dtplan::cost
