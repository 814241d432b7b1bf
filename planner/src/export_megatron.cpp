// Megatron-LM arguments for a layout (see export_megatron.hpp).
#include "dtplan/planner/export_megatron.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <string_view>

#include "dtplan/model/error.hpp"

namespace dtplan::planner {
namespace {

using Args = std::vector<std::string>;

void add(Args& a, const std::string& flag, std::int64_t value) {
  a.push_back(flag);
  a.push_back(std::to_string(value));
}

void add(Args& a, const std::string& flag, const std::string& value) {
  a.push_back(flag);
  a.push_back(value);
}

// A number as Megatron-LM's argument parser reads it: an integer when whole (--rotary-base
// is an int), else the shortest decimal.
std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(std::llround(v));
  std::ostringstream o;
  o << v;
  return o.str();
}

// Megatron-LM's MoE layer with every expert's GEMMs grouped, as dtplan times them.
void mixture_of_experts(Args& a, const MoeSpec& m, std::int64_t layers) {
  add(a, "--num-experts", m.experts);
  add(a, "--moe-router-topk", m.experts_per_token);
  add(a, "--moe-ffn-hidden-size", m.expert_ffn_size);
  if (m.shared_ffn_size > 0) add(a, "--moe-shared-expert-intermediate-size", m.shared_ffn_size);
  if (m.shared_expert_gate) a.emplace_back("--moe-shared-expert-gate");
  // Softmax over all experts without renormalising the top k (Qwen's norm_topk_prob false);
  // Megatron-LM's default, softmax over the top k, equals renormalising them.
  if (!m.normalize_top_k) a.emplace_back("--moe-router-pre-softmax");
  if (m.aux_loss_coef > 0) {
    add(a, "--moe-router-load-balancing-type", m.sequence_aux_loss ? "seq_aux_loss" : "aux_loss");
    add(a, "--moe-aux-loss-coeff", number_text(m.aux_loss_coef));
  }
  // DeepSeek-V3's router: sigmoid scores, the auxiliary-loss-free per-expert bias, node-limited
  // routing (experts from at most group_topk of num_groups groups), the routed output scaled.
  if (m.sigmoid_scores) add(a, "--moe-router-score-function", "sigmoid");
  if (m.selection_bias) a.emplace_back("--moe-router-enable-expert-bias");
  if (m.groups > 0 && m.groups_per_token > 0) {
    add(a, "--moe-router-num-groups", m.groups);
    add(a, "--moe-router-group-topk", m.groups_per_token);
  }
  if (m.routed_scale != 1.0)
    add(a, "--moe-router-topk-scaling-factor", number_text(m.routed_scale));
  // The dense first blocks: 0 for each, 1 for each sparse one.
  if (m.first_dense_layers > 0) {
    add(a, "--moe-layer-freq",
        "([0]*" + std::to_string(m.first_dense_layers) + "+[1]*" +
            std::to_string(layers - m.first_dense_layers) + ")");
  }
  a.emplace_back("--moe-grouped-gemm");
}

// Multi-head latent attention (Megatron-LM's MLA) in place of the query/key/value widths.
void latent_attention(Args& a, const TransformerSpec& s) {
  a.emplace_back("--multi-latent-attention");
  if (s.mla.q_lora_rank > 0) add(a, "--q-lora-rank", s.mla.q_lora_rank);
  add(a, "--kv-lora-rank", s.mla.kv_lora_rank);
  add(a, "--qk-head-dim", s.head_dim - s.mla.qk_rope_head_dim);
  add(a, "--qk-pos-emb-head-dim", s.mla.qk_rope_head_dim);
  add(a, "--v-head-dim", s.v_dim());
}

}  // namespace

std::optional<std::string> megatron_model_problem(const TransformerSpec& s) {
  std::string missing;
  const auto note = [&missing](bool present, const char* what) {
    if (present) missing += (missing.empty() ? "" : ", ") + std::string(what);
  };
  note(s.mlp == MlpKind::geglu, "a GeGLU MLP (tanh GELU on the gate)");
  note(s.norms_per_layer == 4, "norms on the sub-layers' outputs");
  note(s.attn_logit_softcap > 0 || s.final_logit_softcap > 0, "tanh soft-capping");
  note(s.attention_sinks, "attention sinks");
  note(s.moe.active() && s.moe.router_bias && !s.moe.selection_bias, "a router with a bias");
  if (missing.empty()) return std::nullopt;
  return "Megatron-LM's arguments cannot express " + missing + " of model_type " + s.model_type;
}

namespace {

// Exporting without what the arguments cannot state would train a different model.
void check_expressible(const TransformerSpec& s) {
  if (const auto why = megatron_model_problem(s)) throw FieldError("export_megatron", *why);
}

void model_shape(Args& a, const TransformerSpec& s, std::int64_t seq_len) {
  check_expressible(s);
  add(a, "--num-layers", s.num_layers);
  add(a, "--hidden-size", s.hidden_size);
  add(a, "--ffn-hidden-size", s.ffn_size);
  add(a, "--num-attention-heads", s.num_heads);
  if (s.mla.active()) {
    latent_attention(a, s);
  } else if (s.head_dim * s.num_heads != s.hidden_size) {
    add(a, "--kv-channels", s.head_dim);
  }
  if (s.num_kv_heads != s.num_heads && !s.mla.active()) {
    a.emplace_back("--group-query-attention");
    add(a, "--num-query-groups", s.num_kv_heads);
  }
  add(a, "--seq-length", seq_len);
  add(a, "--max-position-embeddings", std::max(s.max_positions, seq_len));
  add(a, "--position-embedding-type",
      s.positions == PositionKind::rotary ? "rope" : "learned_absolute");
  if (s.positions == PositionKind::rotary) add(a, "--rotary-base", number_text(s.rope_theta));
  // Megatron-LM's dropouts default to 0.1; a model with other probabilities says them.
  if (s.attention_dropout != 0.1) add(a, "--attention-dropout", number_text(s.attention_dropout));
  if (s.hidden_dropout != 0.1) add(a, "--hidden-dropout", number_text(s.hidden_dropout));
  add(a, "--normalization", s.norm == NormKind::rmsnorm ? "RMSNorm" : "LayerNorm");
  if (s.mlp == MlpKind::swiglu) a.emplace_back("--swiglu");
  if (!s.tied_embeddings) a.emplace_back("--untie-embeddings-and-output-weights");
  if (!s.mlp_bias && !s.attn_out_bias) {
    a.emplace_back("--disable-bias-linear");
    if (s.qkv_bias) a.emplace_back("--add-qkv-bias");
  }
  if (s.qk_norm) a.emplace_back("--qk-layernorm");
  // Transformer Engine's (left, right) window: the w - 1 earlier tokens and none after.
  if (s.sliding_window > 0 && s.sliding_window < seq_len) {
    add(a, "--window-size", std::to_string(s.sliding_window - 1) + ",0");
    // Full attention on layers N, 2N, ... (1-based), the others windowed.
    if (s.full_attention_every > 0) add(a, "--window-attn-skip-freq", s.full_attention_every);
  }
  if (s.moe.active()) mixture_of_experts(a, s.moe, s.num_layers);
  if (s.mtp_layers > 0) add(a, "--mtp-num-layers", s.mtp_layers);
}

// The stage split Megatron-LM is told: nothing for an even split, the embedding-and-loss
// rule, or the first and last stages' layer counts with the rest even.
// Megatron-LM's --pipeline-model-parallel-layout of the layout's chunks in layer order
// (megatron/core/transformer/pipeline_parallel_layer_layout.py): the embedding (E) first, each
// chunk's transformer layers (t), the multi-token prediction modules (m) and the loss (L) last,
// chunks apart by "|" (virtual stage r of pipeline rank k is chunk r x pp + k).
std::string layer_layout(const TransformerSpec& s, const cost::Layout3D& l) {
  const auto chunks = cost::model_chunks(s, l);
  std::string out = "E";
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    if (c > 0) out += '|';
    out.append(static_cast<std::size_t>(chunks[c].layers), 't');
  }
  out.append(static_cast<std::size_t>(s.mtp_layers), 'm');
  return out + "L";
}

// The stage split: even (nothing to say), Megatron-LM's rule that counts the embedding and the
// loss as a layer each, or the first and last stages' layers with the rest even -- each only
// where every model chunk comes out as dtplan splits it (Megatron-LM divides each of those
// evenly over the virtual stages) -- else the layer layout, chunk by chunk.
void stage_split(Args& a, const TransformerSpec& s, const cost::Layout3D& l) {
  const auto layers = cost::layers_per_stage(s, l);
  const std::int64_t v = l.interleave;
  const auto whole = [&](std::int64_t n) { return n % v == 0; };
  const bool middle_even =
      std::all_of(layers.begin() + 1, layers.end() - 1, [&](auto n) { return n == layers[1]; });
  const bool even =
      std::all_of(layers.begin(), layers.end(), [&](auto n) { return n == layers.front(); });
  const bool chunks_even = std::all_of(layers.begin(), layers.end(), whole);
  if (even && chunks_even) {
    if (v > 1) add(a, "--num-virtual-stages-per-pipeline-rank", v);
    return;
  }
  const std::int64_t rule = (s.num_layers + 2) / l.pp;
  const bool embedding_and_loss = (s.num_layers + 2) % (l.pp * v) == 0 &&
                                  layers.front() == rule - 1 && layers.back() == rule - 1 &&
                                  middle_even && layers[1] == rule;
  if (embedding_and_loss) {
    if (v > 1) add(a, "--num-virtual-stages-per-pipeline-rank", v);
    a.emplace_back("--account-for-embedding-in-pipeline-split");
    a.emplace_back("--account-for-loss-in-pipeline-split");
    return;
  }
  if (middle_even && chunks_even) {
    if (v > 1) add(a, "--num-virtual-stages-per-pipeline-rank", v);
    add(a, "--decoder-first-pipeline-num-layers", layers.front());
    add(a, "--decoder-last-pipeline-num-layers", layers.back());
    return;
  }
  add(a, "--pipeline-model-parallel-layout", layer_layout(s, l));
}

void parallel_sizes(Args& a, const TransformerSpec& s, const cost::Layout3D& l) {
  add(a, "--tensor-model-parallel-size", l.tp);
  add(a, "--pipeline-model-parallel-size", l.pp);
  add(a, "--context-parallel-size", l.cp);
  if (l.cp > 1) add(a, "--cp-comm-type", std::string(cost::name_of(l.cp_comm)));
  if (l.sequence_parallel) a.emplace_back("--sequence-parallel");
  // Experts laid out apart (parallel folding) send tokens to them by all-to-all, Megatron-LM's
  // alltoall dispatcher; its default (allgather) gathers every token over the tp x ep ranks.
  if (s.moe.active()) {
    add(a, "--expert-model-parallel-size", l.ep);
    add(a, "--expert-tensor-parallel-size", l.expert_tp());
    if (l.deepep) {
      add(a, "--moe-token-dispatcher-type", "flex");
      add(a, "--moe-flex-dispatcher-backend", "deepep");
    } else if (l.ep > 1 || l.expert_tp() != l.tp) {
      add(a, "--moe-token-dispatcher-type", "alltoall");
    }
    if (l.overlap_ep_comm) {
      a.emplace_back("--overlap-moe-expert-parallel-comm");
      a.emplace_back("--delay-wgrad-compute");
    }
    if (l.capacity_factor > 0) {
      add(a, "--moe-expert-capacity-factor", number_text(l.capacity_factor));
      a.emplace_back("--moe-pad-expert-input-to-capacity");
    }
  }
  if (l.pp > 1) {
    const auto schedule = l.pipeline_schedule();
    if (schedule != cost::PipelineSchedule::one_f_one_b &&
        schedule != cost::PipelineSchedule::interleaved) {
      throw FieldError("export_megatron", "schedule " + std::string(cost::name_of(schedule)) +
                                              ": Megatron-LM runs 1F1B and interleaved 1F1B");
    }
    stage_split(a, s, l);
  }
}

void training(Args& a, const cost::Layout3D& l) {
  add(a, "--micro-batch-size", l.micro_batch);
  add(a, "--global-batch-size", l.global_batch());
  // Selective recomputation of the default set (core_attn) is Megatron-LM's default list; of
  // no module at all, no recomputation (its nargs="+" list cannot be empty).
  const auto& modules = l.recompute_modules;
  if (l.recompute == Checkpointing::selective && modules.bits != 0) {
    add(a, "--recompute-granularity", "selective");
    if (!modules.is_default()) {
      a.emplace_back("--recompute-modules");
      for (const auto& named : kRecomputeModules)
        if (modules.has(named.value)) a.emplace_back(named.name);
    }
  }
  if (l.recompute == Checkpointing::full) {
    add(a, "--recompute-granularity", "full");
    add(a, "--recompute-method", "uniform");
    add(a, "--recompute-num-layers", 1);
  }
  const auto type = compute_type(l.precision);
  if (type == "bf16") a.emplace_back("--bf16");
  if (type == "fp16") a.emplace_back("--fp16");
  // FP8 Linear GEMMs: E4M3 forward, E5M2 gradients (hybrid), Transformer Engine's recipe.
  if (l.fp8 != Fp8Recipe::none) {
    add(a, "--fp8-format", "hybrid");
    add(a, "--fp8-recipe", std::string(name_of(l.fp8)));
  }
  if (l.sharding == cost::DpSharding::optimizer) a.emplace_back("--use-distributed-optimizer");
  if (l.overlap_grad_reduce) a.emplace_back("--overlap-grad-reduce");
  if (l.overlap_param_gather) a.emplace_back("--overlap-param-gather");
  if (l.ddp_bucket_params > 0) add(a, "--ddp-bucket-size", std::to_string(l.ddp_bucket_params));
  if (l.grad_reduce_bf16) a.emplace_back("--grad-reduce-in-bf16");
  if (l.fp8_param_gather) a.emplace_back("--fp8-param-gather");
  if (l.tp_comm_overlap) a.emplace_back("--tp-comm-overlap");
  // Megatron Core's optimizer CPU offload, all of it on the host (its documentation: these
  // three flags together).
  if (l.offload == Offload::optimizer) {
    a.emplace_back("--optimizer-cpu-offload");
    add(a, "--optimizer-offload-fraction", "1.0");
    a.emplace_back("--use-precision-aware-optimizer");
  }
  // --optimizer adam is Megatron-LM's AdamW (decoupled weight decay); sgd keeps a momentum
  // buffer unless --sgd-momentum is 0.
  const bool sgd = l.optimizer == Optimizer::sgd || l.optimizer == Optimizer::sgd_momentum;
  add(a, "--optimizer", sgd ? "sgd" : "adam");
  if (l.optimizer == Optimizer::sgd) add(a, "--sgd-momentum", 0);
}

}  // namespace

std::vector<std::string> megatron_arguments(const ModelDesc& m, const cost::Layout3D& l) {
  if (!m.transformer) {
    throw FieldError("export_megatron", "model " + m.name + " has no layer shapes");
  }
  if (l.framework != cost::Framework::megatron) {
    throw FieldError(
        "export_megatron",
        "the layout runs under " + std::string(cost::name_of(l.framework)) + ", not Megatron-LM");
  }
  Args a;
  model_shape(a, *m.transformer, l.seq_len);
  parallel_sizes(a, *m.transformer, l);
  training(a, l);
  return a;
}

namespace {

// A word as bash reads it back: single-quoted when it holds anything but letters, digits and
// the characters of flags, numbers and paths (--moe-layer-freq's "([0]*3+[1]*58)" does).
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_.,/=:+").find(c) != std::string_view::npos;
  });
  if (plain) return w;
  std::string out = "'";
  for (const char c : w)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string megatron_args_file(const ModelDesc& m, const cost::Layout3D& l) {
  const auto args = megatron_arguments(m, l);
  std::string out = "# Megatron-LM arguments for " + m.name + " on " + std::to_string(l.gpus()) +
                    " GPUs: tp " + std::to_string(l.tp) + " x cp " + std::to_string(l.cp) +
                    " x pp " + std::to_string(l.pp) + " x dp " + std::to_string(l.dp) +
                    (l.ep > 1 || l.etp > 0 ? ", experts ep " + std::to_string(l.ep) + " x etp " +
                                                 std::to_string(l.expert_tp())
                                           : std::string()) +
                    " (written by dtplan)\n"
                    "# torchrun <launch args> pretrain_gpt.py \"${DTPLAN_MEGATRON_ARGS[@]}\" "
                    "<data, tokenizer, optimizer and schedule arguments>\n"
                    "DTPLAN_MEGATRON_ARGS=(\n";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool value_follows = i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0;
    out += "  " + shell_word(args[i]);
    if (value_follows) out += " " + shell_word(args[++i]);
    out += "\n";
  }
  return out + ")\n";
}

}  // namespace dtplan::planner
