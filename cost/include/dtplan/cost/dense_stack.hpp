// The workload dtplan-run executes for a transformer plan: the model's decoder blocks, pre-norm
// as GPT-2 and Llama write them. A block is norm, fused QKV projection (with the model's
// biases), rotary embedding of queries and keys where the model uses it, causal softmax
// attention over each sequence with grouped-query heads (the probabilities materialised, as
// eager PyTorch attention keeps them), the output projection and residual add, then norm, the
// MLP with or without a gate, and the residual add. The token embedding is a lookup (plus
// learned positions where the model has them), the LM head a GEMM against the (tied or untied)
// embedding matrix after the final norm, with a softmax cross-entropy loss; dropout where the
// model has it. What a model has beyond that (sliding windows, soft-capping, ...) is named by
// not_executed().
// `scale` multiplies the head dimension, the MLP width and the vocabulary, so parameters shrink
// by about scale^2.
//
// Measurements written before the runtime executed attention and norms describe the older
// workload (each token attending only to itself, no norms, no positions): dense_stack_from_json
// reads them as StackAttention::value_only so that their predictions can still be made.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/training.hpp"
#include "dtplan/model/transformer.hpp"

namespace dtplan::cost {

enum class StackNorm { none, layernorm, rmsnorm };
enum class StackPositions { none, learned, rotary };
enum class StackAttention { value_only, causal };

struct DenseStack {
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;  // = heads x head_dim x tp
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;
  std::int64_t layers = 0;
  std::int64_t seq_len = 0;
  bool gated = false;  // SwiGLU: gate, up and down matrices
  bool qkv_bias = true;
  bool out_bias = true;  // the attention output projection's
  bool mlp_bias = true;
  bool tied = true;  // the LM head reuses the embedding matrix
  double scale = 1;
  StackAttention attention = StackAttention::causal;
  StackNorm norm = StackNorm::layernorm;  // two per block (before attention, before the MLP)
  bool final_norm = true;                 // before the head
  double norm_eps = 1e-5;                 // GPT-2's layer_norm_epsilon, Llama 3's rms_norm_eps
  StackPositions positions = StackPositions::learned;
  std::int64_t max_positions = 0;  // rows of the learned position table
  double rope_theta = 0;           // rotary base, with rotary positions
  // Activation recomputation as the plan asks: full keeps each block's input and reruns the
  // block's forward in backward; selective keeps everything but the attention probabilities
  // and reruns the attention core (Megatron-LM's default core_attn).
  Checkpointing recompute = Checkpointing::none;
  // The type GEMMs compute in, as torch.autocast runs a Linear: fp32, or under mixed precision
  // 16-bit operands (inputs and weights rounded to bf16 or fp16), fp32 accumulation and a
  // 16-bit result; norms, softmax and the loss in fp32, the residual stream fp32 (see
  // runtime/exec/include/dtplan/runtime/dense_model.hpp for every rounding point).
  ElementType compute = ElementType::fp32;
  // Dropout probabilities as the model has them (0: none), executed in training mode as
  // PyTorch's nn.Dropout: kept elements scaled by 1 / (1 - p). On the attention probabilities
  // (before p v), on the attention and MLP output projections (before the residual adds), on
  // the embeddings (after positions are added). Masks are one byte an element, drawn from
  // dropout_keep() (runtime/exec/include/dtplan/runtime/dropout.hpp).
  double attention_dropout = 0, hidden_dropout = 0, embedding_dropout = 0;
  // Tensor parallelism as Megatron-LM splits a block (without sequence parallelism): the stack
  // is what one of `tp` ranks holds. vocab, heads, kv_heads and ffn are then the rank's shares:
  // the QKV, gate and up projections split by output rows (column-parallel), the attention
  // output and down projections by input columns (row-parallel, their partial outputs summed by
  // an all-reduce before the bias), the embedding and the head by vocabulary rows (a
  // vocab-parallel lookup and loss). hidden, the norms, positions and the row-parallel
  // projections' biases are whole on every rank. 1: the whole model.
  std::int64_t tp = 1;
  // Pipeline parallelism (Megatron-LM's stages of consecutive blocks): the stack is stage
  // `stage` of `pp`, `layers` its own blocks from block `first_layer` of the whole model; the
  // first stage holds the embedding, the last the final norm and the head -- with tied
  // embeddings its own copy of the embedding matrix, whose gradient is summed with the first
  // stage's (Megatron-LM's embedding group). 1: the whole model.
  std::int64_t pp = 1, stage = 0, first_layer = 0;

  bool has_embedding() const { return stage == 0; }
  std::int64_t replica_ranks() const { return tp * pp; }  // ranks holding one model replica
  bool has_head() const { return stage == pp - 1; }
  std::int64_t q_size() const { return heads * head_dim; }
  std::int64_t kv_size() const { return kv_heads * head_dim; }
  std::int64_t qkv_size() const { return q_size() + 2 * kv_size(); }
  std::int64_t batch(std::int64_t tokens) const { return tokens / seq_len; }
  // Parameters of one norm: scale (and shift for LayerNorm) over the hidden size.
  std::int64_t norm_params() const;
  std::int64_t position_params() const;
};

// What the model has that dtplan-run does not execute (each a short phrase, e.g. "query/key
// norms"); empty when it runs the model's blocks as they are.
std::vector<std::string> not_executed(const TransformerSpec& spec);

// Throws dtplan::Error unless 0 < scale <= 1 and seq_len >= 1, for mixtures of experts and
// latent attention (estimated, not run), and when learned positions are fewer than seq_len.
DenseStack dense_stack_of(const TransformerSpec& spec, double scale, std::int64_t seq_len);

// The share of `whole` (tp 1) each of `tp` ranks holds (DenseStack::tp). The vocabulary is
// padded up to a multiple of tp first, as Megatron-LM pads it (the padded rows are ordinary
// tokens of the model it trains). Throws naming the dimension tp does not divide: heads,
// kv_heads (Megatron-LM replicates key/value heads past their count; dtplan-run does not) or ffn.
DenseStack tensor_parallel_share(const DenseStack& whole, std::int64_t tp);
// The whole model (tp 1, the padded vocabulary) a share belongs to; pipeline stages stay as
// they are (pipeline_whole_of joins them).
DenseStack whole_of(const DenseStack& share);

// Stage `stage` of `pp` (DenseStack::pp), each of layers / pp blocks; throws naming layers when
// pp does not divide them, or the stage outside 0 .. pp - 1.
DenseStack pipeline_stage(const DenseStack& whole, std::int64_t pp, std::int64_t stage);
// The whole model a stage belongs to (pp 1, every block).
DenseStack pipeline_whole_of(const DenseStack& stage);
// The whole model any rank's part belongs to: its share and its stage joined (tp 1, pp 1).
DenseStack whole_model_of(const DenseStack& part);

// A unit is what ZeRO-3 gathers at once and what gradients are bucketed by: the embedding,
// each block, and the untied head.
struct DenseUnit {
  std::string name;
  std::int64_t params = 0;
};
std::vector<DenseUnit> units_of(const DenseStack& s);
// What unit `unit` of units_of(s) is (pipeline stages hold some of them).
enum class UnitKind { embedding, block, head };
UnitKind unit_kind(const DenseStack& s, std::int64_t unit);
std::int64_t params_of(const DenseStack& s);

// Forward + backward FLOPs per token of every GEMM: 6 x (every matrix's elements, the head
// included), plus the attention products (2 forward, 4 backward, each 2 x seq x head_dim per
// head; the whole seq x seq square is computed, the causal mask applied after).
double flops_per_token(const DenseStack& s);
// Elements dtplan-run keeps from forward for backward, per token (fp32). Per block: the block
// input, the first norm's output and its two statistics, the fused QKV (after rotary), the
// attention probabilities (heads x seq), the attention output, the residual after attention,
// the second norm's output and statistics, the MLP pre-activations (two with a gate) and the
// activated MLP output. Then the final hidden state, the final norm's output and statistics,
// and the logits. Under full recomputation only the block inputs stay, plus one block's worth
// (the block rerun in backward); under selective one block's probabilities for all layers.
// (The value_only workload: block input, attention output, residual, MLP.)
std::int64_t stored_elements_per_token(const DenseStack& s);

// Bytes of dropout masks dtplan-run keeps from forward for backward, per token: per block the
// attention probabilities' (heads x seq) and two hidden-sized ones (attention and MLP outputs),
// then the embeddings'. Recomputation keeps what it keeps of the probabilities and block
// activations: full one block's masks, selective one block's probability mask (recomputation
// redraws the same masks).
std::int64_t mask_bytes_per_token(const DenseStack& s);

// Scratch elements dtplan-run keeps for one micro-step of `tokens` tokens: backward's
// temporaries (three hidden-sized, the MLP gradients, the attention-output and fused QKV
// gradients) and the attention kernels' workspace (attention_scratch_elements); under 16-bit
// compute also mixed_precision_elements; in fp32 with hidden dropout or tensor parallelism one
// hidden-sized temporary (a projection's gradient through its mask, a row-parallel
// projection's partial output); with tensor parallelism the vocab-parallel loss's three values
// per token (the row maximum, the sum of exponentials, the target's logit).
std::int64_t scratch_elements(const DenseStack& s, std::int64_t tokens);
// The attention kernels' workspace: one (sequence, head)'s seq x seq square of probability
// gradients, before they become score gradients in place of the probabilities; under 16-bit
// compute also one head's seq x head_dim key or value gradient before it is rounded.
std::int64_t attention_scratch_elements(const DenseStack& s);
// What 16-bit compute adds (0 in fp32): the rounded copy of one unit's weights (the largest
// unit), one weight gradient before it is rounded (the largest matrix), and one hidden-sized
// temporary (a projection's rounded output before the residual add, a rounded copy of the
// residual's gradient).
std::int64_t mixed_precision_elements(const DenseStack& s, std::int64_t tokens);
// Its parts: the most parameters of one unit, the most elements of one weight matrix (the
// head's, QKV, the output projection or an MLP matrix).
std::int64_t largest_unit(const DenseStack& s);
std::int64_t largest_matrix(const DenseStack& s);
// The extra element-wise passes of 16-bit compute in one micro-step, forward and backward with
// what recomputation reruns (none in fp32), as dtplan-run makes them: `count` passes of
// `bytes` each. A rounding or a copy reads and writes 4 bytes per element, the accumulation of a
// rounded result 12, a zero fill 4.
struct ElementPass {
  double bytes = 0, count = 0;
  bool backward = false;
};
std::vector<ElementPass> mixed_precision_passes(const DenseStack& s, std::int64_t tokens);

// Dropout's work in one micro-step as dtplan-run does it (nothing without dropout): the mask
// elements drawn (one hash each; the attention's only on and below the diagonal) and the
// element-wise passes, forward and backward with what recomputation reruns. A pass that drops
// reads 4 bytes and a mask byte and writes 4 (9 bytes an element), a copy 8, a rounding 8, an
// add of the residual 12; a square's entries above the diagonal are written as zero (1 byte).
struct DropoutWork {
  double forward_draws = 0, backward_draws = 0;  // elements
  std::vector<ElementPass> passes;
};
DropoutWork dropout_work(const DenseStack& s, std::int64_t tokens);

// The GEMMs of one micro-step of `tokens` tokens, forward and backward (each Linear: one
// forward GEMM, two backward GEMMs for the input and weight gradients).
struct Gemm {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t count = 0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
           static_cast<double>(count);
  }
};
std::vector<Gemm> gemms_of(const DenseStack& s, std::int64_t tokens);
// The attention products of one micro-step (none in the value_only workload): forward
// scores q k^T and p v; backward dv = p^T do, dp = do v^T, dq = ds k, dk = ds^T q; each a
// seq x seq x head_dim GEMM per sequence and head.
struct AttentionGemms {
  std::vector<Gemm> forward, backward;
};
AttentionGemms attention_gemms_of(const DenseStack& s, std::int64_t tokens);

nlohmann::json to_json(const DenseStack& s);
// Reads what to_json wrote (inside a measurement file); throws naming the key on errors.
DenseStack dense_stack_from_json(const ObjectReader& r);

}  // namespace dtplan::cost
