// The per-GPU memory model. Model states per GPU, with a parameters and shard degree n:
//
//   component         bytes/param fp32  mixed  sharded by
//   weights                 4            2     ZeRO-3, FSDP FULL_SHARD / HYBRID_SHARD
//   master weights          -            4     ZeRO-1 and up, FSDP sharding strategies
//   gradients               4            2(4*) ZeRO-2 and up, FSDP sharding strategies
//   optimizer (Adam)        8            8     ZeRO-1 and up, FSDP sharding strategies
//   DDP buckets             4            2     (DDP only; 0 with gradient_as_bucket_view)
//   * 4 with an fp32 gradient-accumulation buffer (Megatron main_grad)
//
// which gives DDP 20a (fp32) / 18a (mixed), ZeRO-1 4a+4a+8a/n, ZeRO-2 4a+12a/n, ZeRO-3 16a/n.
#include "dtplan/cost/memory.hpp"

#include <algorithm>
#include <utility>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {

Bytes MemoryComponents::model_states() const {
  return weights + master_weights + gradients + optimizer_states + grad_buckets;
}

Bytes MemoryComponents::total() const {
  return model_states() + activations + buffers + overhead;
}

namespace {

struct PerParam {
  std::int64_t weights;
  std::int64_t master;
  std::int64_t gradients;
};

PerParam bytes_per_param(const TrainingConfig& c) {
  const bool mixed = is_mixed(c.precision);
  return {mixed ? 2 : 4, mixed ? 4 : 0, (mixed && !c.fp32_grad_accumulation) ? 2 : 4};
}

Bytes optimizer_bytes(Optimizer o, std::int64_t elements, const OverheadConstants& k) {
  switch (o) {
    case Optimizer::adam:
    case Optimizer::adamw:
      return bytes_of(elements, 8, "optimizer states");
    case Optimizer::sgd:
      return Bytes{0};
    case Optimizer::sgd_momentum:
      return bytes_of(elements, 4, "optimizer states");
    case Optimizer::adam8bit: {
      const auto blocks = ceil_div(elements, k.adam8bit_block_elements);
      return bytes_of(elements, 2, "optimizer states") + bytes_of(blocks, 8, "optimizer states");
    }
  }
  return Bytes{0};
}

std::string optimizer_explain(Optimizer o, const OverheadConstants& k) {
  switch (o) {
    case Optimizer::adam:
    case Optimizer::adamw:
      return "8 B/param (fp32 first and second moments)";
    case Optimizer::sgd:
      return "no state";
    case Optimizer::sgd_momentum:
      return "4 B/param (fp32 momentum)";
    case Optimizer::adam8bit:
      return "2 B/param (int8 moments) + 2 fp32 scales per " +
             std::to_string(k.adam8bit_block_elements) + "-element block";
  }
  return "";
}

// Units that ZeRO-3/FSDP gather whole: embeddings, each block, the head (+ final norm).
std::vector<std::int64_t> gather_units(const ModelDesc& m) {
  std::vector<std::int64_t> units;
  if (m.transformer) {
    const auto p = count_parameters(*m.transformer);
    units.push_back(p.embeddings);
    units.push_back(p.per_layer);
    if (p.head > 0) units.push_back(p.head);
    if (m.transformer->num_layers > 1) units.push_back(p.per_layer);
  } else if (m.layers) {
    for (const auto& l : m.layers->layers) {
      if (l.params > 0) units.push_back(l.params);
    }
  }
  std::sort(units.rbegin(), units.rend());
  return units;
}

std::string sharding_text(bool sharded, std::int64_t n, std::int64_t elements) {
  if (!sharded || n == 1) return "x " + format_thousands(elements) + " params, not sharded";
  return "x " + format_thousands(elements) + " params (1/" + std::to_string(n) + " shard)";
}

class Builder {
 public:
  Builder(const ModelDesc& m, const TrainingConfig& c, const OverheadConstants& k)
      : m_(m), c_(c), k_(k), t_(traits_of(c.strategy)) {
    check_supported(c);
    e_.strategy = c.strategy;
    e_.params = m.params;
    e_.shard_degree = shard_degree(c);
    shard_elements_ = ceil_div(m.params, e_.shard_degree);
  }

  MemoryEstimate build() {
    model_states();
    offload();
    activations();
    buffers();
    overhead();
    notes();
    e_.cpu_per_node = Bytes{checked_mul(e_.cpu.total().value, ranks_per_node(), "host bytes")};
    return e_;
  }

 private:
  std::int64_t elements(bool sharded) const { return sharded ? shard_elements_ : m_.params; }
  std::int64_t ranks_per_node() const {
    return t_.single_process ? 1 : std::min(c_.dp_size, c_.gpus_per_node);
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
  void move_to_host(const std::string& component) {
    explain(component, "offloaded to host memory: " + explained(component));
  }

  void model_states() {
    const auto b = bytes_per_param(c_);
    const auto n = e_.shard_degree;
    const std::string p = std::string(name_of(c_.precision));
    auto& g = e_.gpu;
    g.weights = bytes_of(elements(t_.shards_weights), b.weights, "weights");
    explain("weights", std::to_string(b.weights) + " B (" + (b.weights == 2 ? p : "fp32") + ") " +
                           sharding_text(t_.shards_weights, n, elements(t_.shards_weights)));
    g.master_weights = bytes_of(elements(t_.shards_optimizer), b.master, "master weights");
    explain("master_weights", b.master == 0
                                  ? "none: fp32 training updates the weights directly"
                                  : "4 B (fp32) " + sharding_text(t_.shards_optimizer, n,
                                                                  elements(t_.shards_optimizer)));
    g.gradients = bytes_of(elements(t_.shards_gradients), b.gradients, "gradients");
    explain("gradients", std::to_string(b.gradients) + " B " +
                             sharding_text(t_.shards_gradients, n, elements(t_.shards_gradients)));
    g.optimizer_states = optimizer_bytes(c_.optimizer, elements(t_.shards_optimizer), k_);
    explain("optimizer_states",
            optimizer_explain(c_.optimizer, k_) + " " +
                sharding_text(t_.shards_optimizer, n, elements(t_.shards_optimizer)));
    const bool buckets = t_.gradient_buffer == GradientBuffer::ddp_buckets && !c_.grad_bucket_view;
    g.grad_buckets = buckets ? bytes_of(m_.params, b.gradients, "gradient buckets") : Bytes{0};
    explain("grad_buckets",
            buckets ? std::to_string(b.gradients) + " B x " + format_thousands(m_.params) +
                          " params: DDP copies gradients into buckets"
            : t_.gradient_buffer == GradientBuffer::ddp_buckets
                ? "none: gradient_as_bucket_view makes gradients views of the buckets"
                : "none: this strategy keeps no bucketed gradient copy");
  }

  void offload() {
    if (c_.offload == Offload::none) return;
    auto& g = e_.gpu;
    auto& h = e_.cpu;
    h.master_weights = std::exchange(g.master_weights, Bytes{0});
    if (h.master_weights.value > 0) move_to_host("master_weights");
    h.optimizer_states = std::exchange(g.optimizer_states, Bytes{0});
    if (h.optimizer_states.value > 0) move_to_host("optimizer_states");
    h.gradients = bytes_of(elements(t_.shards_optimizer), 4, "host gradients");
    if (t_.shards_gradients) {
      g.gradients = Bytes{0};
      explain("gradients", "reduced partitions copied to host memory as fp32 (" +
                               format_thousands(elements(t_.shards_optimizer)) +
                               " params x 4 B) for the CPU optimizer step");
    }
    if (c_.offload == Offload::optimizer_and_params) {
      h.weights = bytes_of(shard_elements_, bytes_per_param(c_).weights, "host weights");
      if (t_.shards_weights) {
        g.weights = Bytes{0};
        move_to_host("weights");
      }
    }
  }

  void activations() {
    const auto a = estimate_activations(m_, c_);
    e_.activations_modelled = a.modelled;
    e_.seq_len = a.seq_len;
    e_.activation_terms = a.terms;
    e_.gpu.activations = a.total;
    model_output_ = a.model_output;
  }

  void add_buffer(std::string name, Bytes bytes) {
    if (bytes.value <= 0) return;
    e_.buffer_terms.push_back({std::move(name), bytes});
    e_.gpu.buffers += bytes;
  }

  void buffers() {
    const auto b = bytes_per_param(c_);
    const auto units = gather_units(m_);
    if (t_.shards_weights && !units.empty()) {
      const std::int64_t two = units[0] + (units.size() > 1 ? units[1] : 0);
      add_buffer("gathered parameters (unit in use + prefetched unit)",
                 bytes_of(two, b.weights, "gathered parameters"));
    }
    if (t_.gradient_buffer == GradientBuffer::unit_gradients && !units.empty()) {
      add_buffer("one unit's unsharded gradients before reduce-scatter",
                 bytes_of(units[0], b.gradients, "unit gradients"));
    }
    if (t_.gradient_buffer == GradientBuffer::zero_bucket) {
      const auto bucket = std::min(m_.params, k_.zero_reduce_bucket_elements);
      add_buffer("ZeRO contiguous reduce bucket (" + format_thousands(bucket) + " elements)",
                 bytes_of(bucket, b.gradients, "reduce bucket"));
    }
    if (t_.single_process && c_.dp_size > 1) {
      add_buffer("rank 0: outputs gathered from " + std::to_string(c_.dp_size) + " replicas",
                 Bytes{checked_mul(model_output_.value, c_.dp_size, "gathered outputs")});
      add_buffer("rank 0: replica gradients awaiting reduction",
                 bytes_of(m_.params, b.gradients, "replica gradients"));
    }
    if (c_.dp_size > 1) {
      const std::int64_t comms = t_.hybrid && c_.dp_size > e_.shard_degree ? 2 : 1;
      add_buffer(
          "NCCL buffers (" + std::to_string(comms) + " communicator" + (comms > 1 ? "s" : "") + ")",
          Bytes{checked_mul(comms, k_.nccl_bytes_per_communicator(), "NCCL buffers")});
    }
  }

  void overhead() {
    const Bytes context{k_.cuda_context_bytes};
    const Bytes allocated = e_.gpu.model_states() + e_.gpu.activations + e_.gpu.buffers;
    const Bytes slack = fraction_of(allocated, k_.allocator_slack_fraction);
    e_.overhead_terms = {{"CUDA context and library workspaces", context},
                         {"allocator slack", slack}};
    e_.gpu.overhead = context + slack;
  }

  void notes() {
    if (t_.single_process && c_.dp_size > 1) {
      e_.notes.push_back(
          "DataParallel: figures are rank 0's, which also holds the optimizer, "
          "the gathered outputs and the reduced gradients; the other GPUs hold "
          "replica weights, gradients and activations");
    }
    if (t_.hybrid) {
      const auto groups = c_.dp_size / e_.shard_degree;
      e_.notes.push_back(groups == 1
                             ? "hybrid sharding: all " + std::to_string(c_.dp_size) +
                                   " GPUs are in one node, so it shards like fsdp-full"
                             : "hybrid sharding: groups of " + std::to_string(e_.shard_degree) +
                                   " GPUs shard, " + std::to_string(groups) + " groups replicate");
    }
    attention_note();
    if (!e_.activations_modelled) {
      e_.notes.push_back(
          "activations and gathered units are not modelled for a bare parameter "
          "count; give --model for layer shapes");
    }
    if (m_.transformer && m_.transformer->positions == PositionKind::rotary &&
        e_.seq_len > m_.transformer->max_positions) {
      e_.notes.push_back("sequence length exceeds the model's max_position_embeddings");
    }
  }

  // Eager attention keeps s^2 scores per head; say how much FlashAttention would save.
  void attention_note() {
    if (!m_.transformer || c_.attention != Attention::eager ||
        c_.checkpointing != Checkpointing::none) {
      return;
    }
    const auto& t = *m_.transformer;
    const auto with =
        layer_activation_bytes(t, c_.micro_batch, e_.seq_len, c_.precision, Attention::eager, true);
    const auto without = layer_activation_bytes(t, c_.micro_batch, e_.seq_len, c_.precision,
                                                Attention::eager, false);
    const Bytes scores{checked_mul((with - without).value, t.num_layers, "activation bytes")};
    if (scores.value * 10 < e_.gpu.activations.value) return;
    e_.notes.push_back("eager attention scores are " + format_gib(scores) +
                       " of the activations; --attention flash (FlashAttention, PyTorch SDPA) "
                       "does not keep them");
  }

  const ModelDesc& m_;
  const TrainingConfig& c_;
  const OverheadConstants& k_;
  const StrategyTraits& t_;
  MemoryEstimate e_;
  std::int64_t shard_elements_ = 0;
  Bytes model_output_;
};

}  // namespace

MemoryEstimate estimate_memory(const ModelDesc& m, const TrainingConfig& c,
                               const OverheadConstants& k) {
  if (m.params <= 0) throw Error("model '" + m.name + "' has no parameters");
  return Builder(m, c, k).build();
}

FitVerdict check_fit(const MemoryEstimate& e, const GpuSpec& gpu) {
  FitVerdict v;
  v.gpu = gpu.name;
  v.capacity = gpu.memory;
  const Bytes need = e.gpu.total();
  v.fits = need <= v.capacity;
  v.margin = v.capacity - need;
  return v;
}

}  // namespace dtplan::cost
