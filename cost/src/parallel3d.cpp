// Tensor x pipeline x data parallelism: layout rules and time (see parallel3d.hpp); the
// stages' memory is memory3d.cpp's.
#include "dtplan/cost/parallel3d.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/named_value.hpp"
#include "layout_parts.hpp"
#include "rule_pricing.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {
namespace {

constexpr std::array<NamedValue<CpComm>, 3> kCpComms{{
    {CpComm::p2p, "p2p", "ring attention: K/V passed around the CP ring, overlapped"},
    {CpComm::all_gather, "all_gather", "K/V all-gathered before attention"},
    {CpComm::a2a, "a2a", "Ulysses: all-to-all of Q, K, V and the output"},
}};
constexpr std::array<NamedValue<DpSharding>, 4> kShardings{{
    {DpSharding::none, "none", "states replicated over dp x cp"},
    {DpSharding::optimizer, "optimizer", "optimizer states and main weights sharded (ZeRO-1)"},
    {DpSharding::gradients, "gradients", "+ gradients (ZeRO-2; FSDP2 without resharding)"},
    {DpSharding::parameters, "parameters", "+ parameters (ZeRO-3, FSDP)"},
}};
constexpr std::array<NamedValue<Framework>, 2> kFrameworks{{
    {Framework::megatron, "megatron", "Megatron-LM with its distributed optimizer"},
    {Framework::fsdp2, "fsdp2", "PyTorch FSDP2 as torchtitan runs it"},
}};

// `sources` with each message's elements counted in 16-bit units when `fp8` of `params` go
// at 1 B: a message carries fp8 / params of its elements in FP8, the rest in bf16.
RuleSources fp8_gathered(const RuleSources& sources, std::int64_t fp8, std::int64_t params) {
  RuleSources out = sources;
  const double saved = 0.5 * static_cast<double>(fp8) / static_cast<double>(params);
  out.messages = [messages = sources.messages, saved](MessageSplit split) {
    auto runs = messages(split);
    for (auto& run : runs) {
      run.elements -= std::llround(static_cast<double>(run.elements) * saved);
    }
    return runs;
  };
  return out;
}

// Parameters per overlapped bucket: the layout's, or Megatron-LM's default from the dp x cp
// group (distributed_data_parallel.py); expert parameters' buffers take the same size.
std::int64_t megatron_bucket(const Layout3D& l) {
  if (l.ddp_bucket_params > 0) return l.ddp_bucket_params;
  return std::max<std::int64_t>(40'000'000, 1'000'000 * l.dp * l.cp);
}

}  // namespace

std::string_view name_of(CpComm c) {
  return name_in(kCpComms, c);
}
CpComm parse_cp_comm(std::string_view text) {
  return value_in(kCpComms, text, "context-parallel exchange");
}
std::string_view name_of(DpSharding s) {
  return name_in(kShardings, s);
}
DpSharding parse_dp_sharding(std::string_view text) {
  return value_in(kShardings, text, "data-parallel sharding");
}
std::string_view name_of(Framework f) {
  return name_in(kFrameworks, f);
}
Framework parse_framework(std::string_view text) {
  return value_in(kFrameworks, text, "framework");
}

std::optional<std::string> optimizer_problem(Framework f, Optimizer o) {
  const bool adam = o == Optimizer::adam || o == Optimizer::adamw;
  const bool sgd = o == Optimizer::sgd || o == Optimizer::sgd_momentum;
  if (adam || (f == Framework::megatron && sgd)) return std::nullopt;
  return "{optimizer} " + std::string(name_of(o)) + ": " +
         (f == Framework::megatron ? "Megatron-LM runs adam (AdamW) or sgd (--optimizer)"
                                   : "torchtitan runs Adam or AdamW ([optimizer] name)");
}

std::optional<std::string> optimizer_impl_problem(Framework f, OptimizerImpl impl) {
  if (f != Framework::megatron ||
      (impl != OptimizerImpl::foreach && impl != OptimizerImpl::for_loop))
    return std::nullopt;
  return "{optimizer_impl} " + std::string(name_of(impl)) +
         ": Megatron-LM steps with a fused Adam (Transformer Engine or "
         "Apex); give framework or fused";
}

std::optional<std::string> stage_split_problem(const TransformerSpec& m, const Layout3D& l) {
  const std::int64_t p = l.pp, v = l.interleave, layers = m.num_layers;
  if (!l.stage_layers.empty()) {
    if (static_cast<std::int64_t>(l.stage_layers.size()) != p) {
      return "the layers per stage list has " + std::to_string(l.stage_layers.size()) +
             " entries for pp " + std::to_string(p);
    }
    std::int64_t sum = 0;
    for (const auto n : l.stage_layers) {
      if (n < v) {
        return "every stage needs at least one layer per model chunk (" + std::to_string(v) +
               "), got " + std::to_string(n);
      }
      sum += n;
    }
    if (sum != layers) {
      return "the layers per stage add up to " + std::to_string(sum) + ", the model has " +
             std::to_string(layers);
    }
    return std::nullopt;
  }
  if (layers % (p * v) == 0) return std::nullopt;
  if (p > 1 && (layers + 2) % (p * v) == 0 && (layers + 2) / p - 1 >= v) return std::nullopt;
  return std::to_string(layers) +
         " layers do not divide into pp x interleave = " + std::to_string(p * v) +
         " chunks, nor do " + std::to_string(layers) +
         " + 2 (the embedding and the loss counted as layers, as Megatron-LM can); give the "
         "layers of each stage ({pp_layers})";
}

std::vector<std::int64_t> layers_per_stage(const TransformerSpec& m, const Layout3D& l) {
  if (const auto why = stage_split_problem(m, l))
    throw Error("pp " + std::to_string(l.pp) + ": " + *why);
  if (!l.stage_layers.empty()) return l.stage_layers;
  const std::int64_t p = l.pp, layers = m.num_layers;
  if (layers % (p * l.interleave) == 0)
    return std::vector<std::int64_t>(static_cast<std::size_t>(p), layers / p);
  std::vector<std::int64_t> out(static_cast<std::size_t>(p), (layers + 2) / p);
  out.front() -= 1;
  out.back() -= 1;
  return out;
}

namespace {

template <class Fail>
void check_context_parallel(const TransformerSpec& m, const Layout3D& l, const Fail& fail) {
  if (l.attention != Attention::flash) {
    fail("context parallelism runs on fused attention kernels (Transformer Engine, SDPA), not " +
         std::string(name_of(l.attention)) + " attention ({attention} flash)");
  }
  if (m.sliding_window > 0 && m.sliding_window < l.seq_len) {
    fail("context parallelism with a sliding window (" + std::to_string(m.sliding_window) + " of " +
         std::to_string(l.seq_len) +
         " tokens) is not modelled: its ranks skip different key blocks; use {cp} 1");
  }
  if (l.seq_len % (2 * l.cp) != 0) {
    fail("sequence length " + std::to_string(l.seq_len) + " does not divide into 2 x cp = " +
         std::to_string(2 * l.cp) + " chunks (two per context-parallel rank, for causal balance)");
  }
  if (l.cp_comm == CpComm::a2a) {
    const std::int64_t heads = m.num_heads / l.tp, kv_heads = m.num_kv_heads / l.tp;
    const bool split_heads = heads % l.cp == 0;
    if (!split_heads || kv_heads % l.cp != 0) {
      fail("a2a context parallelism splits heads over cp: " +
           (split_heads ? std::to_string(kv_heads) + " key/value heads"
                        : std::to_string(heads) + " attention heads") +
           " per tensor-parallel rank do not divide by cp " + std::to_string(l.cp));
    }
  }
}

// The framework's sharding modes, and a shard group that divides the ranks holding the same
// weights.
template <class Fail>
void check_sharding(const Layout3D& l, const Fail& fail) {
  const std::int64_t ranks = l.dp * l.cp;
  if (l.framework == Framework::megatron && l.sharding > DpSharding::optimizer) {
    fail("Megatron-LM's distributed optimizer shards the optimizer states only (sharding " +
         std::string(name_of(l.sharding)) + " needs framework fsdp2)");
  }
  if (l.framework == Framework::fsdp2 && l.sharding < DpSharding::gradients) {
    fail("FSDP2 shards parameters and gradients (sharding gradients or parameters)");
  }
  if (l.shard_group < 0 || (l.shard_group > 0 && ranks % l.shard_group != 0)) {
    fail("shard group " + std::to_string(l.shard_group) +
         " does not divide dp x cp = " + std::to_string(ranks));
  }
  if (l.shard_group > 0 && l.shard_group != ranks && l.framework == Framework::megatron) {
    fail("hybrid sharding (a shard group smaller than dp x cp) needs framework fsdp2");
  }
  if (const auto why = optimizer_problem(l.framework, l.optimizer)) fail(*why);
  if (const auto why = optimizer_impl_problem(l.framework, l.optimizer_impl)) fail(*why);
  // Transformer Engine's recipes under Megatron-LM (--fp8-recipe), torchao's under torchtitan.
  if (l.framework == Framework::megatron && l.fp8 == Fp8Recipe::rowwise) {
    fail(
        "{fp8_recipe} rowwise is torchao's (fsdp2); Megatron-LM runs delayed, tensorwise, "
        "blockwise or mxfp8");
  }
  if (l.framework == Framework::fsdp2 && l.fp8 != Fp8Recipe::none &&
      l.fp8 != Fp8Recipe::tensorwise && l.fp8 != Fp8Recipe::rowwise) {
    fail("{fp8_recipe} " + std::string(name_of(l.fp8)) +
         " ({precision} fp8 means delayed): torchtitan's float8 runs tensorwise or rowwise "
         "scaling; give {fp8_recipe} tensorwise or rowwise");
  }
  if (l.fp8_param_gather && l.framework != Framework::megatron) {
    fail(
        "{fp8_param_gather} is Megatron-LM's (torchtitan's FP8 all-gather under FSDP2 is not "
        "modelled)");
  }
  if (l.fp8_param_gather && l.fp8 == Fp8Recipe::none)
    fail("{fp8_param_gather} needs an FP8 recipe ({fp8_recipe})");
  if (l.fp8_param_gather && l.sharding != DpSharding::optimizer)
    fail("{fp8_param_gather} needs Megatron-LM's distributed optimizer ({sharding} optimizer)");
  if (l.framework == Framework::megatron && l.offload == Offload::optimizer_and_params) {
    fail(
        "{offload} optimizer+params: Megatron-LM offloads the optimizer only "
        "(--optimizer-cpu-offload: main weights and optimizer states)");
  }
  if (l.framework == Framework::fsdp2 && l.offload == Offload::optimizer) {
    fail(
        "{offload} optimizer: FSDP2's CPUOffloadPolicy offloads parameters, gradients and "
        "optimizer states together (optimizer+params)");
  }
}

}  // namespace

// Megatron-LM's checks of its data-parallel overlap flags (arguments.py): param gather needs
// the distributed optimizer (and, before August 2024, the grad-reduce overlap; without it one
// bucket is gathered, priced as the gather after the step); FSDP2 overlaps by its own design.
std::optional<std::string> overlap_problem(const Layout3D& l) {
  if (l.tp_comm_overlap && l.framework != Framework::megatron)
    return "{tp_comm_overlap} is Megatron-LM's (Transformer Engine's userbuffers)";
  if (l.tp_comm_overlap && !l.sequence_parallel)
    return "{tp_comm_overlap} needs {sequence_parallel} (Megatron-LM asserts it; tp > 1)";
  if (!l.overlap_grad_reduce && !l.overlap_param_gather && l.ddp_bucket_params == 0 &&
      !l.grad_reduce_bf16)
    return std::nullopt;
  if (l.framework != Framework::megatron) {
    const char* flag = l.overlap_grad_reduce    ? "{overlap_grad_reduce}"
                       : l.overlap_param_gather ? "{overlap_param_gather}"
                       : l.grad_reduce_bf16     ? "{grad_reduce_in_bf16}"
                                                : "{ddp_bucket_size}";
    return std::string(flag) +
           " is Megatron-LM's: FSDP2 reduces and gathers block by block alongside compute, "
           "gradients in fp32 as torchtitan does";
  }
  if (l.overlap_param_gather && l.sharding != DpSharding::optimizer)
    return "{overlap_param_gather} needs Megatron-LM's distributed optimizer ({sharding} "
           "optimizer)";
  if (l.grad_reduce_bf16 && l.precision != Precision::bf16)
    return "{grad_reduce_in_bf16} needs {precision} bf16";
  if (l.ddp_bucket_params < 0) return "{ddp_bucket_size} must be positive (parameters per bucket)";
  if (l.ddp_bucket_params > 0 && !l.overlap_grad_reduce)
    return "{ddp_bucket_size} needs {overlap_grad_reduce}: without it Megatron-LM reduces the "
           "gradients in one bucket";
  return std::nullopt;
}

std::optional<std::string> expert_layout_problem(const TransformerSpec& m, const Layout3D& l) {
  if (!(l.capacity_factor >= 0)) return "{capacity_factor} must be 0 (dropless) or at least 1";
  if (l.capacity_factor > 0 && !m.moe.active()) {
    return "{capacity_factor} needs a mixture-of-experts model";
  }
  // Below 1 the experts drop tokens (work dtplan would count as done); above E/k an expert's
  // capacity exceeds every token it could receive.
  const double most = m.moe.active() ? static_cast<double>(m.moe.experts) /
                                           static_cast<double>(m.moe.experts_per_token)
                                     : 0;
  if (l.capacity_factor > 0 && (l.capacity_factor < 1 || l.capacity_factor > most)) {
    char text[96];
    std::snprintf(text, sizeof text, "%g: padded capacity is priced from 1 to experts/k = %g",
                  l.capacity_factor, most);
    return "{capacity_factor} " + std::string(text) +
           " (below 1 tokens are dropped, which is not modelled)";
  }
  if (l.capacity_factor > 0 && l.framework == Framework::fsdp2) {
    return "{capacity_factor}: torchtitan's experts are dropless";
  }
  if (l.overlap_ep_comm) {
    // Megatron-LM's TransformerConfig checks (transformer_config.py, __post_init__).
    if (l.framework != Framework::megatron || !m.moe.active() || l.ep < 2)
      return "{overlap_ep_comm} needs Megatron-LM's expert parallelism ({ep} > 1)";
    if (l.pp > 1 && l.interleave < 2)
      return "{overlap_ep_comm} with {pp} > 1 needs an interleaved schedule ({interleave} > 1)";
    if (l.recompute == Checkpointing::full)
      return "{overlap_ep_comm}: Megatron-LM refuses it with full recomputation";
  }
  if (l.deepep && (l.framework != Framework::megatron || !m.moe.active() || l.ep < 2))
    return "{deepep} needs Megatron-LM's expert parallelism ({ep} > 1)";
  if (l.deepep && l.expert_tp() != 1)
    return "{deepep} is priced for whole experts ({etp} 1): each rank holds its experts whole";
  if (l.ep == 1 && l.etp == 0) return std::nullopt;
  if (l.tp > 1 && !l.sequence_parallel && (l.ep > 1 || l.expert_tp() != l.tp)) {
    return "experts folded apart from tensor parallelism dispatch each rank's own tokens: "
           "{sequence_parallel} is needed with tp > 1";
  }
  if (!m.moe.active()) {
    return "expert parallelism ({ep}, {etp}) needs a mixture-of-experts model; " +
           std::string(m.model_type.empty() ? "this one" : m.model_type) + " has a dense MLP";
  }
  if (l.ep < 1 || l.etp < 0) return "{ep} must be positive and {etp} positive (or 0: tp)";
  if (m.moe.experts % l.ep != 0) {
    return std::to_string(m.moe.experts) + " experts do not divide over ep " + std::to_string(l.ep);
  }
  const std::int64_t ranks = l.tp * l.cp * l.dp;
  if (ranks % (l.expert_tp() * l.ep) != 0) {
    return "etp x ep = " + std::to_string(l.expert_tp() * l.ep) +
           " does not divide the stage's tp x cp x dp = " + std::to_string(ranks) +
           " GPUs the experts fold onto";
  }
  // torchtitan's expert parallelism borrows its ranks from FSDP and TP, each expert whole
  // (parallel_dims.py: efsdp = dp_shard x cp x tp / ep); without it the experts split over tp.
  const std::int64_t titan_etp = l.ep > 1 ? 1 : l.tp;
  if (l.framework == Framework::fsdp2 && l.expert_tp() != titan_etp) {
    return "torchtitan " +
           std::string(l.ep > 1 ? "keeps each expert whole under expert parallelism"
                                : "splits the experts over tp without expert parallelism") +
           " ({etp} " + std::to_string(titan_etp) + ")";
  }
  if (l.shard_group > 0 && l.shard_group != l.dp * l.cp) {
    return "hybrid sharding with expert parallelism is not modelled ({dp_shard})";
  }
  return std::nullopt;
}

std::optional<std::string> recompute_problem(const TransformerSpec& m, const Layout3D& l) {
  if (l.checkpoint_every != 1) {
    const std::string every = "{checkpoint_every} " + std::to_string(l.checkpoint_every);
    if (l.checkpoint_every < 1) return every + ": must be a positive integer";
    if (l.recompute != Checkpointing::full)
      return every + " needs {checkpointing} full: it wraps every Nth block whole";
    if (l.framework == Framework::megatron)
      return every +
             ": Megatron-LM recomputes the first blocks of a stage "
             "(--recompute-method block), not every Nth; use fsdp2";
  }
  const auto& r = l.recompute_modules;
  if (r.is_default()) return std::nullopt;
  const std::string named = "{recompute_modules} " + text_of(r);
  if (l.recompute != Checkpointing::selective)
    return named + " needs {checkpointing} selective (Megatron-LM's --recompute-granularity)";
  if (l.framework != Framework::megatron)
    return named + " are Megatron-LM's; torchtitan's selective checkpointing is per op";
  const auto missing = [&](RecomputeModule module, const char* what) {
    return "{recompute_modules} " + std::string(name_in(kRecomputeModules, module)) + " needs " +
           what + ", which " + (m.moe.active() ? "this mixture" : "this model") + " lacks";
  };
  if (r.has(RecomputeModule::mla_up_proj) && !m.mla.active())
    return missing(RecomputeModule::mla_up_proj, "latent attention (MLA)");
  if (r.has(RecomputeModule::moe) && !m.moe.active())
    return missing(RecomputeModule::moe, "a mixture of experts");
  if (r.has(RecomputeModule::moe_act) && !m.moe.active())
    return missing(RecomputeModule::moe_act, "a mixture of experts");
  if (r.has(RecomputeModule::shared_experts) && m.moe.shared_ffn_size == 0)
    return missing(RecomputeModule::shared_experts, "a shared expert");
  if (r.has(RecomputeModule::mlp) && m.moe.active() && m.moe.first_dense_layers == 0)
    return missing(RecomputeModule::mlp, "dense MLP blocks (mlp leaves the experts alone)");
  if (r.has(RecomputeModule::moe) && l.overlap_ep_comm)
    return "{recompute_modules} moe: Megatron-LM refuses it with {overlap_ep_comm}";
  if (l.fp8 == Fp8Recipe::delayed) {
    for (const auto module : {RecomputeModule::layernorm, RecomputeModule::moe_act}) {
      if (r.has(module))
        return "{recompute_modules} " + std::string(name_in(kRecomputeModules, module)) +
               ": Megatron-LM refuses moe_act and layernorm under FP8 delayed scaling "
               "({fp8_recipe})";
    }
  }
  return std::nullopt;
}

std::optional<std::string> expert_exchange_problem(const Layout3D& l, std::int64_t gpus_per_node) {
  if (l.ep <= 1 || gpus_per_node < 1) return std::nullopt;
  const std::int64_t span = l.expert_tp() * l.ep;
  const std::int64_t priced =
      span <= gpus_per_node ? l.ep : (span + gpus_per_node - 1) / gpus_per_node * gpus_per_node;
  if (priced <= kMaxAllToAllGpus) return std::nullopt;
  return "the experts' all-to-all over etp x ep = " + std::to_string(span) + " GPUs is priced on " +
         std::to_string(priced) + " GPUs of whole nodes, beyond the " +
         std::to_string(kMaxAllToAllGpus) +
         " an all-to-all is modelled on (pair by pair); take a smaller ep or etp";
}

void check_layout(const TransformerSpec& m, const Layout3D& l, std::int64_t gpus_per_node) {
  const auto fail = [&](const std::string& why) {
    throw Error("tp " + std::to_string(l.tp) + (l.cp > 1 ? " x cp " + std::to_string(l.cp) : "") +
                " x pp " + std::to_string(l.pp) + " x dp " + std::to_string(l.dp) + ": " + why);
  };
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.cp < 1 || l.interleave < 1 || l.micro_batch < 1 ||
      l.micro_batches < 1) {
    fail("sizes must be positive");
  }
  if (l.cp > 1) check_context_parallel(m, l, fail);
  if (m.num_heads % l.tp != 0) {
    fail(std::to_string(m.num_heads) + " attention heads do not divide by tp");
  } else if (m.num_kv_heads % l.tp != 0) {
    fail(std::to_string(m.num_kv_heads) + " key/value heads (of " + std::to_string(m.num_heads) +
         " attention heads) do not divide by tp: each tensor-parallel rank needs whole "
         "key/value heads");
  }
  if (const auto why = expert_layout_problem(m, l)) fail(*why);
  if (const auto why = expert_exchange_problem(l, gpus_per_node)) fail(*why);
  if (const auto why = recompute_problem(m, l)) fail(*why);
  if (const auto why = overlap_problem(l)) fail(*why);
  if (m.moe.active() && m.moe.expert_ffn_size % l.expert_tp() != 0)
    fail("the experts' intermediate size " + std::to_string(m.moe.expert_ffn_size) +
         " does not divide by the expert tensor parallel size " + std::to_string(l.expert_tp()) +
         ": each expert-tensor-parallel rank needs an equal slice of every expert");
  if (m.moe.active() && m.moe.shared_ffn_size % l.tp != 0)
    fail("the shared expert's intermediate size " + std::to_string(m.moe.shared_ffn_size) +
         " does not divide by tp");
  if (m.moe.active() && l.framework == Framework::megatron && l.tp > 1 && !l.sequence_parallel)
    fail(
        "Megatron-LM's MoE layer with tensor parallelism needs sequence parallelism (it refuses "
        "to train without: {sequence_parallel})");
  if (l.tp > gpus_per_node || l.expert_tp() > gpus_per_node)
    fail(std::string(l.tp > gpus_per_node ? "tensor" : "expert tensor") +
         " parallelism must stay inside a node of " + std::to_string(gpus_per_node) + " GPUs");
  if (const auto why = stage_split_problem(m, l)) fail(*why);
  if (l.pp > 1) {
    if (const auto why =
            schedule_problem(l.pipeline_schedule(), l.pp, l.interleave, l.micro_batches)) {
      fail("schedule " + std::string(name_of(l.pipeline_schedule())) + ": " + *why);
    }
  } else if (l.interleave > 1) {
    fail("interleaving needs pp > 1");
  }
  if (l.sequence_parallel && l.tp == 1) fail("sequence parallelism needs tp > 1");
  if (l.sequence_parallel && (l.seq_len / l.cp) % l.tp != 0) {
    fail("sequence parallelism splits each rank's " + std::to_string(l.seq_len / l.cp) +
         " tokens over the tensor-parallel ranks: they do not divide by tp");
  }
  check_sharding(l, fail);
}
struct Model3D::Cache {
  // Whole model: (b, recompute, sequence, precision, attention); stage: (b, recompute, shard
  // shape, tokens per rank, precision, attention, eager layer kernels).
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int, int>, ComputeTime> compute;
  // (t, layers, ep, etp, routed rows over the balanced share, dense first layers, with the
  // multi-token prediction modules, the vocabulary padded as Megatron-LM pads it)
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, double,
                           std::int64_t, bool, bool>;
  std::map<Shape, ModelDesc> shards;
  std::map<std::tuple<std::int64_t, std::int64_t, Shape, std::int64_t, int, int, bool>, ComputeTime>
      stage;
  std::map<std::pair<std::int64_t, std::int64_t>, double> tp_all_reduce;  // (t, bytes)
  // (t, b, tokens per rank, precision, FP8 recipe)
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int, int>, BlockLinearTimes>
      linears;
  // (collective, group span in ranks, group size, bytes)
  std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>, CollectiveEstimate> group;
  std::map<bool, double> p2p_Bps;  // across nodes
  // What data_parallel_ops reads: the stage's layers, parameters, experts and dense first
  // blocks; tp, etp, ep, cp, dp, whether pipelined, sharding, shard group, framework,
  // precision, optimizer, micro-batches, Megatron-LM's overlap, bf16-gradient and FP8-gather
  // flags, and its bucket size.
  std::map<std::array<std::int64_t, 18>, std::vector<CommOp>> dp_ops;
  std::shared_ptr<CommContext> comm;  // routes and rings shared by every group size
};

Model3D::Model3D(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                 const GpuSpec& gpu, const ComputeConstants& k, std::shared_ptr<CommContext> comm)
    : m_(m), t_(t), table_(table), gpu_(gpu), k_(k), cache_(std::make_unique<Cache>()) {
  (void)spec_of(m);
  cache_->comm = comm ? std::move(comm) : std::make_shared<CommContext>(t);
}

Model3D::~Model3D() = default;

std::int64_t padded_vocab_shard(std::int64_t vocab, std::int64_t tp, bool megatron_padding) {
  if (megatron_padding) {
    const std::int64_t unit = 128 * tp;
    return (vocab + unit - 1) / unit * unit / tp;
  }
  return (vocab + tp - 1) / tp;
}

namespace {

// What one GPU of a stage of `layers` blocks computes, timed as if it were the last stage:
// those blocks with 1/t of the heads, key/value heads and MLP width, and 1/t of the LM head --
// the GEMM shapes tensor parallelism leaves it, so small-GEMM inefficiency shows (the hidden
// size, norms and residuals stay whole).
ModelDesc shard_of(const ModelDesc& m, const Layout3D& l, std::int64_t layers, std::int64_t dense,
                   bool prediction_modules) {
  auto s = *m.transformer;
  const std::int64_t t = l.tp;
  s.num_heads /= t;
  s.num_kv_heads /= t;
  s.ffn_size /= t;
  // Routed experts: experts / ep of them, 1/etp of each one's width, the routed copies of the
  // tokens of etp sequence-parallel ranks (the shard's tokens are those of tp).
  s.moe.expert_ffn_size /= l.expert_tp();
  s.moe.local_experts = s.moe.experts / l.ep;
  s.moe.routed_rows_share =
      static_cast<double>(l.expert_tp()) / static_cast<double>(t) * l.expert_rows_factor();
  s.moe.shared_ffn_size /= t;
  s.vocab_size = padded_vocab_shard(s.vocab_size, l.tp, l.framework == Framework::megatron);
  if (s.window_pattern_layers == 0) s.window_pattern_layers = s.num_layers;
  s.num_layers = layers;
  s.moe.first_dense_layers = dense;
  if (!prediction_modules) s.mtp_layers = 0;  // they sit on the last stage only
  return model_from_transformer(s, m.name + " shard", "tensor/pipeline shard");
}

double p2p_bandwidth_Bps(const Topology& t, const InterconnectTable& table, bool across_nodes,
                         const std::shared_ptr<CommContext>& comm) {
  if (across_nodes && t.node().network) {
    const auto& nic = table.find(t.node().network->link_class);
    return nic.bandwidth_Bps * nic.efficiency;
  }
  CommModel node(t, table, std::min<std::int64_t>(t.gpus_per_node(), t.gpu_count()), comm);
  return node.rings().bandwidth_Bps;
}

// Point-to-point latency of one send: NCCL's p2p path inside a node, through the NIC across.
double p2p_latency_s(bool across_nodes) {
  return across_nodes ? 10e-6 : 5e-6;
}

// A collective over a group of `ranks` GPUs spread evenly over `span` consecutive GPUs (ranks
// ordered tp, cp, dp, pp, so span / ranks groups interleave with it):
//   - inside a node (span fits): the first `ranks` GPUs; each GPU has its own NVLink
//     bandwidth, so interleaved groups do not slow each other;
//   - across nodes, contiguous (span = ranks): the whole nodes, NCCL's rings over them;
//   - across nodes, strided: k = ranks / nodes of the group's GPUs in each node, each with its
//     own NIC, which the interleaved groups' GPUs do not share. NCCL runs a flat ring over
//     the r = ranks GPUs with k channels, one per NIC: each NIC carries (r-1)/r of 1/k of the
//     bytes (twice for an all-reduce). Priced on the rings of one GPU per node through each
//     rail (which carry (n-1)/n of theirs over n nodes) with the bytes scaled to match; the
//     ring's r - 1 steps of latency are counted as the n - 1 network hops (exact for k = 1,
//     one GPU per node); an all-to-all as over the whole nodes (below).
CollectiveEstimate group_estimate_of(const Topology& t, const InterconnectTable& table,
                                     Collective c, std::int64_t span, std::int64_t ranks,
                                     std::int64_t bytes, const std::shared_ptr<CommContext>& comm) {
  const std::int64_t per_node = t.gpus_per_node();
  if (span <= per_node) return CommModel(t, table, ranks, comm).estimate(c, Bytes{bytes});
  const std::int64_t nodes = (span + per_node - 1) / per_node;
  CommModel whole(t, table, nodes * per_node, comm);
  // An all-to-all's rank sends (n - 1)/n of its bytes to other nodes through its own NIC
  // whether its group fills the nodes or strides through them: priced on the whole nodes
  // (with their peers' per-message latency, an upper bound for a strided group).
  if (span == ranks || c == Collective::all_to_all) return whole.estimate(c, Bytes{bytes});
  const std::int64_t k = std::max<std::int64_t>(1, ranks / nodes);
  const double r = static_cast<double>(ranks), n = static_cast<double>(nodes);
  const double scale = ((r - 1) / r) / ((n - 1) / n) / static_cast<double>(k);
  return whole.replica_estimate(
      c, Bytes{static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) * scale))});
}

// The stage's compute with context parallelism: GEMMs and element-wise work are those of the
// rank's s/cp tokens (as computed), attention cp times that of s/cp tokens (1/cp of the whole
// sequence's, the causal load balanced by the two-chunk split).
ComputeTime with_context_parallel(ComputeTime st, std::int64_t cp) {
  const double extra = static_cast<double>(cp - 1);
  st.forward_s += extra * st.attention_forward_s;
  st.backward_s += extra * (st.attention_s - st.attention_forward_s);
  st.recompute_s += extra * st.attention_recompute_s;
  st.attention_s *= static_cast<double>(cp);
  st.attention_forward_s *= static_cast<double>(cp);
  st.attention_recompute_s *= static_cast<double>(cp);
  return st;
}

// The fused attention a framework runs: Megatron-LM's Transformer Engine (cuDNN), FSDP2's
// PyTorch scaled_dot_product_attention (FlashAttention-2).
AttentionLibrary attention_library(const Layout3D& l) {
  return l.framework == Framework::megatron ? AttentionLibrary::transformer_engine
                                            : AttentionLibrary::pytorch;
}

// The attention settings and FP8 recipe of a cached compute time, as one number.
int attention_key(const Layout3D& l, AttentionLibrary lib) {
  return ((static_cast<int>(l.attention) * 2 + static_cast<int>(lib)) * 8 +
          static_cast<int>(l.attention_kernel)) *
             8 +
         static_cast<int>(l.fp8);
}

// The recompute mode and, under selective recomputation, its modules, as one number.
std::int64_t recompute_key(const Layout3D& l) {
  return (l.checkpoint_every * 4 + static_cast<std::int64_t>(l.recompute)) * 256 +
         static_cast<std::int64_t>(l.recompute_modules.bits);
}

// The share of a stage's `layers` blocks full recomputation repeats: all of them, or every
// Nth (checkpoint_every); none without full recomputation.
double full_recompute_share(const Layout3D& l, double layers) {
  if (l.recompute != Checkpointing::full) return 0.0;
  return checkpointed_share(static_cast<std::int64_t>(std::llround(layers)), l.checkpoint_every);
}

}  // namespace

ComputeTime Model3D::stage_compute(const Layout3D& l, std::int64_t stage_layers, std::int64_t dense,
                                   bool prediction_modules) {
  TrainingConfig c;
  c.precision = l.precision;
  c.micro_batch = l.micro_batch;
  c.seq_len = l.seq_len / l.cp;  // tokens of one rank
  c.checkpointing = l.recompute;
  c.recompute_modules = l.recompute_modules;
  c.selective_policy = selective_policy_of(l.framework);
  c.checkpoint_every = l.checkpoint_every;
  c.attention = l.attention;
  c.attention_kernel = l.attention_kernel;
  c.fp8 = l.fp8;
  c.optimizer = Optimizer::adamw;
  c.layer_kernels = l.layer_kernels;
  // FSDP2 wraps each block and the stage's root: in eager mode its hooks cost host time
  // (pace_by_host); the strategy prices nothing else of a stage's compute.
  c.strategy = l.framework == Framework::fsdp2 ? Strategy::fsdp_full : Strategy::ddp;
  auto& cache = *cache_;
  const auto shape =
      std::make_tuple(l.tp, stage_layers, l.ep, l.expert_tp(), l.expert_rows_factor(), dense,
                      prediction_modules, l.framework == Framework::megatron);
  if (!cache.shards.count(shape))
    cache.shards.emplace(shape, shard_of(m_, l, stage_layers, dense, prediction_modules));
  const auto lib = attention_library(l);
  const auto key = std::make_tuple(l.micro_batch, recompute_key(l), shape, c.seq_len,
                                   static_cast<int>(l.precision), attention_key(l, lib),
                                   l.layer_kernels == LayerKernels::eager);
  if (!cache.stage.count(key))
    cache.stage[key] = estimate_compute(cache.shards.at(shape), c, gpu_, k_, lib);
  return cache.stage.at(key);
}

BlockLinearTimes Model3D::linear_times(const Layout3D& l) {
  const auto key = std::make_tuple(l.tp, l.micro_batch, l.seq_len / l.cp,
                                   static_cast<int>(l.precision), static_cast<int>(l.fp8));
  auto& cached = cache_->linears;
  if (const auto found = cached.find(key); found != cached.end()) return found->second;
  const auto shard = shard_of(m_, l, 1, 0, false);  // one block's widths on one rank
  TrainingConfig c;
  c.precision = l.precision;
  c.micro_batch = l.micro_batch;
  c.seq_len = l.seq_len / l.cp;
  c.attention_kernel = l.attention_kernel;
  c.fp8 = l.fp8;
  return cached.emplace(key, block_linear_times(*shard.transformer, c, gpu_, k_)).first->second;
}

CollectiveEstimate Model3D::group_estimate(Collective c, std::int64_t span, std::int64_t ranks,
                                           std::int64_t bytes) {
  auto& cache = *cache_;
  const auto key = std::make_tuple(static_cast<int>(c), span, ranks, bytes);
  const auto found = cache.group.find(key);
  if (found != cache.group.end()) return found->second;
  return cache.group.emplace(key, group_estimate_of(t_, table_, c, span, ranks, bytes, cache.comm))
      .first->second;
}

CpExchange Model3D::cp_exchange(const Layout3D& l, const ComputeTime& stage, double layers) {
  CpExchange out;
  if (l.cp == 1) return out;
  const auto& s = *m_.transformer;
  const auto e = static_cast<double>(recipe_of(l).activation_bytes());
  const auto tokens = static_cast<double>(tokens_per_rank(l) * l.micro_batch);
  // Per tensor-parallel rank: Q and the attention output (value-head wide), K and V.
  const auto tp = static_cast<double>(l.tp);  // the heads divide by it (check_layout)
  const double q = static_cast<double>(s.q_size()) / tp, o = static_cast<double>(s.o_size()) / tp;
  const double k = static_cast<double>(s.kv_size()) / tp, v = static_cast<double>(s.v_size()) / tp;
  const double kv_bytes = tokens * (k + v) * e;  // this rank's K and V chunk
  const double cp = static_cast<double>(l.cp);
  const std::int64_t span = l.tp * l.cp;
  switch (l.cp_comm) {
    case CpComm::p2p: {
      const bool across = t_.nodes() > 1 && span > t_.gpus_per_node();
      auto& cache = *cache_;
      if (!cache.p2p_Bps.count(across))
        cache.p2p_Bps[across] = p2p_bandwidth_Bps(t_, table_, across, cache.comm);
      const double bw = cache.p2p_Bps.at(across), lat = p2p_latency_s(across);
      // Attention of one chunk pair (the stage's attention at s/cp tokens, per layer).
      const double fwd_pair = stage.attention_forward_s / layers;
      const double bwd_pair =
          (stage.attention_s - stage.attention_forward_s - stage.attention_recompute_s) / layers;
      out.forward_s = (cp - 1) * std::max(0.0, lat + kv_bytes / bw - fwd_pair);
      out.backward_s = (cp - 1) * std::max(0.0, lat + 2 * kv_bytes / bw - bwd_pair);
      break;
    }
    case CpComm::all_gather: {
      const auto gathered = static_cast<std::int64_t>(cp * kv_bytes);
      const double ag = group_collective_s(Collective::all_gather, span, l.cp, gathered);
      const double rs = group_collective_s(Collective::reduce_scatter, span, l.cp, gathered);
      out.forward_s = ag;
      out.backward_s = ag + rs;
      break;
    }
    case CpComm::a2a: {
      const auto per_rank = static_cast<std::int64_t>(tokens * (q + o + k + v) * e);
      out.forward_s = group_collective_s(Collective::all_to_all, span, l.cp, per_rank);
      out.backward_s = out.forward_s;
      break;
    }
  }
  // Recomputing attention (full, of every block or every Nth, or Megatron-LM's selective
  // with core_attn; torchtitan's per-op policy saves the attention's output) repeats the
  // forward exchange.
  const bool core_again = l.recompute == Checkpointing::selective &&
                          selective_policy_of(l.framework) == SelectivePolicy::modules &&
                          l.recompute_modules.has(RecomputeModule::core_attn);
  out.backward_s += out.forward_s * (core_again ? 1.0 : full_recompute_share(l, layers));
  out.forward_s *= layers;
  out.backward_s *= layers;
  return out;
}

namespace {

// Whether the experts are laid out apart from the dense part (expert parallelism, or an
// expert tensor-parallel size other than tp): tokens then travel to their experts by
// all-to-all (Megatron-LM's alltoall dispatcher, torchtitan's expert parallelism) instead of
// being gathered with the tensor-parallel group.
bool experts_folded(const TransformerSpec& s, const Layout3D& l) {
  return s.moe.active() && (l.ep > 1 || l.expert_tp() != l.tp);
}

}  // namespace

double expected_nodes_per_token(std::int64_t experts, std::int64_t k, std::int64_t nodes,
                                std::int64_t groups, std::int64_t groups_per_token) {
  if (nodes <= 1) return 1.0;
  // nodes x P(a node is touched) = nodes x (1 - C(n - n / nodes, picks) / C(n, picks)).
  const auto touched = [nodes](std::int64_t n, std::int64_t picks) {
    const std::int64_t elsewhere = n - n / nodes;  // of the n, those not on a given node
    double none = 1.0;
    for (std::int64_t i = 0; i < picks && none > 0; ++i) {
      none = elsewhere - i <= 0
                 ? 0.0
                 : none * static_cast<double>(elsewhere - i) / static_cast<double>(n - i);
    }
    return static_cast<double>(nodes) * (1.0 - none);
  };
  if (groups > 0 && groups_per_token > 0 && groups_per_token < groups && groups % nodes == 0)
    return std::min(touched(groups, groups_per_token), touched(experts, k));
  return touched(experts, k);
}

// One dispatch (or combine) of `bytes` per rank: an all-to-all over the ep ranks; with DeepEP
// across nodes, the network carries a token once per node its experts are on (the bytes
// scaled by nodes per token over k) while NVLink forwards every copy inside the node, the two
// pipelined (the longer sets the time).
double Model3D::token_exchange_s(const Layout3D& l, std::int64_t bytes) {
  const auto& moe = m_.transformer->moe;
  const std::int64_t span = l.expert_tp() * l.ep;  // etp 1 under DeepEP: span = ep
  const std::int64_t nodes = (span + t_.gpus_per_node() - 1) / t_.gpus_per_node();
  if (!l.deepep || nodes <= 1) return group_collective_s(Collective::all_to_all, span, l.ep, bytes);
  const double per_token = expected_nodes_per_token(moe.experts, moe.experts_per_token, nodes,
                                                    moe.groups, moe.groups_per_token);
  const auto network = static_cast<std::int64_t>(std::ceil(
      static_cast<double>(bytes) * per_token / static_cast<double>(moe.experts_per_token)));
  const std::int64_t in_node = l.ep / nodes;
  const double forward_s =
      in_node > 1 ? group_collective_s(Collective::all_to_all, span / nodes, in_node, bytes) : 0.0;
  return std::max(group_collective_s(Collective::all_to_all, span, l.ep, network), forward_s);
}

// Per MoE layer and micro-batch, each rank holding T = b s / (cp t) tokens (sequence-parallel
// slices) sends the k copies of them to the ranks of their experts and gets the outputs back:
// an all-to-all of k T h e bytes over the ep ranks for dispatch and one for combine
// (expert-parallel ranks are etp apart: Megatron-LM orders expert ranks etp, ep, edp); with
// etp > 1 the received rows are all-gathered over the etp ranks before the experts and
// reduce-scattered after (k T etp h e bytes gathered). The backward sends the gradients the
// same way; recomputation repeats the forward. None of it overlaps compute (Megatron-LM's
// default) unless the layout asks for its batch-level overlap (overlapped(), in time());
// DeepEP prices the dispatch as token_exchange_s says. Routing is taken as balanced: every
// rank sends and receives the same bytes.
CommPhaseTime Model3D::expert_exchange(const Layout3D& l, double layers) {
  CommPhaseTime out;
  const auto& s = *m_.transformer;
  if (!experts_folded(s, l)) return out;
  const auto e = static_cast<double>(recipe_of(l).activation_bytes());
  const double tokens =
      static_cast<double>(tokens_per_rank(l) * l.micro_batch) / static_cast<double>(l.tp);
  const double rows =
      tokens * static_cast<double>(s.moe.experts_per_token) * l.expert_rows_factor();
  const auto bytes =
      static_cast<std::int64_t>(std::ceil(rows * static_cast<double>(s.hidden_size) * e));
  const std::int64_t etp = l.expert_tp();
  double one_way = 0;  // dispatch and combine, one direction
  if (l.ep > 1) one_way += 2 * token_exchange_s(l, bytes);
  if (etp > 1) {
    one_way += group_collective_s(Collective::all_gather, etp, etp, bytes * etp) +
               group_collective_s(Collective::reduce_scatter, etp, etp, bytes * etp);
  }
  out.forward_s = layers * one_way;
  out.backward_s = layers * one_way * (1 + full_recompute_share(l, layers));
  return out;
}

namespace {

// Transformer Engine's default num_sm for the pipeline and bulk userbuffers kernels
// (module/base.py, initialize_ub).
constexpr double kUserbufferSms = 16;

// The tensor-parallel collectives of one block that Transformer Engine's userbuffers leave
// exposed (Megatron-LM's --tp-comm-overlap, with TE's default method per GEMM: module/base.py,
// initialize_ub). `c` is one all-gather or reduce-scatter of the block's activations over the
// tp ranks; `g` the block's forward GEMMs on one rank, each backward product as long.
// - Ring exchange (the query/key/value and first MLP Linears' input all-gather forward; the
//   output projection's and last MLP Linear's output-gradient all-gather backward): tp chunks,
//   each chunk's GEMM running while the next chunk arrives, so the transfer hides behind
//   (tp - 1)/tp of the GEMM.
// - Pipeline (the output projection's and last MLP Linear's reduce-scatter forward): the GEMM
//   in 4 chunks, each chunk's reduce-scatter behind the next chunk's GEMM; the last chunk's is
//   exposed.
// - Bulk (backward of the first Linears): the input re-gathered behind the input-gradient GEMM
//   and that gradient reduce-scattered behind the weight-gradient GEMM.
// A mixture's MLP runs no userbuffers: its mlp_collectives collectives each way stay exposed.
// The pipeline and bulk kernels run on 16 streaming multiprocessors (TE's default num_sm),
// which the GEMM beside them lacks: `slow` = SMs / (SMs - 16) on a GPU whose SM count the
// catalogue states, else 1. The pipelined GEMM runs on the others throughout (set_sm_margin);
// the bulk one only while the transfer lasts. Ring exchange copies with the copy engines.
CommPhaseTime tp_overlap_exposed(double c, const BlockLinearTimes& g, std::int64_t tp,
                                 double mlp_collectives, double slow) {
  const double n = static_cast<double>(tp);
  const auto ring = [&](double gemm) { return std::max(0.0, c - gemm * (n - 1) / n); };
  const auto pipeline = [&](double gemm) {
    return c / 4 + 0.75 * std::max(0.0, c - slow * gemm) + (slow - 1) * gemm;
  };
  // The GEMM does c / slow of its work while the transfer runs; the rest at full speed.
  const auto bulk = [&](double gemm) { return slow * gemm <= c ? c - gemm : c * (1 - 1 / slow); };
  CommPhaseTime out;
  out.forward_s = ring(g.qkv_s) + pipeline(g.proj_s);
  out.backward_s = ring(g.proj_s) + 2 * bulk(g.qkv_s);
  if (mlp_collectives > 0) {
    out.forward_s += mlp_collectives * c;
    out.backward_s += mlp_collectives * c;
  } else if (g.fc1_s > 0) {
    out.forward_s += ring(g.fc1_s) + pipeline(g.fc2_s);
    out.backward_s += ring(g.fc2_s) + 2 * bulk(g.fc1_s);
  }
  return out;
}

// The token exchange left exposed when Megatron-LM merges the forward of each micro-batch (or
// model chunk) with the backward of the one before it: the forward's all-to-alls hide behind
// that backward's compute and the backward's behind the forward's, each as far as the compute
// lasts; the passes of the pipeline's warm-up and cool-down have no partner. Per pass.
CommPhaseTime overlapped(const CommPhaseTime& ep, const ComputeTime& stage, const Layout3D& l) {
  const std::int64_t passes = std::max<std::int64_t>(l.micro_batches * l.interleave, 1);
  // Unpaired: the warm-up forwards (and as many cool-down backwards) of the first stage, the
  // one that waits longest, (pp - 1) x 2 + (v - 1) x pp chunk passes under Megatron-LM's
  // interleaved schedule; without a pipeline the first forward and the last backward.
  const std::int64_t warmup = l.pp > 1 ? (l.pp - 1) * 2 + (l.interleave - 1) * l.pp : 1;
  const auto n = static_cast<double>(passes);
  const auto alone = static_cast<double>(std::clamp<std::int64_t>(warmup, 1, passes));
  CommPhaseTime out;
  out.forward_s =
      (alone * ep.forward_s + (n - alone) * std::max(0.0, ep.forward_s - stage.backward_s)) / n;
  out.backward_s =
      (alone * ep.backward_s + (n - alone) * std::max(0.0, ep.backward_s - stage.forward_s)) / n;
  return out;
}

}  // namespace

Model3D::SlowestStage Model3D::slowest_stage(const Layout3D& l) {
  const auto& s = spec_of(m_);
  const auto split = layers_per_stage(s, l);
  SlowestStage most;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    const std::int64_t d = dense_on_stage(s, l, static_cast<std::int64_t>(i));
    if (split[i] > most.layers || (split[i] == most.layers && d < most.dense)) {
      most = {split[i], d, false};
      at = static_cast<std::int64_t>(i);
    }
  }
  if (s.mtp_layers == 0) return most;
  const std::int64_t h = head_stage(l);
  if (h == at) return {most.layers, most.dense, true};
  const SlowestStage head{split[static_cast<std::size_t>(h)], dense_on_stage(s, l, h), true};
  const auto busy = [&](const SlowestStage& st) {
    const auto c = stage_compute(l, st.layers, st.dense, st.prediction_modules);
    const double sparse = static_cast<double>(st.layers - st.dense) +
                          (st.prediction_modules ? static_cast<double>(s.mtp_layers) : 0.0);
    const auto ep = expert_exchange(l, s.moe.active() ? sparse : 0.0);
    return c.forward_s + c.backward_s + ep.forward_s + ep.backward_s;
  };
  return busy(head) > busy(most) ? head : most;
}

Time3D Model3D::time(const Layout3D& l) {
  const auto& s = spec_of(m_);
  check_layout(s, l, t_.gpus_per_node());
  if (l.gpus() > t_.gpu_count()) {
    throw Error(std::to_string(l.gpus()) + " GPUs: the cluster has " +
                std::to_string(t_.gpu_count()));
  }
  TrainingConfig c;
  c.precision = l.precision;
  c.micro_batch = l.micro_batch;
  c.seq_len = l.seq_len;
  c.checkpointing = l.recompute;
  c.recompute_modules = l.recompute_modules;
  c.selective_policy = selective_policy_of(l.framework);
  c.checkpoint_every = l.checkpoint_every;
  c.attention = l.attention;
  c.attention_kernel = l.attention_kernel;
  c.fp8 = l.fp8;
  c.optimizer = Optimizer::adamw;
  auto& cache = *cache_;
  const auto lib = attention_library(l);
  const auto key = std::make_tuple(l.micro_batch, recompute_key(l), l.seq_len,
                                   static_cast<int>(l.precision), attention_key(l, lib));
  if (!cache.compute.count(key)) cache.compute[key] = estimate_compute(m_, c, gpu_, k_, lib);
  const auto& whole = cache.compute.at(key);  // the model on one GPU, one micro-batch
  // The slowest stage sets the pipeline's pace: the one with the most layers (of them the most
  // sparse ones: a mixture's dense first blocks send no tokens to experts), timed with the LM
  // head; or the head's stage, when multi-token prediction modules sit there beside fewer
  // layers (Megatron-LM places them on the last stage).
  const auto [stage_layers, dense, with_mtp] = slowest_stage(l);
  const auto local = stage_compute(l, stage_layers, dense, with_mtp);  // s/cp tokens
  const auto stage = with_context_parallel(local, l.cp);
  Time3D out;
  const auto recipe = recipe_of(l);
  const auto sbh = static_cast<double>(tokens_per_rank(l) * l.micro_batch * s.hidden_size);
  const double act_bytes = static_cast<double>(recipe.activation_bytes()) * sbh;
  // The stage is timed as the last, with its multi-token prediction blocks when it holds them.
  const double mtp = with_mtp ? static_cast<double>(s.mtp_layers) : 0.0;
  const double layers = static_cast<double>(stage_layers) + mtp;
  const double sparse = s.moe.active() ? layers - static_cast<double>(dense) : 0.0;
  double tp_all_reduce_s = 0;  // one, of a layer's activations
  if (l.tp > 1) {
    const auto k2 = std::make_pair(l.tp, static_cast<std::int64_t>(act_bytes));
    if (!cache.tp_all_reduce.count(k2)) {
      CommModel group(t_, table_, l.tp, cache.comm);  // the first tp GPUs of a node
      cache.tp_all_reduce[k2] = group.estimate(Collective::all_reduce, Bytes{k2.second}).time_s;
    }
    tp_all_reduce_s = cache.tp_all_reduce.at(k2);
  }
  // Two of a layer's tensor-parallel collectives each way belong to the attention, two to
  // the MLP; a MoE layer whose experts are folded apart sends its tokens to the experts
  // instead (unless a shared expert still runs tensor-parallel).
  const double tp_per_way = experts_folded(s, l) && s.moe.shared_ffn_size == 0 ? 1.0 : 2.0;
  double tp_forward_s = layers * tp_per_way * tp_all_reduce_s;
  double tp_backward_s = tp_forward_s;
  if (l.tp_comm_overlap && l.tp > 1) {
    // A mixture's MLP collectives (tp_per_way - 1 all-reduces, two collectives each) stay
    // exposed; a dense MLP's Linears overlap theirs.
    const double mlp = s.moe.active() ? 2 * (tp_per_way - 1) : 0.0;
    const auto sms = static_cast<double>(gpu_.streaming_multiprocessors);
    const double slow = sms > kUserbufferSms ? sms / (sms - kUserbufferSms) : 1.0;
    const auto x = tp_overlap_exposed(tp_all_reduce_s / 2, linear_times(l), l.tp, mlp, slow);
    tp_forward_s = layers * x.forward_s;
    tp_backward_s = layers * x.backward_s;
  }
  // Selective recomputation of a dense block's MLP (mlp) or of a mixture's layer (moe)
  // repeats its forward collectives (not those of the multi-token prediction blocks, which
  // keep their tensors).
  const bool selective = l.recompute == Checkpointing::selective;
  const bool mlp_again = selective && l.recompute_modules.has(RecomputeModule::mlp);
  const bool moe_again = selective && l.recompute_modules.has(RecomputeModule::moe);
  const double rebuilt_tp_layers = (mlp_again ? layers - mtp - (sparse - mtp) : 0.0) +
                                   (moe_again ? (sparse - mtp) * (tp_per_way - 1) : 0.0);
  // torchtitan's per-op policy saves the reduce-scatters' outputs, not the all-gathers' (nor
  // all-reduces'): backward gathers again, half of each pair of sequence-parallel collectives.
  const bool per_op = selective && selective_policy_of(l.framework) == SelectivePolicy::per_op;
  const double regathered =
      per_op ? (layers - mtp) * tp_per_way * tp_all_reduce_s * (l.sequence_parallel ? 0.5 : 1.0)
             : 0.0;
  out.tp_comm_s = tp_forward_s * (1 + full_recompute_share(l, layers - mtp)) + tp_backward_s +
                  rebuilt_tp_layers * tp_all_reduce_s + regathered;
  const auto cp = cp_exchange(l, local, layers);
  out.cp_comm_s = cp.forward_s + cp.backward_s;
  auto ep = expert_exchange(l, sparse);
  if (moe_again && sparse > mtp) ep.backward_s += ep.forward_s * (sparse - mtp) / sparse;
  if (l.overlap_ep_comm) ep = overlapped(ep, stage, l);
  out.ep_comm_s = ep.forward_s + ep.backward_s;
  const auto schedule = l.pipeline_schedule();
  double p2p_one_s = 0;  // one send of a chunk boundary's activations (or their gradient)
  double p2p_factor = 1;
  if (l.pp > 1) {
    const bool across = t_.nodes() > 1 && l.tp * l.cp * l.dp >= t_.gpus_per_node();
    if (!cache.p2p_Bps.count(across))
      cache.p2p_Bps[across] = p2p_bandwidth_Bps(t_, table_, across, cache.comm);
    const double bytes = act_bytes / static_cast<double>(l.tp);
    p2p_one_s = p2p_latency_s(across) + bytes / cache.p2p_Bps.at(across);
    p2p_factor = schedule_cost(schedule, l.pp, l.interleave, l.micro_batches, {}).p2p_factor;
    out.p2p_s = 2 * p2p_one_s * p2p_factor;
  }
  // The data-parallel collectives and optimizer of the GPU holding the most parameters.
  const auto heavy = heaviest_params_stage(s, l);
  const double forward_s = data_parallel_and_optimizer(l, stage, heavy, out);
  out.microbatch_s =
      out.compute_s + out.tp_comm_s + out.cp_comm_s + out.ep_comm_s + out.fsdp_comm_s + out.p2p_s;
  // F, B and W of a micro-batch: the backward GEMMs split evenly between input and weight
  // gradients (equal FLOPs); recomputation, backward TP and CP exchanges and the gradient
  // send precede B's output and belong to it.
  const double weight_grad_s = (stage.backward_s - stage.recompute_s) / 2;
  StageTimes st;
  st.forward_s = forward_s + tp_forward_s + cp.forward_s + ep.forward_s + p2p_one_s * p2p_factor;
  st.backward_weight_s = weight_grad_s;
  st.backward_input_s = out.microbatch_s - st.forward_s - weight_grad_s;
  out.bubble_s =
      l.pp > 1 ? schedule_cost(schedule, l.pp, l.interleave, l.micro_batches, st).bubble_s : 0.0;
  out.pipeline_s = static_cast<double>(l.micro_batches) * out.microbatch_s + out.bubble_s;
  out.step_s = out.pipeline_s + out.dp_sync_s + out.host_transfer_s + out.optimizer_s;
  out.samples_per_s = static_cast<double>(l.global_batch()) / out.step_s;
  out.tokens_per_s = out.samples_per_s * static_cast<double>(l.seq_len);
  const double flops = whole.model_flops * static_cast<double>(l.micro_batches * l.dp);
  out.mfu = flops / (out.step_s * static_cast<double>(l.gpus()) * gpu_.peak_flops_for(l.precision));
  return out;
}

const std::vector<CommOp>& Model3D::data_parallel_ops(const Layout3D& l, const StageHolding& held) {
  const std::array<std::int64_t, 18> key{
      held.layers,
      held.params,
      held.experts,
      held.dense,
      l.tp,
      l.expert_tp(),
      l.ep,
      l.cp,
      l.dp,
      l.pp > 1 ? 1 : 0,
      static_cast<std::int64_t>(l.sharding),
      l.shard_group,
      static_cast<std::int64_t>(l.framework),
      static_cast<std::int64_t>(l.precision),
      static_cast<std::int64_t>(l.optimizer),
      l.micro_batches,
      (l.overlap_grad_reduce ? 1 : 0) + (l.overlap_param_gather ? 2 : 0) +
          (l.grad_reduce_bf16 ? 4 : 0) + (l.fp8_param_gather ? 8 : 0),
      l.ddp_bucket_params};
  auto& cached = cache_->dp_ops;
  if (const auto found = cached.find(key); found != cached.end()) return found->second;
  return cached.emplace(key, price_data_parallel_ops(l, held)).first->second;
}

std::vector<CommOp> Model3D::price_data_parallel_ops(const Layout3D& l, const StageHolding& held) {
  const auto& s = *m_.transformer;
  const std::int64_t layers = held.layers, params = held.params;
  const std::int64_t experts = block_params(s).experts_on_gpu(l);  // per sparse block, here
  // Experts folded onto their own data-parallel ranks sync apart from the rest (Megatron-LM's
  // expert data-parallel group; torchtitan shards them over the dp_shard_mod_ep mesh).
  const bool apart = experts > 0 && l.expert_dp() != l.dp * l.cp;
  // The units: the stage's blocks by kind (less their experts when those sync apart), and
  // what else the stage holds (the embedding on the first, the final norm, the head and any
  // prediction modules on the last) as the root's unit.
  Messages units;
  std::int64_t in_blocks = 0, expert_layers = 0;
  for (const auto& run : stage_runs(s, held.dense, layers)) {
    const auto b = block_params(run.block);
    const std::int64_t block = b.on_gpu(l) - (apart ? b.experts_on_gpu(l) : 0);
    units.push_back({block, run.layers});
    in_blocks += block * run.layers;
    if (b.experts_on_gpu(l) > 0) expert_layers += run.layers;
  }
  const std::int64_t dense = params - (apart ? held.experts : 0);
  if (dense > in_blocks) units.push_back({dense - in_blocks, 1});
  // Groups of GPUs ordered tp, cp, dp: the dp x cp ranks span tp x dp x cp GPUs, a shard
  // group tp x shards, and the replicas of a shard stride through the whole span.
  const std::int64_t ranks = l.dp * l.cp;
  // Under --fp8-param-gather the blocks' Linear weights (the experts' among them) are
  // gathered in FP8.
  const std::int64_t fp8 =
      l.fp8_param_gather ? fp8_linear_weights(s, l, held.stage, layers, held.dense) : 0;
  const std::int64_t fp8_experts = apart ? std::min(fp8, held.experts) : 0;
  auto ops = data_parallel_ops_of(l, units, dense, ranks, l.shard_ranks(), " (dp x cp)",
                                  fp8 - fp8_experts);
  if (apart) {
    // Expert ranks ordered etp, ep, edp: the edp ranks stride through all tp x cp x dp GPUs.
    const std::int64_t edp = l.expert_dp();
    Messages expert_units{{experts, expert_layers}};
    if (held.experts > experts * expert_layers)  // the prediction modules' experts
      expert_units.push_back({held.experts - experts * expert_layers, 1});
    auto expert_ops = data_parallel_ops_of(l, expert_units, held.experts, edp,
                                           l.sharding == DpSharding::none ? 1 : edp,
                                           " (expert dp, experts' states)", fp8_experts);
    ops.insert(ops.end(), expert_ops.begin(), expert_ops.end());
  }
  return ops;
}

std::vector<CommOp> Model3D::data_parallel_ops_of(const Layout3D& l, const Messages& units,
                                                  std::int64_t params, std::int64_t ranks,
                                                  std::int64_t shards, const std::string& what,
                                                  std::int64_t fp8_weights) {
  if (ranks == 1) return {};
  const auto messages = [&](MessageSplit split) -> Messages {
    if (split == MessageSplit::units) return units;
    if (split == MessageSplit::unit_shards) return shards_of(units, shards);
    if (split == MessageSplit::megatron_buckets) return buckets(params, megatron_bucket(l));
    return {{params, 1}};  // whole_model: the stage's parameters on this GPU
  };
  const std::int64_t stride = l.tp * l.cp * l.dp / ranks;  // GPUs between a group's ranks
  const auto group = [&](std::string label, std::int64_t span, std::int64_t n) {
    return RuleGroup{
        .label = std::move(label),
        .ranks = n,
        .estimate = [this, span, n](Collective c, Bytes size,
                                    Algorithm) { return group_estimate(c, span, n, size.value); },
        .algorithm = ""};
  };
  const RuleGroup all = group(std::to_string(ranks) + " GPUs" + what, stride * ranks, ranks);
  const RuleGroup shard_group =
      group(std::to_string(shards) + " GPUs of a shard group", stride * shards, shards);
  const RuleGroup replicas =
      group(std::to_string(ranks / shards) + " replicas", stride * ranks, ranks / shards);
  const RuleSources sources{.messages = messages,
                            .group = [&](CommGroup g) -> const RuleGroup& {
                              return g == CommGroup::data_parallel ? all
                                     : g == CommGroup::shard_group ? shard_group
                                                                   : replicas;
                            },
                            .recipe = recipe_of(l),
                            .micro_steps = l.micro_batches,
                            .no_sync = deferred_sync(l)};
  const auto gathered = fp8_weights > 0 ? fp8_gathered(sources, fp8_weights, params) : sources;
  std::vector<CommOp> ops;
  for (const auto& rule : layout_collectives(layout_sharding(l))) {
    if (sources.group(rule.group).ranks == 1) continue;
    ops.push_back(price_rule(rule, rule.payload == Payload::weights ? gathered : sources));
  }
  return ops;
}

double Model3D::data_parallel_and_optimizer(const Layout3D& l, const ComputeTime& stage,
                                            const StageHolding& held, Time3D& out) {
  out.dp_ops = data_parallel_ops(l, held);
  const auto& s = *m_.transformer;
  const std::int64_t params = held.params, experts = held.experts;
  const auto recipe = recipe_of(l);
  const bool sharded_optimizer = l.sharding >= DpSharding::optimizer;
  StepInputs in;
  in.forward_s = stage.forward_s;
  in.backward_s = stage.backward_s;
  const std::int64_t elements =
      sharded_optimizer ? sharded_elements(s, l, params, experts) : params;
  // torchtitan's [optimizer] implementation: fused by default, foreach when asked.
  const ForeachStep foreach{
      l.framework == Framework::fsdp2 && (l.optimizer_impl == OptimizerImpl::foreach ||
                                          l.optimizer_impl == OptimizerImpl::for_loop),
      l.optimizer};
  in.optimizer_s = optimizer_time(elements, recipe, l.offload, gpu_, k_,
                                  std::min(l.gpus(), t_.node().launch_gpus_per_host()), foreach);
  // Eager FSDP2 steps its DTensors with foreach ops tensor by tensor on the host (compute_time.hpp
  // fsdp_optimizer_host_s): the slowest stage's tensors.
  if (foreach.on && stage.eager_forward_launches > 0 && l.offload == Offload::none) {
    in.optimizer_s =
        std::max(in.optimizer_s, stage.parameter_tensors * k_.fsdp_optimizer_host_s_per_tensor);
  }
  in.host_transfer_s = host_transfers_s(
      l.offload, elements, sharded_elements(s, l, params, experts),
      static_cast<double>(recipe.compute_bytes()), host_link_Bps(gpu_, k_), out.dp_ops);
  in.ops = out.dp_ops;  // with the offloaded shard's fetch before each all-gather
  in.micro_steps = l.micro_batches;
  in.no_sync = deferred_sync(l);
  in.overlap_compute_slowdown = k_.overlap_compute_slowdown;
  const auto times = step_times(in);
  const auto m = static_cast<double>(l.micro_batches);
  out.compute_s = times.compute_s / m;
  // FSDP2's exposed gathers and reductions fall in every micro-batch, and so in the pipeline's
  // bubble too; Megatron-LM's overlapped buckets in the first stage's last backward and the
  // next step's first forward only, the ends of the step: once a step, outside the bubble.
  const double passes = times.exposed_forward_s + times.exposed_backward_s;
  const bool once = l.framework == Framework::megatron;
  out.fsdp_comm_s = once ? 0.0 : passes / m;
  out.dp_sync_s = times.exposed_outside_s + (once ? passes : 0.0);
  out.optimizer_s = times.optimizer_s;
  out.host_transfer_s = times.host_transfer_s;
  return (times.forward_compute_s + (once ? 0.0 : times.exposed_forward_s)) / m;
}

Time3D time_3d(const ModelDesc& m, const Layout3D& l, const Topology& t,
               const InterconnectTable& table, const GpuSpec& gpu, const ComputeConstants& k) {
  Model3D model(m, t, table, gpu, k);
  return model.time(l);
}

}  // namespace dtplan::cost
