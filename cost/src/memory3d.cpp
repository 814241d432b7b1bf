// Pipeline stages' memory: the heaviest stage's GPU of a layout (see parallel3d.hpp).
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/pipeline_schedule.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "layout_parts.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {

Bytes Memory3DFigures::total() const {
  return Bytes{weights.value + master_weights.value + gradients.value + optimizer_states.value +
               activations.value + logits.value + buffers.value + overhead.value};
}

Bytes Memory3DFigures::torch_reserved() const {
  return total() - outside_allocator;
}

Bytes Memory3DFigures::torch_allocated() const {
  return torch_reserved() - allocator_slack;
}
namespace {

// The NCCL communicators a GPU of the layout uses, each with its own buffers: tensor
// parallel, context parallel, the data-parallel (x cp) group, the pipeline's point-to-point
// group, and under hybrid sharding the shard and the replica groups instead of one.
std::int64_t communicators(const Layout3D& l) {
  const std::int64_t dp_ranks = l.dp * l.cp;
  // Folded experts add their own: expert parallel, expert tensor parallel (when not tp's),
  // expert data parallel (when not dp x cp's).
  const std::int64_t experts = (l.ep > 1 ? 1 : 0) +
                               (l.expert_tp() > 1 && l.expert_tp() != l.tp ? 1 : 0) +
                               (l.expert_dp() > 1 && l.expert_dp() != dp_ranks ? 1 : 0);
  return (l.tp > 1 ? 1 : 0) + (l.cp > 1 ? 1 : 0) + (dp_ranks > 1 ? (l.hybrid() ? 2 : 1) : 0) +
         (l.pp > 1 ? 1 : 0) + experts;
}

// What stage `i` (of `layers` blocks) keeps: s/cp tokens of each micro-batch, 1/t of the
// heads and MLP width, the micro-batches its schedule keeps in flight; the embedding's inputs
// on the first stage, the head and the loss (Megatron-LM's vocab-parallel cross-entropy, or
// torch's, as torchtitan runs it) on the last.
ActivationShape activation_shape(const Layout3D& l, std::int64_t i, std::int64_t layers,
                                 std::int64_t dense) {
  ActivationShape a;
  a.micro_batch = l.micro_batch;
  a.tokens = tokens_per_rank(l);
  a.precision = l.precision;
  a.attention = l.attention;
  a.recompute = l.recompute;
  a.recompute_modules = l.recompute_modules;
  a.selective_policy = selective_policy_of(l.framework);
  a.fp8_gemms = l.fp8 != Fp8Recipe::none;
  a.checkpoint_every = l.checkpoint_every;
  a.tp = l.tp;
  a.expert_tp = l.expert_tp();
  a.expert_rows_factor = l.expert_rows_factor();
  a.fp8_linear_inputs = l.fp8 != Fp8Recipe::none && l.framework == Framework::megatron;
  a.sequence_parallel = l.sequence_parallel;
  a.layers = layers;
  a.dense_layers = dense;
  a.in_flight =
      l.pp == 1 ? 1.0
                : stage_in_flight(l.pipeline_schedule(), l.pp, l.interleave, l.micro_batches, i);
  a.embedding = i == 0;
  a.head = i == head_stage(l);
  // Eager kernels (an FSDP2 layout at tp 1) keep what each op saves, as the data-parallel
  // strategies' inventory counts it.
  TrainingConfig kernels;
  kernels.precision = l.precision;
  kernels.layer_kernels = l.layer_kernels;
  kernels.fp8 = l.fp8;
  a.eager = eager_layers(kernels);
  // torchtitan turns loss_parallel on whenever tensor parallelism shards the LM head
  // (training.disable_loss_parallel defaults to false).
  a.loss = l.framework == Framework::megatron ? LossKind::vocab_parallel
           : l.tp > 1                         ? LossKind::loss_parallel
                                              : LossKind::torch_freed;
  return a;
}

// How a layout's framework holds model states, as a strategy registry row would: Megatron-LM
// keeps bf16 parameters and fp32 main gradients whole and shards the fp32 main weights and
// optimizer states with its distributed optimizer; FSDP2 keeps every state sharded and gathers
// blocks in bf16 (the block in use and the prefetched one, or every block of the stage from
// forward to backward with reshard_after_forward=False), holding one block's fp32 gradients
// for the reduce-scatter of every micro-batch -- or, under pipeline parallelism, the stage's
// unsharded fp32 gradients accumulated until the last micro-batch (deferred_sync).
StrategyTraits layout_traits(const Layout3D& l) {
  const bool fsdp = l.framework == Framework::fsdp2;
  return {.strategy = Strategy::ddp,  // unused: the layout is not a data-parallel strategy
          .shards_optimizer = fsdp || l.sharding >= DpSharding::optimizer,
          .shards_gradients = fsdp,
          .shards_weights = fsdp,
          .gather = !fsdp                                  ? ParamGather::none
                    : l.sharding == DpSharding::parameters ? ParamGather::units
                                                           : ParamGather::whole_model,
          .gradient_buffer = fsdp ? GradientBuffer::unit_gradients : GradientBuffer::none,
          .fsdp = fsdp,
          .single_process = false,
          .hybrid = l.hybrid(),
          .offload_optimizer_ok = !fsdp,
          .offload_params_ok = fsdp,
          .no_sync = deferred_sync(l),
          .framework = name_of(l.framework),
          .zero_stage = 0,
          .fsdp_sharding = "",
          .runtime = std::nullopt,
          .collectives = layout_collectives(layout_sharding(l)),
          .no_sync_refusal = ""};
}

// What stage `i` of `layers` blocks (`dense` of them a mixture's dense first blocks) holds on
// one GPU, apart from its activations: its blocks, its parameters, and the blocks' Linear
// weights that Transformer Engine keeps FP8 copies of. Transformer Engine keeps each FP8
// Linear's quantized weight across a step's micro-batches (Megatron-LM passes
// is_first_microbatch): the FP8 copy and its transpose for the backward's GEMMs on Hopper, the
// row- and column-wise copies of MXFP8 on Blackwell. torchao's float8 (fsdp2) casts the weights
// in every forward instead, and keeps none.
struct StagePieces {
  StageBlocks blocks;
  StageHolding share;  // its `stage` is the first stage these pieces were priced for
  std::array<GatherUnits::End, 2> ends{};  // FSDP2's units at the ends of the pass (end_units)
  bool fp8_copies = false;
  std::int64_t fp8_weights = 0;
};

// FSDP2's units at the ends of stage i's pass, as torchtitan wraps them: the embedding on the
// first stage next to its first block, the final norm and the head on the head stage next to
// its last. (torchtitan has no multi-token prediction modules to wrap; they stay out.)
std::array<GatherUnits::End, 2> end_units(const TransformerSpec& s, const Layout3D& l,
                                          std::int64_t i, const StageBlocks& blocks) {
  const auto& runs = blocks.runs;  // in the order the blocks run: dense, then sparse
  const std::int64_t first_block = blocks.run_count > 0 ? runs[0].second : 0;
  const std::int64_t last_block = blocks.run_count > 0 ? runs[blocks.run_count - 1].second : 0;
  const std::int64_t embedding = i == 0 ? embedding_params(s, l) : 0;
  const std::int64_t head = i == head_stage(l) ? head_params(s, l) : 0;
  return {{{embedding, embedding > 0 ? first_block : 0}, {head, head > 0 ? last_block : 0}}};
}

StagePieces stage_pieces(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                         std::int64_t layers, std::int64_t dense) {
  StagePieces p;
  p.blocks = stage_blocks(s, l, dense, layers);
  p.share = stage_share(s, l, i, layers, p.blocks);
  p.ends = end_units(s, l, i, p.blocks);
  p.fp8_copies = l.fp8 != Fp8Recipe::none && l.framework == Framework::megatron;
  if (p.fp8_copies) p.fp8_weights = fp8_linear_weights(s, l, i, layers, dense);
  return p;
}

// The GPU of a stage holding `p`: its parameters (its blocks' tensor-parallel share, the
// embedding or the head), sharded over dp x cp (or the shard group), its blocks as FSDP2's
// units -- all of `v` but the traits, the recipe and the activations.
void fill_stage_view(const TransformerSpec& s, const Layout3D& l, const StagePieces& p,
                     bool explained, StateView& v) {
  v.params = p.share.params;
  v.shard_degree = l.shard_ranks();
  // The units largest first (GatherUnits): the gathered buffers are the two largest blocks,
  // the gradient buffer the largest, whichever run -- a mixture's dense blocks come first and
  // are the smaller ones.
  auto runs = p.blocks.runs;  // at most two: dense and sparse
  if (p.blocks.run_count == 2 && runs[1].second > runs[0].second) std::swap(runs[0], runs[1]);
  v.units.blocks.clear();
  for (std::size_t r = 0; r < p.blocks.run_count; ++r) {
    const auto [count, params] = runs.at(r);
    v.units.blocks.insert(v.units.blocks.end(), static_cast<std::size_t>(count), params);
  }
  v.units.ends = l.framework == Framework::fsdp2 ? p.ends : GatherUnits{}.ends;
  v.units.known = true;
  const std::int64_t experts = p.share.experts;
  v.shard_elements = experts_sharded_apart(s, l) ? sharded_elements(s, l, v.params, experts) : 0;
  v.shard_text.clear();
  if (experts_sharded_apart(s, l) && explained) {  // read only by the explanations
    v.shard_text = "1/" + std::to_string(l.shard_ranks()) + " of " +
                   format_thousands(v.params - experts) + " outside the experts, 1/" +
                   std::to_string(l.expert_dp()) + " of " + format_thousands(experts) +
                   " in the experts (expert data parallel)";
  }
  v.communicators = communicators(l);
  // Memory3D::host is per GPU; the front end knows the GPUs per node.
  v.ranks_per_node = 1;
  v.whole_model = false;
  v.explain = explained;
}

StateView stage_view(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                     std::int64_t layers, const StagePieces& p, bool explained) {
  StateView v;
  v.traits = layout_traits(l);
  v.recipe = recipe_of(l);
  fill_stage_view(s, l, p, explained, v);
  auto shape = activation_shape(l, i, layers, p.share.dense);
  shape.named = explained;
  v.activations = stage_activations(s, shape);
  return v;
}

// The FP8 weight copies and transposes Transformer Engine keeps, 2 bytes per weight of the
// blocks' Linears (StagePieces).
void add_fp8_weight_copies(const Layout3D& l, const StagePieces& p, Memory3D& out) {
  if (!p.fp8_copies) return;
  const std::int64_t weights = p.fp8_weights;
  const Bytes copies{checked_mul(2, weights, "FP8 weight copies")};
  out.buffers = out.buffers + copies;
  out.buffer_terms.push_back({"FP8 weight copies and transposes (Transformer Engine)", copies});
  // With --fp8-param-gather the FP8 tensors are the parameters: no bf16 copy of these weights.
  const Bytes bf16{l.fp8_param_gather ? checked_mul(2, weights, "FP8 parameters") : 0};
  out.weights = out.weights - bf16;
  for (auto& [component, text] : out.explain) {
    if (component == "buffers") {
      text += "; FP8 weight copies and transposes: 2 B x " + format_thousands(weights) +
              " Linear weights (" + std::string(name_of(l.fp8)) + ")";
    }
    if (component == "weights" && l.fp8_param_gather) {
      text += "; less 2 B x " + format_thousands(weights) +
              " Linear weights kept as FP8 tensors only (--fp8-param-gather)";
    }
  }
}

// Where a layout puts the experts, and how their tokens reach them.
std::string experts_note(const TransformerSpec& s, const Layout3D& l) {
  const auto& moe = s.moe;
  std::string text =
      "experts: " + std::to_string(moe.experts / l.ep) + " of " + std::to_string(moe.experts) +
      " per GPU (ep " + std::to_string(l.ep) + "), " +
      (l.expert_tp() == 1 ? std::string("each whole")
                          : "each split " + std::to_string(l.expert_tp()) + " ways (etp)") +
      ", their gradients reduced over " + std::to_string(l.expert_dp()) +
      " expert-data-parallel ranks";
  text += l.deepep ? "; tokens reach them through DeepEP (once per node across nodes, then NVLink)"
          : l.ep > 1 || l.expert_tp() != l.tp
              ? (l.framework == Framework::megatron
                     ? "; tokens reach them by all-to-all (Megatron-LM's alltoall dispatcher)"
                     : "; tokens reach them by all-to-all (torchtitan's expert parallelism)")
              : "; tokens are gathered over the tensor-parallel group (allgather dispatcher)";
  if (l.overlap_ep_comm) text += ", hidden behind the adjacent micro-batch's compute";
  if (l.capacity_factor > 0) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%g", l.capacity_factor);
    text += "; inputs padded to capacity factor " + std::string(factor) +
            ": each expert computes, keeps and receives that many times its balanced share";
  }
  return text;
}

// Stage `i`'s GPU priced by the memory model every strategy uses, its view built.
Memory3D priced_stage(const ModelDesc& m, const Layout3D& l, std::int64_t i,
                      const OverheadConstants& k, const StateView& view, const StagePieces& p) {
  auto e = estimate_view_memory(m, layout_training(l), view, k);
  Memory3D out;
  out.stage = i;
  out.params_per_gpu = view.params;
  out.weights = e.gpu.weights;
  out.master_weights = e.gpu.master_weights;
  out.gradients = e.gpu.gradients;
  out.optimizer_states = e.gpu.optimizer_states;
  out.logits = view.activations.logits_and_loss;
  out.activations = e.gpu.activations - out.logits;
  out.buffers = e.gpu.buffers;
  out.overhead = e.gpu.overhead;
  out.outside_allocator = e.gpu.outside_allocator;
  out.allocator_slack = e.gpu.allocator_slack;
  out.host = e.cpu.total();
  out.activation_terms = std::move(e.activation_terms);
  out.buffer_terms = std::move(e.buffer_terms);
  out.overhead_terms = std::move(e.overhead_terms);
  out.explain = std::move(e.explain);
  out.notes = std::move(e.notes);
  if (view.explain && m.transformer->moe.active())
    out.notes.push_back(experts_note(*m.transformer, l));
  add_fp8_weight_copies(l, p, out);
  return out;
}

Memory3D stage_memory(const ModelDesc& m, const Layout3D& l, std::int64_t i, std::int64_t layers,
                      const OverheadConstants& k, bool explained) {
  const auto& s = *m.transformer;
  const auto pieces = stage_pieces(s, l, i, layers, dense_on_stage(s, l, i));
  return priced_stage(m, l, i, k, stage_view(s, l, i, layers, pieces, explained), pieces);
}

// The heaviest GPU: earlier stages hold more micro-batches, the first and last the embedding
// and the head, and uneven splits move layers between them. A stage alike an earlier one in
// all but its place in the schedule is priced once, by the earlier one: every schedule keeps
// no fewer micro-batches in flight on an earlier stage (stage_in_flight) and memory grows with
// them, so the later one is never heavier, and the first of equals wins. `price(i, kind)`
// prices stage i.
template <class Price>
Memory3D heaviest_stage(const TransformerSpec& s, const Layout3D& l, const Price& price) {
  const auto layers = layers_per_stage(s, l);
  Memory3D heaviest;
  std::array<StageKind, 4> priced{};  // at most four kinds: first, last, and the rest's two
  std::size_t kinds = 0;
  std::vector<StageKind> more;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto at = static_cast<std::int64_t>(i);
    const auto kind = stage_kind(s, l, at, layers[i]);
    const auto seen = priced.begin() + static_cast<std::ptrdiff_t>(kinds);
    if (std::find(priced.begin(), seen, kind) != seen ||
        std::find(more.begin(), more.end(), kind) != more.end()) {
      continue;
    }
    if (kinds < priced.size()) {
      priced[kinds++] = kind;
    } else {
      more.push_back(kind);
    }
    auto stage = price(at, kind);
    if (i == 0 || stage.total().value > heaviest.total().value) heaviest = std::move(stage);
  }
  return heaviest;
}

}  // namespace

Memory3D memory_3d(const ModelDesc& m, const Layout3D& l, const OverheadConstants& k,
                   bool explained) {
  return heaviest_stage(spec_of(m), l, [&](std::int64_t i, const StageKind& kind) {
    return stage_memory(m, l, i, kind.layers, k, explained);
  });
}

namespace {

// A key of whole numbers (doubles by their bits), hashed FNV-1a style with a final mix.
template <std::size_t N>
using Key = std::array<std::int64_t, N>;
struct KeyHash {
  template <std::size_t N>
  std::size_t operator()(const Key<N>& key) const {
    std::uint64_t h = 14695981039346656037ULL;
    for (const auto v : key) {
      h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ULL;
    }
    return static_cast<std::size_t>(h ^ (h >> 32));
  }
};
std::int64_t bits(double v) {
  return std::bit_cast<std::int64_t>(v);
}

// What stage_pieces reads of a layout and a stage.
Key<10> pieces_key(const Layout3D& l, std::int64_t i, const StageKind& kind) {
  const bool fp8_copies = l.fp8 != Fp8Recipe::none && l.framework == Framework::megatron;
  return {l.tp,       l.ep,   l.expert_tp(),      l.pp == 1,          kind.layers,
          kind.dense, i == 0, i == head_stage(l), head_stage(l) == 0, fp8_copies};
}

// Every field of an activation shape but `named` (a search names no terms) and `in_flight`
// (InFlightActivations leaves it open). A new 8-byte field of ActivationShape changes its size
// and stops the build here; a small one can fit in padding, which the size does not see, so
// the cache's test varies the fields that matter.
static_assert(sizeof(ActivationShape) == 152, "a field was added to ActivationShape: key it");
Key<10> activations_key(const ActivationShape& a) {
  // The enumerations, the recompute modules and the flags, a few bits each, in one word.
  std::uint64_t packed = a.recompute_modules.bits;  // 32 bits
  const auto field = [&](auto value, unsigned width) {
    const auto v = static_cast<std::uint64_t>(value);
    if (v >> width != 0)
      throw Error("activation key: a field beyond its " + std::to_string(width) + " bits");
    packed = packed << width | v;
  };
  field(a.precision, 4);
  field(a.attention, 4);
  field(a.recompute, 4);
  field(a.loss, 4);
  field(a.sequence_parallel, 1);
  field(a.fp8_linear_inputs, 1);
  field(a.embedding, 1);
  field(a.head, 1);
  field(a.eager.has_value(), 1);
  field(a.eager && a.eager->autocast, 1);
  field(a.selective_policy, 1);
  field(a.fp8_gemms, 1);
  return {static_cast<std::int64_t>(packed),
          a.micro_batch,
          a.tokens,
          a.tp,
          a.expert_tp,
          bits(a.expert_rows_factor),
          a.layers,
          a.dense_layers,
          a.eager ? bits(a.eager->element_bytes) : 0,
          a.checkpoint_every};
}

// A stage's activations as its memory reads them, with `in_flight` micro-batches in flight.
void set_activations(const InFlightActivations& open, double in_flight, ActivationEstimate& e) {
  e = open.once;  // its terms are empty: a search names none
  e.total = open.at(in_flight);
}

// What layout_traits and recipe_of read.
Key<7> view_key(const Layout3D& l) {
  return {static_cast<std::int64_t>(l.framework),
          static_cast<std::int64_t>(l.sharding),
          l.hybrid(),
          l.pp > 1,
          static_cast<std::int64_t>(l.precision),
          static_cast<std::int64_t>(l.optimizer),
          l.grad_reduce_bf16};
}

}  // namespace

struct StageMemoryCache::Tables {
  const ModelDesc* model = nullptr;
  const OverheadConstants* overheads = nullptr;
  std::unordered_map<Key<10>, StagePieces, KeyHash> pieces;
  std::unordered_map<Key<10>, InFlightActivations, KeyHash> activations;
  // One view per framework's way of holding states: its traits and recipe set once, the rest
  // filled for each stage priced.
  std::unordered_map<Key<7>, StateView, KeyHash> views;

  void check(const ModelDesc& m, const OverheadConstants& k) {
    if (!model) {
      model = &m;
      overheads = &k;
    }
    if (model != &m || overheads != &k) {
      throw Error("a stage-memory cache holds model " + model->name +
                  "'s stages under one set of overhead constants: model " + m.name +
                  " or other constants need their own cache");
    }
  }
  const StagePieces& pieces_of(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                               const StageKind& kind) {
    const auto key = pieces_key(l, i, kind);
    auto found = pieces.find(key);
    if (found == pieces.end())
      found = pieces.emplace(key, stage_pieces(s, l, i, kind.layers, kind.dense)).first;
    return found->second;
  }
  const InFlightActivations& activations_of(const TransformerSpec& s, const ActivationShape& a) {
    const auto key = activations_key(a);
    auto found = activations.find(key);
    if (found == activations.end())
      found = activations.emplace(key, stage_activations_in_flight(s, a)).first;
    return found->second;
  }
  StateView& view_of(const Layout3D& l) {
    const auto key = view_key(l);
    auto found = views.find(key);
    if (found == views.end()) {
      StateView v;
      v.traits = layout_traits(l);
      v.recipe = recipe_of(l);
      found = views.emplace(key, std::move(v)).first;
    }
    return found->second;
  }
};

StageMemoryCache::StageMemoryCache() : tables_(std::make_unique<Tables>()) {}
StageMemoryCache::~StageMemoryCache() = default;

Memory3D memory_3d(const ModelDesc& m, const Layout3D& l, const OverheadConstants& k,
                   StageMemoryCache& cache) {
  const auto& s = spec_of(m);
  auto& t = *cache.tables_;
  t.check(m, k);
  return heaviest_stage(s, l, [&](std::int64_t i, const StageKind& kind) {
    const auto& pieces = t.pieces_of(s, l, i, kind);
    auto shape = activation_shape(l, i, kind.layers, pieces.share.dense);
    shape.named = false;
    auto& view = t.view_of(l);
    fill_stage_view(s, l, pieces, false, view);
    set_activations(t.activations_of(s, shape), shape.in_flight, view.activations);
    return priced_stage(m, l, i, k, view, pieces);
  });
}

Memory3D stage_memory_3d(const ModelDesc& m, const Layout3D& l, std::int64_t stage,
                         const OverheadConstants& k, bool explained) {
  const auto layers = layers_per_stage(spec_of(m), l);
  if (stage < 0 || stage >= static_cast<std::int64_t>(layers.size())) {
    throw Error("stage " + std::to_string(stage) + " of a " + std::to_string(layers.size()) +
                "-stage pipeline");
  }
  return stage_memory(m, l, stage, layers[static_cast<std::size_t>(stage)], k, explained);
}

}  // namespace dtplan::cost
