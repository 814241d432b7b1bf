// Transformer language models: the shape of one model (from a Hugging Face config.json or a
// preset) and its exact parameter count by component.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dtplan {

class ObjectReader;

// up/act/down (2 matrices), or gate/up/down (3 matrices) with SiLU (SwiGLU) or tanh-GELU
// (GeGLU, Gemma) on the gate.
enum class MlpKind { gelu, swiglu, geglu };
inline bool is_gated(MlpKind k) {
  return k != MlpKind::gelu;
}
enum class NormKind { layernorm, rmsnorm };
enum class PositionKind { learned, rotary };
// What sits on top of the transformer, from the config's "architectures".
enum class HeadKind {
  causal_lm,                // *ForCausalLM, GPT2LMHeadModel: vocabulary projection
  base,                     // *Model: hidden states only
  masked_lm,                // BertForMaskedLM: transform + tied decoder with bias
  pretraining,              // BertForPreTraining: masked LM + pooler + next-sentence head
  sequence_classification,  // *ForSequenceClassification: a num_labels projection
};

// A mixture-of-experts MLP (Shazeer et al. 2017; Mixtral, Qwen-MoE): a router scores
// `experts` routed experts per token, each token runs through the top `experts_per_token` of
// them, and through the always-active shared expert when `shared_ffn_size` > 0. Each expert is
// an MLP of the model's kind (gate, up, down under SwiGLU).
struct MoeSpec {
  std::int64_t experts = 0;            // routed experts per layer; 0: a dense MLP
  std::int64_t experts_per_token = 0;  // top-k
  std::int64_t expert_ffn_size = 0;    // intermediate size of one routed expert
  std::int64_t shared_ffn_size = 0;    // intermediate size of the shared expert(s), 0 if none
  bool shared_expert_gate = false;     // Qwen-MoE: a sigmoid gate Linear(hidden, 1) on it
  bool router_bias = false;            // the router's Linear has a bias
  // Routing semantics the exports carry (they change no count or cost): whether the top-k
  // weights are renormalised to sum to 1 (Mixtral; Qwen's norm_topk_prob), and the
  // load-balancing loss coefficient (router_aux_loss_coef, 0 when not stated).
  bool normalize_top_k = true;
  double aux_loss_coef = 0;
  // DeepSeek-V3's router: sigmoid scores (not softmax), a load-balancing loss per sequence,
  // the routed experts' summed output scaled by routed_scale, and its per-expert bias
  // (counted as router_bias) only steering the top-k choice, updated outside the gradient.
  bool sigmoid_scores = false;
  bool sequence_aux_loss = false;
  double routed_scale = 1.0;
  bool selection_bias = false;
  // When the spec is one GPU's shard under expert parallelism (parallel3d.cpp): the routed
  // experts the GPU holds (0: all of them), and the routed rows it computes per token of the
  // shard as a share of the k copies (expert tensor parallel size / tensor parallel size: a
  // shard's tokens are those of its tensor-parallel group, the experts see those of their
  // expert-tensor-parallel group). Neither changes a parameter count.
  std::int64_t local_experts = 0;
  double routed_rows_share = 1.0;
  // DeepSeek's first_k_dense_replace: the first blocks have a dense MLP of the model's
  // ffn_size instead (DeepSeek-V3: 3 of 61). block_runs() splits a model or a stage by it.
  std::int64_t first_dense_layers = 0;
  // Node-limited routing (DeepSeek-V3's n_group / topk_group): the experts fall into `groups`
  // groups and a token's k experts come from at most `groups_per_token` of them; 0: unlimited.
  std::int64_t groups = 0;
  std::int64_t groups_per_token = 0;
  bool active() const { return experts > 0; }
  std::int64_t experts_on_gpu() const { return local_experts > 0 ? local_experts : experts; }
};

// Multi-head latent attention (DeepSeek-V2/V3): queries pass through a low-rank bottleneck
// of q_lora_rank (0: one full projection), keys and values come from one compressed latent of
// kv_lora_rank plus a rotary key of qk_rope_head_dim shared by the heads, each latent normed
// and up-projected per head to the keys' non-rotary part and to the values. A query/key head
// is head_dim = qk_nope_head_dim + qk_rope_head_dim wide, a value head v_head_dim.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;  // 0: not latent attention
  std::int64_t qk_rope_head_dim = 0;
  bool active() const { return kv_lora_rank > 0; }
};

struct TransformerSpec {
  std::string model_type;  // Hugging Face model_type: gpt2, gpt_neox, llama, ...
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;  // grouped-query attention; = num_heads for multi-head
  std::int64_t head_dim = 0;      // usually hidden_size / num_heads
  std::int64_t ffn_size = 0;      // MLP intermediate size
  std::int64_t max_positions = 0;
  std::int64_t sliding_window = 0;  // tokens each token attends back to; 0: all earlier ones
  // With a sliding window: every Nth layer (1-based: layers N, 2N, ...) attends to all earlier
  // tokens instead, Megatron-LM's window_attn_skip_freq (Gemma 2 and gpt-oss: 2, Gemma 3: 6);
  // 0: every layer uses the window (Mistral v0.1, Phi-3).
  std::int64_t full_attention_every = 0;
  // The layers whose pattern windowed_share() averages over: 0, num_layers; a pipeline
  // stage's shard keeps the whole model's count, so its layers attend as the model's average.
  std::int64_t window_pattern_layers = 0;
  double rope_theta = 0;             // rotary base (rope_theta); 0 with learned positions
  std::int64_t type_vocab_size = 0;  // BERT token-type embeddings; 0 otherwise
  MlpKind mlp = MlpKind::gelu;
  // Hugging Face's "gelu_new" (NewGELUActivation): the tanh approximation written as eight
  // tensor ops (a pow, three scalings, two adds, tanh and a product) rather than one kernel.
  bool gelu_as_tensor_ops = false;
  NormKind norm = NormKind::layernorm;
  PositionKind positions = PositionKind::learned;
  bool tied_embeddings = true;
  bool qkv_bias = true;         // biases on the query/key/value projections
  bool attn_out_bias = true;    // bias on the attention output projection
  bool mlp_bias = true;         // biases on the MLP projections
  bool embedding_norm = false;  // a norm right after the embeddings (BERT)
  bool final_norm = true;       // a norm before the head (decoders)
  HeadKind head = HeadKind::causal_lm;
  std::int64_t num_labels = 0;  // sequence classification
  bool pooler = false;          // BERT pooler: dense h x h + bias
  // Dropout probabilities (0: none): on the attention probabilities, after the attention and
  // MLP output projections, after the embeddings.
  double attention_dropout = 0;
  double hidden_dropout = 0;
  double embedding_dropout = 0;
  bool qk_norm = false;  // Qwen3: RMSNorm over head_dim on each query and key head
  // Norms in each block: 2 (before attention and before the MLP), or 4 where the block also
  // normalises each sub-layer's output before the residual add (Gemma 2 and 3).
  std::int64_t norms_per_layer = 2;
  bool attention_sinks = false;  // gpt-oss: one learned logit per head that absorbs attention
  // tanh soft-capping, c tanh(x / c) (Gemma 2): of the attention scores (inside a fused kernel
  // that supports it, a separate s x s pass in eager attention) and of the final logits (three
  // element-wise passes over the logits in Hugging Face's forward); 0: none.
  double attn_logit_softcap = 0;
  double final_logit_softcap = 0;
  MoeSpec moe;  // every block's MLP when moe.active() (but the first_dense_layers)
  MlaSpec mla;
  std::int64_t v_head_dim = 0;  // a value head's width; 0: head_dim (all but latent attention)
  // DeepSeek-V3's multi-token prediction (num_nextn_predict_layers): each module a block of
  // the model's (sparse) kind, a projection of [norm(h); norm(embedding)] from 2h to h, two
  // norms and an output norm; the embedding and the LM head are the model's, shared.
  std::int64_t mtp_layers = 0;

  std::int64_t q_size() const { return num_heads * head_dim; }
  std::int64_t kv_size() const { return num_kv_heads * head_dim; }  // the keys' width
  std::int64_t v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  std::int64_t v_size() const { return num_kv_heads * v_dim(); }  // the values' width
  std::int64_t o_size() const { return num_heads * v_dim(); }     // the output projection's input
  // Layers of `layers` (a model's or a pipeline stage's) that attend through the sliding
  // window, and their share; 0 without a window.
  std::int64_t windowed_layers(std::int64_t layers) const;
  double windowed_share() const;
};

// True when the Hugging Face module of `s`'s model_type computes the query, key and value in one
// Linear (GPT-2's c_attn, GPT-NeoX's query_key_value, ...), false for separate q/k/v_proj.
bool fuses_qkv(const TransformerSpec& s);

struct ParamComponent {
  std::string name;  // embeddings, attention, mlp, norms, head
  std::int64_t params = 0;
};

struct TransformerParams {
  std::int64_t embeddings = 0;  // token (+ learned position, token-type, embedding norm)
  std::int64_t attention = 0;   // all layers
  std::int64_t mlp = 0;         // all layers: dense MLPs, or routers and every expert
  std::int64_t norms = 0;       // per-layer norms and the final norm
  std::int64_t head = 0;        // untied LM head, MLM transform, pooler, classifier
  std::int64_t mtp = 0;         // multi-token prediction modules, beside the model
  std::int64_t per_layer = 0;   // one transformer block (a sparse one in a mixture of experts)
  // What one token runs through: equal to total() for a dense model; for a mixture of experts
  // the router, the shared expert and experts_per_token routed experts per layer.
  std::int64_t active = 0;
  std::int64_t total() const { return embeddings + attention + mlp + norms + head + mtp; }
  std::vector<ParamComponent> components() const;
};

// Exact parameter count. Throws dtplan::Error if the spec is inconsistent.
// The matrices of one block's MLP that a token runs through (router and shared expert
// included) and all of them; equal for a dense MLP. Biases included.
std::int64_t mlp_active_params(const TransformerSpec& spec);
std::int64_t mlp_params(const TransformerSpec& spec);
TransformerParams count_parameters(const TransformerSpec& spec);

// A run of consecutive blocks of one kind: `layers` of them, each shaped as `block` (whose
// num_layers is `layers` and which has no dense first layers of its own).
struct BlockRun {
  TransformerSpec block;
  std::int64_t layers = 0;
};
// The blocks of layers [first, first + count) in order, split where a mixture of experts'
// dense first layers end; one run for a model whose blocks are all alike.
// At most two runs (the dense first blocks, then the rest), held in place: the planner asks
// for them in every layout it prices, where a heap allocation each time showed in profiles.
class BlockRuns {
 public:
  // `block` holding `layers` blocks: its num_layers set to them, no dense prefix of its own.
  void add(const TransformerSpec& block, std::int64_t layers);
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const BlockRun& operator[](std::size_t i) const { return runs_[i]; }
  const BlockRun& front() const { return runs_[0]; }
  const BlockRun& back() const { return runs_[size_ - 1]; }
  const BlockRun* begin() const { return runs_.data(); }
  const BlockRun* end() const { return runs_.data() + size_; }

 private:
  std::array<BlockRun, 2> runs_;
  std::size_t size_ = 0;
};
BlockRuns block_runs(const TransformerSpec& spec, std::int64_t first, std::int64_t count);
BlockRuns block_runs(const TransformerSpec& spec);
// The sum of count_parameters(run.block).per_layer x run.layers over the model's blocks.
std::int64_t blocks_params(const TransformerSpec& spec);

// The parameter tensors of one block as the model's modules register them: weights and biases
// apart, query/key/value in one tensor where the Hugging Face model fuses them (gpt2's c_attn,
// gpt_neox's and bloom's query_key_value, mpt's Wqkv, phi3's qkv_proj). They sum to
// count_parameters().per_layer. DeepSpeed ZeRO-3 before v0.6 gathers them one by one.
std::vector<std::int64_t> layer_parameter_tensors(const TransformerSpec& spec);
// The same tensors grouped by the submodule that holds them, in the order forward calls the
// submodules: norm, query/key/value (one or three), output projection, norm, MLP projections.
std::vector<std::vector<std::int64_t>> layer_submodules(const TransformerSpec& spec);
// The tensors outside the blocks (embeddings, final norm, head), summing to the rest of
// count_parameters(); a head's parts beyond its projection count as one tensor.
std::vector<std::int64_t> root_parameter_tensors(const TransformerSpec& spec);

// Checks sizes are positive and heads divide as attention requires.
void validate(const TransformerSpec& spec, const std::string& origin);

// Reads a Hugging Face config.json object. Keys that Hugging Face defines but dtplan does not
// need are accepted; keys dtplan reads are type-checked. Unsupported model_type throws.
TransformerSpec spec_from_hf_config(const ObjectReader& config);

std::vector<std::string> supported_model_types();

// Tokens per sample: `seq_len`, or the maximum positions when 0; throws when learned
// positions cannot cover it.
std::int64_t sequence_length(const TransformerSpec& t, std::int64_t seq_len);

}  // namespace dtplan
