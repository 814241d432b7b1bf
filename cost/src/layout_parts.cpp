// The pieces of a layout that its memory and its time both read: the stages' blocks and
// parameters, where the head sits, the tokens of a rank, the framework's recipe and sharding
// (see layout_parts.hpp).
#include "layout_parts.hpp"

#include <algorithm>
#include <vector>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {

const TransformerSpec& spec_of(const ModelDesc& m) {
  if (!m.transformer) {
    throw Error("model " + m.name +
                ": tensor and pipeline parallelism need a transformer (layer shapes)");
  }
  return *m.transformer;
}

// A mixture of experts splits every routed expert etp ways (Megatron-LM's expert tensor
// parallelism, equal to tp by default) and spreads the experts over ep ranks; the shared expert
// splits tp ways as a dense MLP does; the router and the shared expert's gate stay whole, and
// each expert's output bias stays whole with its expert (a row-parallel Linear's bias).
BlockParams block_params(const TransformerSpec& s) {
  const std::int64_t h = s.hidden_size, q = s.q_size(), kv = s.kv_size(), f = s.ffn_size;
  BlockParams p;
  if (s.mla.active()) {
    // Latent attention (Megatron-LM's MLA): the down-projections and their norms duplicated
    // on every tensor-parallel rank, the per-head up-projections and the output split.
    const std::int64_t ql = s.mla.q_lora_rank, kvl = s.mla.kv_lora_rank;
    const std::int64_t rope = s.mla.qk_rope_head_dim;
    p.replicated += (ql > 0 ? h * ql + ql : 0) + h * (kvl + rope) + kvl;
    p.matrices = (ql > 0 ? ql : h) * q + kvl * s.num_heads * (s.head_dim - rope + s.v_dim()) +
                 s.o_size() * h;
  } else {
    p.matrices = h * (q + kv + s.v_size()) + s.o_size() * h;
    if (s.qkv_bias) p.matrix_extras += q + kv + s.v_size();
  }
  if (s.attention_sinks) p.matrix_extras += s.num_heads;  // a sink per head, with its head
  p.replicated += (s.norm == NormKind::layernorm ? 2 : 1) * s.norms_per_layer * h +
                  (s.attn_out_bias ? h : 0) + (s.qk_norm ? 2 * s.head_dim : 0);
  if (s.moe.active()) {
    const bool gated = is_gated(s.mlp);
    const auto split_part = [&](std::int64_t fe) {  // one MLP's matrices and input biases
      return (gated ? 3 : 2) * h * fe + (s.mlp_bias ? (gated ? 2 : 1) * fe : 0);
    };
    const std::int64_t shared = s.moe.shared_ffn_size > 0 ? 1 : 0;
    const std::int64_t whole = h * s.moe.experts + (s.moe.router_bias ? s.moe.experts : 0) +
                               (s.moe.shared_expert_gate ? h : 0) + (s.mlp_bias ? shared * h : 0);
    p.experts = s.moe.experts * split_part(s.moe.expert_ffn_size);
    p.expert_biases = s.mlp_bias ? s.moe.experts * h : 0;
    p.matrices += p.matrix_extras + shared * split_part(s.moe.shared_ffn_size);
    p.matrix_extras += s.mlp_bias ? shared * (gated ? 2 : 1) * s.moe.shared_ffn_size : 0;
    p.replicated += whole;
    return p;
  }
  p.matrices += (is_gated(s.mlp) ? 3 : 2) * h * f;
  if (s.mlp_bias) p.matrix_extras += (is_gated(s.mlp) ? 2 : 1) * f;
  p.matrices += p.matrix_extras;
  p.replicated += s.mlp_bias ? h : 0;
  return p;
}

// The stage holding the final norm, the LM head and the loss: the last, except under ZB-V,
// whose V places model chunks i and 2p - 1 - i on stage i, so the first stage holds the last
// chunk too (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", section 6).
std::int64_t head_stage(const Layout3D& l) {
  return l.pp > 1 && l.pipeline_schedule() == PipelineSchedule::zbv ? 0 : l.pp - 1;
}

StageKind stage_kind(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                     std::int64_t layers) {
  return {layers, dense_on_stage(s, l, i), i == 0, i == head_stage(l)};
}

// Of the `layers` blocks of stage `i`, how many are a mixture's dense first blocks: the model's
// layers walked in order through the stages' model chunks (round-robin under interleaving,
// back along the V under ZB-V).
std::vector<ModelChunk> model_chunks(const TransformerSpec& s, const Layout3D& l) {
  const auto layers = layers_per_stage(s, l);
  const std::int64_t p = l.pp, v = std::max<std::int64_t>(l.interleave, 1);
  std::vector<ModelChunk> out;
  for (std::int64_t r = 0; r < v; ++r) {
    for (std::int64_t k = 0; k < p; ++k) {
      const std::int64_t j =
          l.pipeline_schedule() == PipelineSchedule::zbv && r % 2 == 1 ? p - 1 - k : k;
      // A stage's chunks are equal but for a shortfall (the L + 2 rule's embedding and loss):
      // the first stage's falls on its first chunks, any other's on its last.
      const std::int64_t n = layers[static_cast<std::size_t>(j)];
      const std::int64_t full = (n + v - 1) / v, short_chunks = full * v - n;
      const bool is_short = j == 0 ? r < short_chunks : r >= v - short_chunks;
      out.push_back({j, full - (is_short ? 1 : 0)});
    }
  }
  return out;
}

std::int64_t dense_on_stage(const TransformerSpec& s, const Layout3D& l, std::int64_t i) {
  const std::int64_t first_dense = s.moe.active() ? s.moe.first_dense_layers : 0;
  if (first_dense == 0) return 0;
  if (l.pp == 1) return std::min(first_dense, s.num_layers);
  std::int64_t at = 0, dense = 0;
  for (const auto& chunk : model_chunks(s, l)) {
    if (at >= first_dense) break;
    if (chunk.stage == i) dense += std::min(chunk.layers, first_dense - at);
    at += chunk.layers;
  }
  return dense;
}

// The blocks of a stage holding `dense` of the dense first blocks among its `layers`.
BlockRuns stage_runs(const TransformerSpec& s, std::int64_t dense, std::int64_t layers) {
  return block_runs(s, (s.moe.active() ? s.moe.first_dense_layers : 0) - dense, layers);
}

StageBlocks stage_blocks(const TransformerSpec& s, const Layout3D& l, std::int64_t dense,
                         std::int64_t layers) {
  StageBlocks out;
  for (const auto& run : stage_runs(s, dense, layers)) {
    const auto b = block_params(run.block);
    out.params += run.layers * b.on_gpu(l);
    out.experts += run.layers * b.experts_on_gpu(l);
    out.runs.at(out.run_count++) = {run.layers, b.on_gpu(l)};
  }
  return out;
}

// The first stage: 1/t of the word embedding (vocabulary-parallel), the learned positions
// and token types and an embedding norm whole.
std::int64_t embedding_params(const TransformerSpec& s, const Layout3D& l) {
  const std::int64_t h = s.hidden_size;
  const std::int64_t norm = s.norm == NormKind::layernorm ? 2 * h : h;  // weight (and bias)
  return s.vocab_size * h / l.tp +
         (s.positions == PositionKind::learned ? s.max_positions * h : 0) + s.type_vocab_size * h +
         (s.embedding_norm ? norm : 0);
}

// The head stage: the final norm and 1/t of the LM head, unless the head is the word
// embedding the same stage holds (tied).
std::int64_t head_params(const TransformerSpec& s, const Layout3D& l) {
  const std::int64_t h = s.hidden_size;
  const std::int64_t norm = s.norm == NormKind::layernorm ? 2 * h : h;  // weight (and bias)
  const bool shared = s.tied_embeddings && head_stage(l) == 0;
  return (s.final_norm ? norm : 0) + (shared ? 0 : s.vocab_size * h / l.tp);
}

namespace {

// DeepSeek-V3's multi-token prediction modules, on the stage with the head: a sparse block,
// the 2h x h projection (split t ways, column-parallel), three norms each.
StageBlocks prediction_modules(const TransformerSpec& s, const Layout3D& l) {
  if (s.mtp_layers == 0) return {};
  const auto b = block_params(s);
  const std::int64_t h = s.hidden_size;
  const std::int64_t norm = s.norm == NormKind::layernorm ? 2 * h : h;
  return {s.mtp_layers * (b.on_gpu(l) + 2 * h * h / l.tp + 3 * norm),
          s.mtp_layers * b.experts_on_gpu(l)};
}

// Parameters of stage `i` on one GPU, `held` its blocks.
std::int64_t stage_params(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                          const StageBlocks& held) {
  const std::int64_t blocks =
      held.params + (i == head_stage(l) ? prediction_modules(s, l).params : 0);
  const std::int64_t embedding = embedding_params(s, l);
  const std::int64_t head = head_params(s, l);  // the head stage is 0 without a pipeline
  if (l.pp == 1) return blocks + embedding + head;
  // Megatron keeps a copy of tied word embeddings for the head, unless one stage holds both;
  // the stage running multi-token prediction builds the word embedding too (its modules embed
  // the next tokens), a copy kept in sync with the first stage's.
  const bool mtp_embedding = s.mtp_layers > 0 && head_stage(l) != 0;
  return blocks + (i == 0 ? embedding : 0) +
         (i == head_stage(l) ? head + (mtp_embedding ? s.vocab_size * s.hidden_size / l.tp : 0)
                             : 0);
}

}  // namespace

// The stage with the most parameters on one GPU (the last on ties: it carries the head): its
// blocks and its parameters.
StageHolding stage_share(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                         std::int64_t layers, const StageBlocks& blocks) {
  const std::int64_t dense = dense_on_stage(s, l, i);
  const std::int64_t experts =
      blocks.experts + (i == head_stage(l) ? prediction_modules(s, l).experts : 0);
  return {i, layers, stage_params(s, l, i, blocks), dense, experts};
}
StageHolding stage_share(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                         std::int64_t layers) {
  return stage_share(s, l, i, layers, stage_blocks(s, l, dense_on_stage(s, l, i), layers));
}
// Stages alike in their blocks, their dense blocks and whether they hold the embedding or the
// head hold alike shares: each kind is priced once.
StageHolding heaviest_params_stage(const TransformerSpec& s, const Layout3D& l) {
  const auto layers = layers_per_stage(s, l);
  std::vector<std::pair<StageKind, StageHolding>> priced;
  StageHolding most;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto at = static_cast<std::int64_t>(i);
    const auto kind = stage_kind(s, l, at, layers[i]);
    const auto seen =
        std::find_if(priced.begin(), priced.end(), [&](const auto& p) { return p.first == kind; });
    auto share = seen != priced.end() ? seen->second : stage_share(s, l, at, layers[i]);
    share.stage = at;
    if (seen == priced.end()) priced.emplace_back(kind, share);
    if (share.params >= most.params) most = share;
  }
  return most;
}

std::int64_t fp8_linear_weights(const TransformerSpec& s, const Layout3D& l, std::int64_t i,
                                std::int64_t layers, std::int64_t dense) {
  std::int64_t weights = 0;
  for (const auto& run : stage_runs(s, dense, layers)) {
    const auto b = block_params(run.block);
    weights += run.layers * ((b.matrices - b.matrix_extras) / l.tp + b.experts_on_gpu(l));
  }
  if (i == head_stage(l) && s.mtp_layers > 0) {  // the prediction modules' block and projection
    const auto b = block_params(s);
    weights += s.mtp_layers * ((b.matrices - b.matrix_extras) / l.tp + b.experts_on_gpu(l) +
                               2 * s.hidden_size * s.hidden_size / l.tp);
  }
  return weights;
}

// Tokens of a sequence one context-parallel rank holds (the sequence divides by 2 cp).
std::int64_t tokens_per_rank(const Layout3D& l) {
  return l.seq_len / l.cp;
}

// The numeric recipe of a layout's framework.
NumericRecipe recipe_of(const Layout3D& l) {
  return l.framework == Framework::fsdp2
             ? fsdp2_recipe(l.precision, l.optimizer)
             : megatron_recipe(l.precision, l.optimizer, l.grad_reduce_bf16);
}

// Whether the experts' states shard over other ranks than the rest's (their own data-parallel
// ranks under expert parallelism).
bool experts_sharded_apart(const TransformerSpec& s, const Layout3D& l) {
  return s.moe.active() && l.sharding != DpSharding::none && l.expert_dp() != l.dp * l.cp;
}

// The elements of a GPU's sharded states on a stage of `layers` blocks holding `params`: 1/n
// of them over the shard ranks, or the experts' 1/edp and the rest's 1/n apart.
std::int64_t sharded_elements(const TransformerSpec& s, const Layout3D& l, std::int64_t params,
                              std::int64_t experts) {
  if (l.sharding == DpSharding::none) return params;
  if (!experts_sharded_apart(s, l)) return ceil_div(params, l.shard_ranks());
  return ceil_div(params - experts, l.shard_ranks()) + ceil_div(experts, l.expert_dp());
}

// Whether the layout's gradient sync waits for the last micro-batch of a step, as no_sync
// makes a data-parallel strategy's: FSDP2 under pipeline parallelism (the stage turns sync
// off for all but the last backward; strategy_traits.cpp). Megatron-LM reduces once per step
// in any case.
bool deferred_sync(const Layout3D& l) {
  return l.framework == Framework::fsdp2 && l.pp > 1;
}

// The training settings the memory model reads, for a layout: dp x cp ranks hold the same
// weights; micro-batches accumulate into the gradients, reduced once per step (Megatron-LM)
// or in every micro-batch (FSDP2).
TrainingConfig layout_training(const Layout3D& l) {
  TrainingConfig c;
  c.precision = l.precision;
  c.optimizer = l.optimizer;
  // torchtitan steps with the fused AdamW unless its foreach is asked for; Megatron-LM with
  // Transformer Engine's or Apex's fused Adam (as the step time prices them).
  const bool stepwise =
      l.optimizer_impl == OptimizerImpl::foreach || l.optimizer_impl == OptimizerImpl::for_loop;
  c.optimizer_impl =
      l.framework == Framework::fsdp2 && stepwise ? l.optimizer_impl : OptimizerImpl::fused;
  c.zero_grad = l.zero_grad;
  c.dp_size = l.dp * l.cp;
  c.micro_batch = l.micro_batch;
  c.seq_len = l.seq_len;
  c.checkpointing = l.recompute;
  c.attention = l.attention;
  c.grad_accum = l.micro_batches;
  c.no_sync = deferred_sync(l);
  c.offload = l.offload;
  return c;
}

LayoutSharding layout_sharding(const Layout3D& l) {
  return {.fsdp2 = l.framework == Framework::fsdp2,
          .shards_optimizer = l.sharding >= DpSharding::optimizer,
          .gathers_in_backward = l.sharding == DpSharding::parameters,
          .hybrid = l.hybrid(),
          .overlap_grad_reduce = l.overlap_grad_reduce,
          .overlap_param_gather = l.overlap_param_gather};
}

}  // namespace dtplan::cost
