// Activation memory: the tensors autograd keeps between forward and backward, per GPU, for a
// micro-batch. Transformers follow Korthikanti et al., "Reducing Activation Recomputation in
// Large Transformer Models" (MLSys 2023), Section 4, generalised term by term to GQA, SwiGLU,
// models without dropout and fp32; layer lists follow what PyTorch autograd saves per op.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan::cost {

struct NamedBytes {
  std::string name;
  Bytes bytes;
};

struct ActivationEstimate {
  bool modelled = false;  // false for a bare parameter count
  Bytes total;            // peak activation bytes per GPU during backward
  std::vector<NamedBytes> terms;
  Bytes model_output;        // bytes of the model's output tensor per GPU (DataParallel gather)
  Bytes loss_bytes;          // what the loss keeps of that output (fp32 copy, log-softmax)
  Bytes logits_and_loss;     // the LM head's logits and loss terms (0 without an LM head)
  std::int64_t seq_len = 0;  // the sequence length used (transformers)
};

// How the loss keeps the logits:
//   torch           torch cross-entropy: an fp32 copy of 16-bit logits, and its fp32
//                   log-softmax (over 1/t of the vocabulary with loss parallelism)
//   vocab_parallel  Megatron-LM's vocab-parallel cross-entropy: the fp32 softmax of the
//                   rank's 1/t of the vocabulary
//   loss_parallel   PyTorch's loss_parallel over logits sharded on the vocabulary (torchtitan
//                   under tensor parallelism): log-softmax and its backward decomposed into
//                   separate fp32 tensors of the rank's 1/t of the vocabulary; at its peak,
//                   in backward, the kept log-softmax, a zero gradient, exp of the
//                   log-softmax and their sum (torch/distributed/tensor/parallel/loss.py,
//                   _nll_loss_and_log_softmax_backward), 16 bytes per logit
//   torch_freed     torch cross-entropy of the logits cast to fp32, the logits deleted before
//                   backward (torchtitan's train step: `del pred`, "to avoid peaking
//                   memory"): forward holds as `torch` does, 10 bytes per 16-bit logit;
//                   backward three fp32 tensors -- the kept log-softmax, nll_loss's dense
//                   gradient of it and log_softmax's backward output -- 12 bytes, the peak
enum class LossKind { torch, vocab_parallel, loss_parallel, torch_freed };

// What one GPU keeps of a transformer: the blocks of its pipeline stage with 1/t of the heads
// and MLP width, the tokens its context-parallel rank holds, and as many micro-batches as its
// pipeline schedule keeps in flight. The whole model on one data-parallel GPU is the default
// shape with `layers` = all of them.
struct ActivationShape {
  std::int64_t micro_batch = 1;
  std::int64_t tokens = 0;  // of each sequence on this GPU (seq_len / cp), positive
  Precision precision = Precision::bf16;
  Attention attention = Attention::flash;
  Checkpointing recompute = Checkpointing::none;
  RecomputeModules recompute_modules;  // what selective recomputation rebuilds (training.hpp)
  // Whose selective policy (training.hpp): per_op keeps each block's input and the outputs of
  // its saved ops (every other GEMM, the fused attention, the reduce-scatters) and rebuilds one
  // block's rest in backward.
  SelectivePolicy selective_policy = SelectivePolicy::modules;
  bool fp8_gemms = false;  // the Linears run as FP8 GEMMs (per_op saves each one's output)
  // Under full checkpointing: every Nth block checkpointed, the others kept whole
  // (TrainingConfig::checkpoint_every).
  std::int64_t checkpoint_every = 1;
  std::int64_t tp = 1;             // heads, key/value heads and MLP width split t ways
  bool sequence_parallel = false;  // the tensor-parallel-replicated tensors split t ways too
  // Expert tensor parallel size (0: tp): each expert's width splits this many ways, and its
  // ranks compute the routed copies of the tokens of etp (not tp) sequence-parallel ranks.
  std::int64_t expert_tp = 0;
  double expert_rows_factor = 1;  // routed rows over the balanced share (padded capacity)
  // Transformer Engine's FP8 Linears save their inputs for backward in FP8 (1 byte): the QKV,
  // output projection, MLP up and down inputs.
  bool fp8_linear_inputs = false;
  // Eager PyTorch (eager_layers): a covered block keeps what each op of transformers' modules
  // saves (eager_saved_bytes_per_token), and its input is the residual stream's type (fp32
  // under autocast).
  std::optional<EagerFlow> eager;
  std::int64_t layers = 0;  // transformer blocks on this GPU
  // Of them, a mixture of experts' dense first blocks (DeepSeek's first_k_dense_replace).
  std::int64_t dense_layers = 0;
  double in_flight = 1;   // micro-batches whose block activations it keeps
  bool embedding = true;  // the first stage: token ids, embedding dropout and norm
  bool head = true;       // the last stage: final norm, head, logits and loss
  LossKind loss = LossKind::torch;
  bool named = true;  // false: the total alone, no list of terms (a search)
};

// One block's activations for one micro-batch of `a`:
//   linear  everything but the attention scores (kept unless recomputed)
//   scores  the attention-score terms: s^2 tensors (eager) or the fp32 log-sum-exp (flash)
//   input   the block's input, what full recomputation keeps as its checkpoint
//   recomputed  the part of `linear` that selective recomputation's modules discard (other
//           than core_attn, which drops the scores), by the shape's modules:
//             layernorm       the two norm outputs: the QKV (or latent down-projection)
//                             input and the MLP (or router) input
//             mla_up_proj     every head's Q, K and V
//             mlp             a dense block's MLP input and inner tensors
//             moe_act         the experts' activation output and inner tensors (the
//                             up-projection's output kept)
//             shared_experts  the shared expert's inner tensors
//             moe             everything the mixture-of-experts layer keeps beyond its input
//           under the per_op policy: `linear` less the block's input and its saved ops' outputs
struct BlockActivations {
  Bytes linear, scores, input, recomputed;
};

// With 16-bit activations, GELU MLP of 4h, dropout on, eager attention and kv heads = heads,
// linear + scores = s*b*h*(34 + 5*a*s/h) (Korthikanti et al., eq. 1); with t-way tensor
// parallelism s*b*h*(10 + 24/t + 5*a*s/(h*t)), and with sequence parallelism
// s*b*h*(34/t + 5*a*s/(h*t)) (ibid., Table 2).
BlockActivations block_activations(const TransformerSpec& t, const ActivationShape& a);

// Every term one GPU keeps at its peak (the start of the backward of its first micro-batch
// in flight): per layer by recompute mode (none: linear + scores; selective: linear, and one
// block's scores rebuilt in backward; full: the block inputs, and one block rebuilt), times
// in_flight; the first stage's token ids and embedding tensors per micro-batch in flight; the
// last stage's final norm, head input, logits and loss for one micro-batch.
ActivationEstimate stage_activations(const TransformerSpec& t, const ActivationShape& a);

// A stage's activations with the micro-batches in flight left open, for a search that prices
// one shape at many places in a pipeline: the bytes of each term kept once per micro-batch in
// flight (the blocks; the first stage's token ids, dropout mask and norm input), and the
// estimate of the terms kept once. at(f) is stage_activations' total with f in flight: each
// term is rounded on its own, as there.
struct InFlightActivations {
  std::array<std::int64_t, 4> per_micro_batch{};
  std::size_t terms = 0;
  // The terms kept once (named if the shape asks; the open ones are not among its terms)
  ActivationEstimate once;
  Bytes at(double in_flight) const;
};
InFlightActivations stage_activations_in_flight(const TransformerSpec& t, const ActivationShape& a);

// Bytes one transformer block keeps for backward with no recomputation, for micro-batch b and
// sequence s on one GPU; without the attention-score terms if !keep_attention_scores.
Bytes layer_activation_bytes(const TransformerSpec& t, std::int64_t b, std::int64_t s, Precision p,
                             Attention attn, bool keep_attention_scores);

// The whole model on one data-parallel GPU (stage_activations with every layer), or the
// layers of a layer-list model; `named` false: a transformer's total alone, no list of terms.
ActivationEstimate estimate_activations(const ModelDesc& m, const TrainingConfig& c,
                                        bool named = true);

}  // namespace dtplan::cost
