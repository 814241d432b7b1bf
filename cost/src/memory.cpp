// The per-GPU memory model. With a parameters and shard degree n, each model-state component
// is element count x bytes per element, divided by n where the strategy shards it; bytes per
// element follow the recipe (numeric_recipe.hpp):
//
//   component       fp32  master_weights  autocast  fsdp_mixed   sharded by
//   weights           4        2              4         4        ZeRO-3, FSDP (not NO_SHARD)
//   master weights    -        4              -         -        ZeRO-1 and up
//   gradients         4     2 (4 fp32 acc.)   4         4        ZeRO-2 and up, FSDP
//   optimizer (Adam)  8        8              8         8        ZeRO-1 and up, FSDP
//   DDP buckets      as gradients                                (DDP; 0 with bucket view)
//
// which gives DDP 20a (fp32) / 18a (master_weights), ZeRO-1 4a+4a+8a/n, ZeRO-2 4a+12a/n,
// ZeRO-3 16a/n. Copies held only while computing (gathered units, autocast casts, FSDP's
// unsharded parameters) are buffers; the peak adds activations, buffers and overhead.
#include "dtplan/cost/memory.hpp"

#include <algorithm>
#include <utility>

#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {

Bytes MemoryComponents::model_states() const {
  return weights + master_weights + gradients + optimizer_states + grad_buckets;
}

Bytes MemoryComponents::total() const {
  return model_states() + activations + buffers + overhead;
}

Bytes MemoryComponents::torch_reserved() const {
  return total() - outside_allocator;
}

Bytes MemoryComponents::torch_allocated() const {
  return torch_reserved() - allocator_slack;
}

namespace {

std::string sharding_text(bool sharded, std::int64_t n, std::int64_t elements,
                          const std::string& parts = "") {
  if (sharded && !parts.empty())
    return "x " + format_thousands(elements) + " params (" + parts + ")";
  if (!sharded || n == 1) return "x " + format_thousands(elements) + " params, not sharded";
  return "x " + format_thousands(elements) + " params (1/" + std::to_string(n) + " shard)";
}

// The parameters whose gradients backward reaches first: the language-model head (the
// vocabulary projection, tied to the embedding or not), or a classifier and BERT's pooler; a
// bare model's last block reaches first, counted as none.
std::int64_t first_gradients(const TransformerSpec& t) {
  const std::int64_t h = t.hidden_size;
  switch (t.head) {
    case HeadKind::causal_lm:
    case HeadKind::masked_lm:
    case HeadKind::pretraining:
      return checked_mul(t.vocab_size, h, "head parameters");
    case HeadKind::sequence_classification:
      return checked_mul(t.num_labels, h, "head parameters") + (t.pooler ? h * h : 0);
    case HeadKind::base:
      return 0;
  }
  return 0;
}

class Builder {
 public:
  Builder(const ModelDesc& m, const TrainingConfig& c, const StateView& v,
          const OverheadConstants& k)
      : m_(m), c_(c), k_(k), v_(v), t_(v.traits), layout_(v.recipe), units_(v.units) {
    e_.strategy = c.strategy;
    e_.params = v.params;
    e_.shard_degree = v.shard_degree;
    if (v.explain) e_.recipe = layout_.description;  // a search reads the figures alone
    shard_elements_ = v.shard_elements > 0 ? v.shard_elements : ceil_div(v.params, e_.shard_degree);
  }

  MemoryEstimate build() {
    model_states();
    offload();
    unsharded_accumulation();
    activations();
    buffers();
    gradients_at_peak();
    overhead();
    phase_totals();
    if (v_.explain) notes();
    e_.cpu_per_node = Bytes{checked_mul(e_.cpu.total().value, ranks_per_node(), "host bytes")};
    return std::move(e_);  // build() runs once: the estimate moves out
  }

 private:
  std::int64_t elements(bool sharded) const { return sharded ? shard_elements_ : v_.params; }
  std::int64_t ranks_per_node() const { return v_.ranks_per_node; }
  void append_explain(const std::string& component, const std::string& text) {
    for (auto& [key, existing] : e_.explain) {
      if (key == component) existing += text;
    }
  }
  void explain(const std::string& component, const std::string& text) {
    for (auto& [key, existing] : e_.explain) {
      if (key == component) {
        existing = text;
        return;
      }
    }
    e_.explain.emplace_back(component, text);
  }
  std::string explained(const std::string& component) const {
    for (const auto& [key, text] : e_.explain) {
      if (key == component) return text;
    }
    return "";
  }
  void move_to_host(const char* component) {
    if (!v_.explain) return;
    explain(component, "offloaded to host memory: " + explained(component));
  }

  void model_states() {
    const auto& l = layout_;
    auto& g = e_.gpu;
    g.weights = bytes_of(elements(t_.shards_weights), l.parameter_bytes(), "weights");
    g.master_weights =
        bytes_of(elements(t_.shards_optimizer), l.main_weight_bytes(), "master weights");
    g.gradients = bytes_of(elements(t_.shards_gradients), l.gradient_bytes(), "gradients");
    g.optimizer_states = optimizer_bytes(c_.optimizer, elements(t_.shards_optimizer), k_);
    g.grad_buckets =
        ddp_buckets() ? bytes_of(v_.params, l.gradient_bytes(), "gradient buckets") : Bytes{0};
    if (v_.explain) explain_model_states();
  }

  bool ddp_buckets() const {
    return t_.gradient_buffer == GradientBuffer::ddp_buckets && !c_.grad_bucket_view;
  }

  void explain_model_states() {
    const auto& l = layout_;
    const auto n = e_.shard_degree;
    explain("weights",
            std::to_string(l.parameter_bytes()) + " B (" + std::string(name_of(l.parameter)) +
                ") " +
                sharding_text(t_.shards_weights, n, elements(t_.shards_weights), v_.shard_text));
    explain("master_weights",
            l.main_weight_bytes() == 0
                ? "none: the optimizer updates the fp32 weights directly"
                : std::to_string(l.main_weight_bytes()) + " B (" +
                      std::string(name_of(*l.main_weight)) + ") " +
                      sharding_text(t_.shards_optimizer, n, elements(t_.shards_optimizer),
                                    v_.shard_text));
    explain(
        "gradients",
        std::to_string(l.gradient_bytes()) + " B (" + std::string(name_of(l.gradient)) + ") " +
            sharding_text(t_.shards_gradients, n, elements(t_.shards_gradients), v_.shard_text));
    explain("optimizer_states", optimizer_explain(c_.optimizer, k_) + " " +
                                    sharding_text(t_.shards_optimizer, n,
                                                  elements(t_.shards_optimizer), v_.shard_text));
    explain("grad_buckets",
            ddp_buckets()
                ? std::to_string(l.gradient_bytes()) + " B x " + format_thousands(v_.params) +
                      " params: DDP copies gradients into buckets"
            : t_.gradient_buffer == GradientBuffer::ddp_buckets
                ? "none: gradient_as_bucket_view makes gradients views of the buckets"
                : "none: this strategy keeps no bucketed gradient copy");
  }

  // FSDP's no_sync accumulates full, unsharded gradients (in the reduce type: FSDP1's
  // MixedPrecision reduces in the compute type, FSDP2 casts to its reduce_dtype,
  // FSDPParam.to_accumulated_grad_if_needed) on every GPU until the last micro-step; with CPU
  // offload FSDP accumulates only this way.
  bool accumulates_unsharded() const {
    return t_.fsdp && t_.shards_gradients && c_.no_sync && c_.grad_accum > 1 && t_.no_sync;
  }
  void unsharded_accumulation() {
    if (!accumulates_unsharded()) return;
    const std::int64_t rb = layout_.gradient_comm_bytes();
    const auto full = bytes_of(v_.params, rb, "unsharded gradients");
    e_.gpu.gradients = e_.gpu.gradients + full;
    if (!v_.explain) return;  // a search needs the bytes alone
    const std::string held = "; + " + std::to_string(rb) + " B x " + format_thousands(v_.params) +
                             " params: unsharded gradients kept across " +
                             std::to_string(c_.grad_accum) + " micro-steps";
    const std::string host = c_.offload == Offload::none ? "" : "; the shard is on the host";
    // A layout's stage (whole_model false) syncs once per step because its pipeline schedule
    // says so, not because of a choice the user can undo.
    append_explain("gradients",
                   v_.whole_model
                       ? held + " (no_sync)" + host + "; {sync_every_micro_step} avoids it"
                       : held + " (the pipeline stage syncs after its last backward)" + host);
  }

  // ZeRO-Offload keeps the master copy, optimizer states and an fp32 gradient partition on the
  // host; FSDP CPUOffload keeps the fp32 parameter shard, its gradients and the optimizer there.
  void offload() {
    if (c_.offload == Offload::none) return;
    auto& g = e_.gpu;
    auto& h = e_.cpu;
    const auto opt_elements = elements(t_.shards_optimizer);
    h.optimizer_states = std::exchange(g.optimizer_states, Bytes{0});
    if (h.optimizer_states.value > 0) move_to_host("optimizer_states");
    if (t_.fsdp) {
      h.weights = std::exchange(g.weights, Bytes{0});
      h.gradients = std::exchange(g.gradients, Bytes{0});
      move_to_host("weights");
      move_to_host("gradients");
      return;
    }
    // DeepSpeed's CPU Adam keeps fp32 master weights and fp32 gradient partitions.
    const auto fp32 = bytes_per_element(ElementType::fp32);
    h.master_weights = bytes_of(opt_elements, fp32, "host master weights");
    g.master_weights = Bytes{0};
    if (v_.explain) {
      explain("master_weights",
              "in host memory, the copy the CPU optimizer updates: 4 B (fp32) " +
                  sharding_text(t_.shards_optimizer, e_.shard_degree, opt_elements, v_.shard_text));
    }
    h.gradients = bytes_of(opt_elements, fp32, "host gradients");
    if (t_.shards_gradients) {
      g.gradients = Bytes{0};
      if (v_.explain) {
        explain("gradients", "reduced partitions copied to host memory: 4 B (fp32) " +
                                 sharding_text(t_.shards_optimizer, e_.shard_degree, opt_elements,
                                               v_.shard_text));
      }
    }
    if (c_.offload == Offload::optimizer_and_params) {
      h.weights = bytes_of(shard_elements_, layout_.parameter_bytes(), "host weights");
      g.weights = Bytes{0};
      move_to_host("weights");
    }
  }

  void activations() {
    const auto& a = v_.activations;
    e_.activations_modelled = a.modelled;
    e_.seq_len = a.seq_len;
    if (!a.terms.empty()) e_.activation_terms = a.terms;
    e_.gpu.activations = a.total;
  }

  // The PyTorch strategies' peak comes at one of two moments. In backward, at its start: every
  // activation beside the gradients. With one micro-step and zero_grad(set_to_none=True)
  // (PyTorch's default since 2.0) a gradient is allocated only when backward reaches its
  // parameter, so at that moment only the head's (its vocabulary x hidden weight is the first
  // reached) exists, and the blocks' gradients grow as their activations are freed. At the
  // optimizer step: every gradient, the activations and the copies held while computing
  // (gathered units, autocast's casts) freed, and torch.optim's foreach Adam(W) holding one more
  // fp32 list of its states' size (the square root of the second moment, torch/optim/adam.py
  // _multi_tensor_adam). The gradients row carries what the peak holds beyond the activations
  // and buffers. DeepSpeed's and Megatron-LM's gradient buffers persist.
  void gradients_at_peak() {
    auto& g = e_.gpu;
    // PyTorch's data parallelism and FSDP2 layouts; Megatron-LM's layouts keep a persistent
    // main_grad buffer (a layout's strategy field is unused: fsdp tells them apart).
    const bool pytorch = t_.fsdp || (v_.whole_model &&
                                     (c_.strategy == Strategy::ddp || c_.strategy == Strategy::dp));
    if (!pytorch || !e_.activations_modelled || g.gradients.value <= 0) return;
    const Bytes all = g.gradients;
    Bytes at_backward = all;
    if (c_.grad_accum <= 1 && c_.zero_grad == ZeroGrad::set_to_none && !c_.grad_bucket_view &&
        m_.transformer && v_.params > 0) {
      const double head = std::min(1.0, static_cast<double>(first_gradients(*m_.transformer)) /
                                            static_cast<double>(v_.params));
      at_backward =
          Bytes{static_cast<std::int64_t>(std::llround(head * static_cast<double>(all.value)))};
    }
    const Bytes temporary = optimizer_temporary();
    const Bytes at_step = all + temporary;
    // Everything but NCCL's buffers (so far all that is outside the allocator) is freed by then.
    const Bytes freed = g.activations + (g.buffers - g.outside_allocator);
    const Bytes beyond = at_step - std::min(at_step, freed);
    const Bytes at_peak = std::max(at_backward, beyond);
    phases_ = {at_backward, beyond};
    if (v_.explain && at_peak != all) {
      const bool step = beyond > at_backward;
      append_explain(
          "gradients",
          step ? "; the peak is the optimizer step: activations and buffers freed, every "
                 "gradient" +
                     (temporary.value > 0 ? " and the optimizer's temporary (" +
                                                format_thousands(temporary.value) + " bytes)"
                                          : std::string()) +
                     ", " + format_thousands(at_peak.value) + " bytes beyond them"
               : "; at the peak, the start of backward, only the head's " +
                     format_thousands(at_peak.value) +
                     " bytes: one micro-step with zero_grad(set_to_none=True) allocates each "
                     "gradient as backward frees activations");
    }
    g.gradients = at_peak;
  }

  // `name()` is called only when the estimate is explained (a search needs the bytes alone).
  template <class Name>
  void add_buffer(const Name& name, Bytes bytes) {
    if (bytes.value <= 0) return;
    if (v_.explain) e_.buffer_terms.push_back({name(), bytes});
    e_.gpu.buffers += bytes;
  }

  // Parameters held unsharded in the compute type while computing.
  void gathered_parameters() {
    const std::int64_t cb = layout_.compute_bytes();
    const std::string_view type = name_of(layout_.compute);
    switch (t_.gather) {
      case ParamGather::units:
        if (units_.known) {
          add_buffer(
              [&] {
                return std::string("gathered " + std::string(type) +
                                   " parameters (module in use + prefetched module)");
              },
              bytes_of(units_.in_use_and_prefetched(), cb, "gathered parameters"));
        }
        break;
      case ParamGather::root_and_units:
        if (units_.known) {
          add_buffer(
              [&] {
                return std::string("gathered " + std::string(type) +
                                   " root unit (embeddings, head), held forward to backward");
              },
              bytes_of(units_.root, cb, "gathered parameters"));
          add_buffer(
              [&] {
                return std::string("gathered " + std::string(type) +
                                   " blocks (unit in use + prefetched unit)");
              },
              bytes_of(units_.two_largest_blocks(), cb, "gathered parameters"));
        }
        break;
      case ParamGather::whole_model:
        add_buffer(
            [&] {
              return std::string("unsharded " + std::string(type) +
                                 " parameters, held from forward to the end of backward");
            },
            bytes_of(v_.params, cb, "unsharded parameters"));
        break;
      case ParamGather::none:
        break;
    }
    const bool mixed_unsharded_copy =
        layout_.kind == RecipeKind::autocast ||
        (layout_.kind == RecipeKind::fsdp_mixed && t_.gather == ParamGather::none);
    if (mixed_unsharded_copy) {
      add_buffer(
          [&] {
            return std::string(type) + " copies of the weights, cached from forward to backward";
          },
          bytes_of(v_.params, cb, "weight copies"));
    }
  }

  // One unit's gradients wait, unsharded and in the reduce type, for their reduce-scatter
  // (FSDP MixedPrecision reduces in the compute type; FSDP2 as torchtitan runs it in fp32).
  void gradient_buffers() {
    const std::int64_t rb = layout_.gradient_comm_bytes();
    if (t_.gradient_buffer == GradientBuffer::unit_gradients && units_.known) {
      const auto largest = units_.largest();
      add_buffer(
          [&] {
            return "one unit's unsharded " + std::string(name_of(layout_.gradient_comm)) +
                   " gradients before reduction";
          },
          bytes_of(largest, rb, "unit gradients"));
    }
    if (t_.gradient_buffer == GradientBuffer::zero_bucket) {
      const auto bucket = std::min(v_.params, k_.zero_reduce_bucket_elements);
      add_buffer(
          [&] {
            return std::string("ZeRO contiguous reduce bucket (" + format_thousands(bucket) +
                               " elements)");
          },
          bytes_of(bucket, layout_.gradient_bytes(), "reduce bucket"));
    }
  }

  void buffers() {
    gathered_parameters();
    gradient_buffers();
    if (t_.single_process && c_.dp_size > 1) {
      const auto n = c_.dp_size;
      add_buffer(
          [&] {
            return std::string("rank 0: outputs gathered from " + std::to_string(n) + " replicas");
          },
          Bytes{checked_mul(v_.activations.model_output.value, n, "gathered outputs")});
      add_buffer([&] { return std::string("rank 0: loss over the other replicas' outputs"); },
                 Bytes{checked_mul(v_.activations.loss_bytes.value, n - 1, "loss activations")});
      add_buffer([&] { return std::string("rank 0: replica gradients awaiting reduction"); },
                 bytes_of(v_.params, layout_.gradient_bytes(), "replica gradients"));
    }
    if (v_.communicators > 0) {
      const auto bytes = nccl_bytes(v_.communicators, k_);
      add_buffer([&] { return nccl_buffers(v_.communicators, k_).name; }, bytes);
      e_.gpu.outside_allocator += bytes;  // NCCL allocates them itself
    }
  }

  // torch.optim's Adam(W) at its step: foreach holds the square root of the whole second moment
  // (4 B a parameter of the optimizer's shard), a for-loop step one tensor's at a time (the
  // largest: the embedding); fused steps and the other optimizers none.
  Bytes optimizer_temporary() const {
    if (!foreach_optimizer(c_) || e_.gpu.optimizer_states.value <= 0) return Bytes{0};
    std::int64_t elements_held = elements(t_.shards_optimizer);
    if (c_.optimizer_impl == OptimizerImpl::for_loop && m_.transformer) {
      const auto& t = *m_.transformer;
      const std::int64_t largest =
          std::max(checked_mul(t.vocab_size, t.hidden_size, "tensor elements"),
                   checked_mul(t.hidden_size, t.ffn_size, "tensor elements"));
      elements_held =
          std::min(elements_held, ceil_div(largest, t_.shards_optimizer ? e_.shard_degree : 1));
    }
    return bytes_of(elements_held, 4, "optimizer temporary");
  }

  // Each moment's total, its gradients in place of the larger one's.
  void phase_totals() {
    auto& g = e_.gpu;
    e_.backward_total = g.total();
    if (!phases_) return;
    const auto total_with = [&](Bytes gradients) {
      const Bytes allocated =
          g.model_states() - g.gradients + gradients + g.activations + g.buffers;
      return allocated + overhead_bytes(allocated, k_);
    };
    e_.backward_total = total_with(phases_->first);
    e_.step_total = total_with(phases_->second);
  }

  void overhead() {
    const Bytes allocated = e_.gpu.model_states() + e_.gpu.activations + e_.gpu.buffers;
    e_.gpu.overhead = overhead_bytes(allocated, k_);
    e_.gpu.allocator_slack = e_.gpu.overhead - Bytes{k_.cuda_context_bytes};
    e_.gpu.outside_allocator += Bytes{k_.cuda_context_bytes};
    if (v_.explain) e_.overhead_terms = overhead_terms(allocated, k_);
  }

  void notes() {
    if (t_.single_process && c_.dp_size > 1) {
      e_.notes.push_back(
          "DataParallel: figures are rank 0's, which also holds the optimizer, "
          "the gathered outputs and their loss, and the reduced gradients");
    }
    if (t_.hybrid) {
      const auto groups = c_.dp_size / e_.shard_degree;
      e_.notes.push_back(groups == 1
                             ? "hybrid sharding: all " + std::to_string(c_.dp_size) +
                                   " GPUs are in one node, so it shards like fsdp-full"
                             : "hybrid sharding: groups of " + std::to_string(e_.shard_degree) +
                                   " GPUs shard, " + std::to_string(groups) + " groups replicate");
    }
    if (!e_.activations_modelled) {
      e_.notes.push_back(
          "activations and gathered units are not modelled for a bare parameter "
          "count; give {model} for layer shapes");
    }
    if (m_.transformer && m_.transformer->positions == PositionKind::rotary &&
        e_.seq_len > m_.transformer->max_positions) {
      e_.notes.push_back("sequence length exceeds the model's max_position_embeddings");
    }
    if (m_.transformer && m_.transformer->moe.active()) {
      // A layout states its own expert placement (parallel3d.cpp).
      const std::string held = v_.whole_model ? "every GPU of a data-parallel group holds all " +
                                                    std::to_string(m_.transformer->moe.experts) +
                                                    " experts (a layout with {ep} spreads them), "
                                              : "";
      e_.notes.push_back("mixture of experts: " + held +
                         "routing is priced as balanced (every expert gets k/E of the tokens, "
                         "no imbalance), and MFU counts the parameters active per token");
      const auto& t = *m_.transformer;
      std::vector<std::string> parts;
      if (t.moe.first_dense_layers > 0)
        parts.push_back("the first " + std::to_string(t.moe.first_dense_layers) +
                        " blocks are dense");
      if (t.mtp_layers > 0) {
        parts.push_back(std::to_string(t.mtp_layers) +
                        " multi-token prediction module(s) are priced on the last stage");
      }
      if (!parts.empty()) e_.notes.push_back(join(parts, "; "));
    }
    attention_note();
  }

  // Materialised attention scores grow with s^2; say how much they are.
  void attention_note() {
    if (!m_.transformer || !v_.whole_model || c_.attention == Attention::flash ||
        c_.checkpointing != Checkpointing::none) {
      return;
    }
    const auto& t = *m_.transformer;
    const auto with =
        layer_activation_bytes(t, c_.micro_batch, e_.seq_len, c_.precision, c_.attention, true);
    const auto without =
        layer_activation_bytes(t, c_.micro_batch, e_.seq_len, c_.precision, c_.attention, false);
    const Bytes scores{checked_mul((with - without).value, t.num_layers, "activation bytes")};
    if (scores.value * 10 < e_.gpu.activations.value) return;
    e_.notes.push_back("materialised attention scores are " + format_gib(scores) +
                       " of the activations; {attention} flash (FlashAttention, PyTorch SDPA) "
                       "keeps none of them");
  }

  const ModelDesc& m_;
  const TrainingConfig& c_;
  const OverheadConstants& k_;
  const StateView& v_;
  const StrategyTraits& t_;
  const NumericRecipe& layout_;
  const GatherUnits& units_;
  MemoryEstimate e_;
  std::int64_t shard_elements_ = 0;
  std::optional<std::pair<Bytes, Bytes>> phases_;  // gradients row at backward, at the step
};

// The whole model on each data-parallel GPU, as the strategy's registry row lays it out.
// The whole model on one data-parallel GPU; `units` its gather_units, `explained` false for
// the figures alone.
StateView data_parallel_view(const ModelDesc& m, const TrainingConfig& c, GatherUnits units,
                             bool explained) {
  check_supported(c);
  StateView v;
  v.traits = traits_of(c.strategy);
  v.recipe = layout_for(c, v.traits);
  v.params = m.params;
  v.shard_degree = shard_degree(c);
  v.units = std::move(units);
  v.activations = estimate_activations(m, c, explained);
  v.explain = explained;
  if (c.dp_size > 1) v.communicators = v.traits.hybrid && c.dp_size > v.shard_degree ? 2 : 1;
  v.ranks_per_node = v.traits.single_process ? 1 : std::min(c.dp_size, c.gpus_per_node);
  return v;
}

}  // namespace

MemoryEstimate estimate_view_memory(const ModelDesc& m, const TrainingConfig& c, const StateView& v,
                                    const OverheadConstants& k) {
  return Builder(m, c, v, k).build();
}

MemoryEstimate estimate_memory(const ModelDesc& m, const TrainingConfig& c,
                               const OverheadConstants& k) {
  if (m.params <= 0) throw Error("model '" + m.name + "' has no parameters");
  const auto view = data_parallel_view(m, c, gather_units(m), true);
  return estimate_view_memory(m, c, view, k);
}

MemoryFigures::MemoryFigures(const ModelDesc& m, const OverheadConstants& k)
    : model_(m), overheads_(k), units_(std::make_unique<const GatherUnits>(gather_units(m))) {}
MemoryFigures::~MemoryFigures() = default;

MemoryEstimate MemoryFigures::operator()(const TrainingConfig& c) const {
  if (model_.params <= 0) throw Error("model '" + model_.name + "' has no parameters");
  const auto view = data_parallel_view(model_, c, *units_, false);
  return estimate_view_memory(model_, c, view, overheads_);
}

FitVerdict check_fit(const MemoryEstimate& e, const GpuSpec& gpu,
                     std::optional<Bytes> host_per_node) {
  FitVerdict v;
  v.gpu = gpu.name;
  v.capacity = gpu.memory;
  const Bytes need = e.gpu.total();
  v.gpu_fits = need <= v.capacity;
  v.margin = v.capacity - need;
  if (host_per_node) {
    v.host_capacity = host_per_node;
    v.host_fits = e.cpu_per_node <= *host_per_node;
    v.host_margin = *host_per_node - e.cpu_per_node;
  }
  v.fits = v.gpu_fits && v.host_fits;
  return v;
}

}  // namespace dtplan::cost
