// Activation memory: the tensors autograd keeps between forward and backward, per GPU, for a
// micro-batch. Transformers follow Korthikanti et al., "Reducing Activation Recomputation in
// Large Transformer Models" (MLSys 2023), Section 4, generalised term by term to GQA, SwiGLU,
// models without dropout and fp32; layer lists follow what PyTorch autograd saves per op.
#pragma once

#include <string>
#include <vector>

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
  std::int64_t seq_len = 0;  // the sequence length used (transformers)
};

// Bytes one transformer block keeps for backward with no recomputation, for micro-batch b and
// sequence s; without the attention-score terms if !keep_attention_scores. With 16-bit
// activations, GELU MLP of 4h, dropout on, eager attention and kv heads = heads, this is
// exactly s*b*h*(34 + 5*a*s/h) (Korthikanti et al., eq. 1).
Bytes layer_activation_bytes(const TransformerSpec& t, std::int64_t b, std::int64_t s, Precision p,
                             Attention attn, bool keep_attention_scores);

ActivationEstimate estimate_activations(const ModelDesc& m, const TrainingConfig& c);

}  // namespace dtplan::cost
