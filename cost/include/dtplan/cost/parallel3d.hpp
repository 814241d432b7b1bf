// Tensor, pipeline and sequence parallelism combined with data parallelism (Megatron-LM style):
// per-GPU memory and step time of a dp x tp x pp layout.
//
// Memory (mixed precision, Megatron's bf16 weights with an fp32 main-gradient buffer):
//   weights 2 B + main gradients 4 B + fp32 master weights 4 B + Adam's m and v 8 B per
//   parameter, the last 12 B divided by dp under the distributed optimizer (Megatron-LM
//   docs, "Distributed Optimizer": 18 B per parameter, 6 + 12/d with it). Buffers and
//   overhead as for every strategy (memory.hpp): NCCL's buffers per communicator the GPU
//   uses (tp, cp, dp x cp, pp), the CUDA context and the allocator's slack. A GPU holds 1/t of its
//   stage's matrices; norms are replicated; the first stage also holds 1/t of the embedding, the
//   last the LM head. Activations: the one activation model (activations.hpp, stage_activations)
//   with the layout's shape -- per layer and micro-batch, 16-bit, Megatron's GPT with dropout and
//   eager attention (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
//   Transformer Models", Table 2; s sequence, b micro-batch, h hidden, a heads, t
//   tensor-parallel size):
//     no parallelism                  sbh (34 + 5as/h)
//     tensor parallel                 sbh (10 + 24/t + 5as/(ht))
//     tensor + sequence parallel      sbh (34/t + 5as/(ht))
//     selective recompute             the 5as/h terms dropped (one block's rebuilt in backward)
//     full recompute                  2sbh (the layer input; /t with sequence parallelism)
//   generalised term by term to GQA, SwiGLU, no dropout and fused attention (which keeps an
//   fp32 log-sum-exp, 4asb/t, instead of the scores). The first stage adds the token ids and
//   embedding tensors of each micro-batch in flight; the last the final norm and head inputs
//   and the logits of one micro-batch: 16-bit logits over 1/t of the vocabulary and the fp32
//   softmax Megatron's vocab-parallel cross-entropy keeps (6 B each), or torch's fp32 copy
//   and log-softmax under FSDP2 (10 B).
//   The first stage holds the micro-batches its pipeline schedule keeps in flight
//   (pipeline_schedule.hpp: min(p, m) of its L/p layers under 1F1B; p + (p - 1)/v under
//   interleaving over v model chunks, Korthikanti et al. section 4.2.3).
//
// Time of a step: m micro-batches through p stages, m x the slowest stage's micro-batch time
// plus the schedule's bubble (1F1B: (p - 1) micro-batch times, divided by v when interleaved;
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM"; the zero-bubble schedules split the backward into B and W, see
// pipeline_schedule.hpp).
// A stage's micro-batch time: the compute of the GEMM shapes one GPU of the last stage runs
// (estimate_compute on L/p blocks with 1/t of the heads and MLP width and 1/t of the LM head;
// the recompute mode included), plus 4 tensor-parallel all-reduces of sbh 16-bit values per
// layer (2 forward, 2 backward; 6 under full recompute; as reduce-scatter + all-gather with
// sequence parallelism, the same bytes) over the first t GPUs of a node, plus the
// point-to-point send of the activation forward and its gradient back (sbh/t values with the
// scatter-gather optimisation, ibid. 4.1) over NVLink inside a node or the NIC across nodes.
// Then the framework's data-parallel collectives -- registry rows (strategy_traits.hpp,
// layout_collectives) priced on the layout's groups and composed with the micro-batches'
// compute by step_time.hpp's step_times, as every data-parallel strategy's are -- and the
// optimizer step.
//
// Context parallelism (cp ranks share each sequence; Megatron-LM orders ranks tp, cp, dp,
// pp): a rank holds s/cp tokens, so its activations, GEMMs, TP collectives and pipeline
// sends are those of s/cp tokens; causal attention, split into 2 cp chunks with rank i
// holding chunks i and 2cp - 1 - i, costs each rank 1/cp of the whole sequence's attention
// (cp x the attention of s/cp tokens). CP runs on fused attention (Transformer Engine), so
// the layout's attention must be flash. Weights are replicated over cp: gradients are reduced, and
// the distributed optimizer sharded, over dp x cp ranks. The K/V exchange per layer and micro-batch
// (e element bytes, k = key/value width / t):
//   p2p         cp - 1 ring steps of 2 (s/cp) b k e bytes, each hidden behind the attention
//               of one chunk pair; exposed max(0, step - chunk attention) per step; backward
//               moves K/V and their gradients (twice the bytes) behind the backward attention
//   all_gather  all-gather of cp x 2 (s/cp) b k e bytes forward; again plus a reduce-scatter
//               of the gradients backward
//   a2a         all-to-all of (s/cp) b (2q + 2k) e bytes per rank (Q, K, V in, the output
//               back) forward, the same backward
// and recomputation (selective or full) repeats the forward exchange.
//
// Expert parallelism (a mixture of experts; Megatron-LM's parallel folding, Liu et al. 2025,
// "MoE Parallel Folding"): the tp x cp x dp GPUs of a stage are laid out again for the experts
// as etp x ep x edp. A GPU holds E/ep routed experts, each 1/etp of its width; the rest of the
// block (attention, router, shared expert) as before. Expert gradients are reduced, and their
// optimizer states sharded, over the edp ranks holding the same experts; the rest over dp x cp.
// Per MoE layer and micro-batch, a rank's b s/(cp t) tokens go to their experts' ranks and
// back: two all-to-alls of k b s h e/(cp t) bytes forward, two backward (and again in a
// recomputed forward), plus an all-gather and a reduce-scatter over etp when etp > 1; a MoE
// layer folded so sends no tensor-parallel collectives for its MLP. Its GEMMs: the k copies
// of the tokens of etp ranks over E/ep experts of width f/etp (balanced routing).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/cost/activations.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/pipeline_schedule.hpp"
#include "dtplan/cost/training_comm.hpp"
#include "dtplan/model/interconnect.hpp"
#include "dtplan/model/topology.hpp"

namespace dtplan::cost {

// How context-parallel ranks exchange keys and values (Megatron-LM's --cp-comm-type,
// Transformer Engine's cp_comm_type):
//   p2p         ring attention: each rank passes its K/V chunk around the CP ring, cp - 1
//               steps, each overlapped with the attention of the chunk it holds; backward
//               passes K/V and their gradients
//   all_gather  K and V all-gathered before attention, their gradients reduce-scattered after
//               (Llama 3, section 3.3.2); not overlapped
//   a2a         Ulysses: all-to-all of Q, K, V to split heads instead of tokens, and of the
//               output back (Jacobs et al. 2023, DeepSpeed-Ulysses); not overlapped
enum class CpComm { p2p, all_gather, a2a };
std::string_view name_of(CpComm c);
CpComm parse_cp_comm(std::string_view text);

// How model states are sharded over the dp x cp ranks that hold the same weights (ZeRO's
// stages): nothing, the optimizer states and main weights (ZeRO-1, Megatron's distributed
// optimizer), + gradients (ZeRO-2), + parameters (ZeRO-3, FSDP).
enum class DpSharding { none, optimizer, gradients, parameters };
std::string_view name_of(DpSharding s);
DpSharding parse_dp_sharding(std::string_view text);

// The framework, where it changes memory or traffic:
//   megatron  Megatron-LM: bf16 parameters, fp32 main gradients, gradients reduced once per
//             step after the last micro-batch (none or optimizer sharding)
//   fsdp2     PyTorch FSDP2 as torchtitan runs it (fully_shard per block; MixedPrecisionPolicy
//             param_dtype bf16, reduce_dtype fp32): fp32 sharded parameters the optimizer
//             updates, blocks all-gathered in bf16 before use and their fp32 gradients
//             reduce-scattered in every micro-batch's backward, overlapped with compute by
//             prefetching (gradients or parameters sharding; with gradients the gathered
//             blocks stay from forward to backward, reshard_after_forward=False)
enum class Framework { megatron, fsdp2 };
std::string_view name_of(Framework f);
Framework parse_framework(std::string_view text);
// Whose selective checkpointing a framework runs (training.hpp): Megatron-LM's recompute
// modules, or torchtitan's per-op policy.
inline SelectivePolicy selective_policy_of(Framework f) {
  return f == Framework::fsdp2 ? SelectivePolicy::per_op : SelectivePolicy::modules;
}

// Why `f` does not run optimizer `o`, or nullopt: Megatron-LM's --optimizer is adam (decoupled
// weight decay, AdamW) or sgd (with --sgd-momentum); torchtitan's [optimizer] name is Adam or
// AdamW. 8-bit Adam is neither's.
std::optional<std::string> optimizer_problem(Framework f, Optimizer o);
// Why framework `f` cannot step as `impl` says, or nullopt: Megatron-LM's step is always a
// fused Adam (Transformer Engine or Apex); torchtitan runs fused (its default) or foreach.
std::optional<std::string> optimizer_impl_problem(Framework f, OptimizerImpl impl);

struct Layout3D {
  std::int64_t tp = 1, pp = 1, dp = 1;
  std::int64_t cp = 1;  // context parallel: each rank holds seq_len / cp tokens
  // Expert parallelism (a mixture of experts): each GPU holds experts / ep of the routed
  // experts, split etp ways (0: tp) in width; Megatron-LM's parallel folding lays the tp x cp x
  // dp GPUs of a stage out again as etp x ep x edp for the experts (expert_dp()).
  std::int64_t ep = 1;
  std::int64_t etp = 0;
  // Megatron-LM's --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity: every
  // expert computes (and receives) capacity_factor x its balanced share of the routed tokens,
  // padded; 0: dropless, routing priced as balanced.
  double capacity_factor = 0;
  double expert_rows_factor() const { return capacity_factor > 0 ? capacity_factor : 1.0; }
  // Megatron-LM's --overlap-moe-expert-parallel-comm (with --delay-wgrad-compute): the forward
  // and backward passes of adjacent micro-batches merged, each one's token all-to-alls hidden
  // behind the other's compute as far as that compute lasts.
  bool overlap_ep_comm = false;
  // Megatron-LM's flex token dispatcher with the DeepEP backend: across nodes a token goes
  // once to each node holding any of its experts (RDMA) and is forwarded inside the node
  // (NVLink), instead of one copy per expert over the network.
  bool deepep = false;
  // Megatron-LM's --tp-comm-overlap (Transformer Engine's userbuffers, with sequence
  // parallelism): each Linear's tensor-parallel all-gather or reduce-scatter runs in chunks
  // alongside its own GEMM instead of before or after it (tp_overlap_exposed_s).
  bool tp_comm_overlap = false;
  // Megatron-LM's --overlap-grad-reduce: the gradients reduced bucket by bucket alongside the
  // last micro-batch's backward instead of after it; with the distributed optimizer
  // --overlap-param-gather too: the updated weights gathered bucket by bucket alongside the
  // next step's first forward instead of after the step (strategy_traits.cpp).
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // Megatron-LM's --ddp-bucket-size: parameters per overlapped bucket; 0: its default,
  // max(40,000,000, 1,000,000 x dp cp) (distributed_data_parallel.py). Megatron-Bridge's recipes
  // set 128 x 2^20 whenever dp > 1 (training/comm_overlap.py). Needs overlap_grad_reduce:
  // without it Megatron-LM reduces each stage in one bucket whatever the size.
  std::int64_t ddp_bucket_params = 0;
  // Megatron-LM's --grad-reduce-in-bf16: main gradients kept, accumulated and reduced in bf16
  // instead of fp32 (half the gradient buffer and the bytes reduced). NeMo 1.x runs with Apex's
  // distributed Adam reduce the same way (grad_sync_dtype bf16).
  bool grad_reduce_bf16 = false;
  // Megatron-LM's --fp8-param-gather with an FP8 recipe: the blocks' Linear weights are kept
  // as FP8 tensors (no bf16 copy beside Transformer Engine's FP8 data and transpose) and
  // all-gathered by the distributed optimizer in FP8, 1 B each instead of 2.
  bool fp8_param_gather = false;
  CpComm cp_comm = CpComm::p2p;
  std::int64_t interleave = 1;  // model chunks per GPU (v)
  bool sequence_parallel = false;
  Framework framework = Framework::megatron;
  DpSharding sharding = DpSharding::optimizer;  // Megatron's distributed optimizer
  // Ranks each state is sharded over; 0: all dp x cp. Fewer (dividing dp x cp): hybrid
  // sharding, the groups replicate and all-reduce the gradient shards once per step.
  std::int64_t shard_group = 0;
  std::int64_t micro_batch = 1;    // b
  std::int64_t micro_batches = 1;  // m, per pipeline per step
  std::int64_t seq_len = 0;
  Checkpointing recompute = Checkpointing::none;
  // Under selective recomputation, the parts of each block rebuilt in backward (Megatron-LM's
  // --recompute-modules; training.hpp).
  RecomputeModules recompute_modules;
  // Under full recomputation, every Nth block of a stage only (torchtitan's layer-wise
  // checkpointing; TrainingConfig::checkpoint_every); 1: every block.
  std::int64_t checkpoint_every = 1;
  // The attention kernel: flash (Transformer Engine's fused attention, PyTorch SDPA) keeps no
  // s x s scores; context parallelism needs it.
  Attention attention = Attention::flash;
  AttentionKernel attention_kernel = AttentionKernel::framework;  // which fused kernel runs
  Precision precision = Precision::bf16;
  Fp8Recipe fp8 = Fp8Recipe::none;         // FP8 GEMMs in the blocks' Linear layers (training.hpp)
  Optimizer optimizer = Optimizer::adamw;  // its states (optimizer_problem: what each runs)
  OptimizerImpl optimizer_impl = OptimizerImpl::framework;  // fused unless fsdp2's foreach
  // How a block's element-wise work runs: fused (the default: Megatron-LM, Transformer
  // Engine, torch.compile), or eager, op by op, as torchtitan's FSDP2 runs without
  // torch.compile -- modelled for FSDP2 at tp 1 only (the data-parallel inventory).
  LayerKernels layer_kernels = LayerKernels::framework;
  // How FSDP2's training loop clears the gradients after a step (training.hpp); Megatron-LM
  // keeps its gradient buffers allocated whatever it is.
  ZeroGrad zero_grad = ZeroGrad::set_to_none;
  // States in host memory, the optimizer stepping on the CPU: Megatron-LM's
  // --optimizer-cpu-offload (optimizer: fp32 main weights and optimizer states; gradients
  // copied to the host, updated weights back) or FSDP2's CPUOffloadPolicy (optimizer+params:
  // the parameter, gradient and optimizer shards; each all-gather first copies the shard in).
  Offload offload = Offload::none;
  std::optional<PipelineSchedule> schedule;  // none: Megatron's own (1F1B, interleaved if v > 1)
  // Layers of each pipeline stage (all its chunks), first to last; empty: layers_per_stage's
  // rule.
  std::vector<std::int64_t> stage_layers;
  std::int64_t gpus() const { return tp * cp * pp * dp; }
  std::int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // The ranks holding the same experts, which reduce their gradients and shard their states.
  std::int64_t expert_dp() const { return tp * cp * dp / (expert_tp() * ep); }
  PipelineSchedule pipeline_schedule() const {
    return schedule.value_or(default_schedule(interleave));
  }
  std::int64_t global_batch() const { return micro_batch * micro_batches * dp; }
  // The ranks a sharded state is split over (1 when nothing is sharded).
  std::int64_t shard_ranks() const {
    if (sharding == DpSharding::none) return 1;
    return shard_group > 0 ? shard_group : dp * cp;
  }
  // Hybrid sharding: groups of shard_ranks() shard, and the groups replicate each other.
  bool hybrid() const { return shard_ranks() > 1 && shard_ranks() < dp * cp; }
};

// One tensor-parallel rank's columns of the LM head. Megatron-LM pads the vocabulary to a
// multiple of 128 x tp (--make-vocab-size-divisible-by 128; calculate_padded_vocab_size in
// megatron/training/vocab_utils.py at d98e8a64dd), so its head's GEMMs stay 16-byte aligned;
// torchtitan splits the model's own vocabulary (rounded up).
std::int64_t padded_vocab_shard(std::int64_t vocab, std::int64_t tp, bool megatron_padding);

// The layers of each pipeline stage: the layout's own list (p entries, each at least v, summing
// to L), else L/p each when p x v divides L, else Megatron-LM's split that counts the embedding
// and the loss as a layer each (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split): (L + 2)/p per stage, one fewer on the first and on
// the last, when p x v divides L + 2 (Llama 3 405B: 126 layers over 16 stages are 7, 14 x 8,
// 7; Llama 3 paper, section 3.3.2).
std::vector<std::int64_t> layers_per_stage(const TransformerSpec& m, const Layout3D& l);
// What one GPU of pipeline stage `stage` holds: its blocks (`dense` of them a mixture's dense
// first blocks), its parameters and, of those, the routed experts'.
struct StageHolding {
  std::int64_t stage = 0, layers = 0, params = 0;
  std::int64_t dense = 0;
  std::int64_t experts = 0;
};
// The nodes a token's experts sit on, in expectation, with `experts` experts spread evenly over
// `nodes` nodes and `k` chosen per token at random (balanced routing); under node-limited
// routing (`groups` groups, a token's experts from `groups_per_token` of them, the groups
// spread evenly over the nodes) the nodes its groups sit on.
double expected_nodes_per_token(std::int64_t experts, std::int64_t k, std::int64_t nodes,
                                std::int64_t groups, std::int64_t groups_per_token);
// One model chunk: the pipeline stage holding it and its layers.
struct ModelChunk {
  std::int64_t stage = 0;
  std::int64_t layers = 0;
};
// The model's chunks in layer order (pp x interleave of them): round-robin over the stages under
// interleaving (chunk r x pp + k on stage k), back along the V under ZB-V; a stage's chunks
// equal but for a shortfall, which falls on the first stage's first chunks and on any other's
// last.
std::vector<ModelChunk> model_chunks(const TransformerSpec& s, const Layout3D& l);
// Of stage i's blocks, how many are a mixture of experts' dense first blocks (DeepSeek's
// first_k_dense_replace): the layers walked in order through the stages' model chunks.
std::int64_t dense_on_stage(const TransformerSpec& m, const Layout3D& l, std::int64_t i);
// Why layers_per_stage has no answer, or nullopt.
std::optional<std::string> stage_split_problem(const TransformerSpec& m, const Layout3D& l);

// Why the layout's experts cannot be laid out so (Megatron-LM's parallel folding: experts
// dividing over ep, etp x ep dividing tp x cp x dp; torchtitan's own rule), or nullopt.
std::optional<std::string> expert_layout_problem(const TransformerSpec& m, const Layout3D& l);

// Why the token exchange of `l` cannot be priced, or nullopt: its all-to-all runs over the whole
// nodes its etp x ep ranks span (Model3D::token_exchange_s), and an all-to-all is priced over at
// most kMaxAllToAllGpus GPUs.
std::optional<std::string> expert_exchange_problem(const Layout3D& l, std::int64_t gpus_per_node);

// The training settings the memory model reads for a layout (precision, optimizer and the step
// its framework runs, batch, recomputation, no_sync as the framework reduces): what a Plan of
// the layout records too.
TrainingConfig layout_training(const Layout3D& l);

// Why the layout's recompute modules cannot run so, or nullopt: modules only under selective
// recomputation and Megatron-LM; mla_up_proj needs latent attention, moe and moe_act a
// mixture of experts, shared_experts a shared expert, mlp a dense MLP somewhere; moe not with
// overlap_ep_comm, moe_act and layernorm not under FP8 delayed scaling (Megatron-LM's
// TransformerConfig checks).
std::optional<std::string> recompute_problem(const TransformerSpec& m, const Layout3D& l);

// Throws naming the rule a layout breaks: heads divisible by t (and KV heads), layers by
// p x v, t within a node, the sequence by 2 x cp (Megatron's load-balanced split: two chunks
// per rank), heads per TP rank by cp under a2a, and the schedule's own rules (interleaving
// needs m divisible by p, ZBV two chunks, ...).
void check_layout(const TransformerSpec& m, const Layout3D& l, std::int64_t gpus_per_node);

// A stage GPU's memory in figures (what a search keeps of each layout it rejects).
struct Memory3DFigures {
  std::int64_t stage = 0;           // the heaviest stage, whose GPU this is (0: the first)
  std::int64_t params_per_gpu = 0;  // on that stage's GPU
  // The components every estimate names (memory.hpp's MemoryComponents): master weights are
  // the fp32 main weights the optimizer updates (Megatron-LM's, inside its distributed
  // optimizer); optimizer states the optimizer's own tensors.
  Bytes weights, master_weights, gradients, optimizer_states, activations, overhead;
  Bytes logits;  // the last stage's logits and loss softmax (one micro-batch)
  Bytes host;    // offloaded states in host memory, per GPU (Layout3D::offload)
  // FSDP2's gathered bf16 blocks and one block's unsharded fp32 gradients; NCCL's buffers
  Bytes buffers;
  Bytes outside_allocator, allocator_slack;  // as MemoryComponents has them
  Bytes total() const;
  Bytes torch_reserved() const;   // as MemoryComponents::torch_reserved
  Bytes torch_allocated() const;  // as MemoryComponents::torch_allocated
};
// The figures and how they were derived.
struct Memory3D : Memory3DFigures {
  std::vector<NamedBytes> activation_terms;  // activations and logits, term by term
  std::vector<NamedBytes> buffer_terms;
  std::vector<NamedBytes> overhead_terms;  // CUDA context, allocator slack
  // How each component is derived, and notes, as the data-parallel estimate gives them (the
  // one memory model prices both; {field} markers for a front end to render).
  std::vector<std::pair<std::string, std::string>> explain;
  std::vector<std::string> notes;
};
// The heaviest stage's GPU, priced by the memory model every strategy uses (memory.hpp) with
// the layout's framework in place of a strategy; `explained` false leaves out the
// explanations and notes (a search needs the figures alone).
Memory3D memory_3d(const ModelDesc& m, const Layout3D& l, const OverheadConstants& k,
                   bool explained = true);
// What the layouts of one search share in their stages' memory, kept to be priced once: a
// stage's blocks and parameters (by tp, ep, etp, its blocks and whether it holds the embedding
// or the head), its activations (by their shape, the micro-batches in flight left open:
// InFlightActivations), and the view of each framework's way of holding states. For one model
// and one set of overhead constants (memory_3d refuses others); not thread-safe.
class StageMemoryCache {
 public:
  StageMemoryCache();
  ~StageMemoryCache();
  StageMemoryCache(const StageMemoryCache&) = delete;
  StageMemoryCache& operator=(const StageMemoryCache&) = delete;
  struct Tables;

 private:
  friend Memory3D memory_3d(const ModelDesc& m, const Layout3D& l, const OverheadConstants& k,
                            StageMemoryCache& cache);
  std::unique_ptr<Tables> tables_;
};
// memory_3d(m, l, k, false) -- the same figures -- with what `cache` holds looked up.
Memory3D memory_3d(const ModelDesc& m, const Layout3D& l, const OverheadConstants& k,
                   StageMemoryCache& cache);
// The GPU of pipeline stage `stage` (0 to pp - 1), priced alone.
Memory3D stage_memory_3d(const ModelDesc& m, const Layout3D& l, std::int64_t stage,
                         const OverheadConstants& k, bool explained = true);

struct Time3D {
  double compute_s = 0;     // per micro-batch per stage (forward + backward + recompute)
  double tp_comm_s = 0;     // per micro-batch per stage
  double cp_comm_s = 0;     // per micro-batch per stage: K/V exchange not hidden by attention
  double ep_comm_s = 0;     // per micro-batch per stage: token dispatch and combine (experts)
  double p2p_s = 0;         // per micro-batch per stage (both directions)
  double microbatch_s = 0;  // the five above
  double pipeline_s = 0;    // m x microbatch_s + bubble_s
  double bubble_s = 0;      // the schedule's idle time (1F1B: (p - 1)/v x microbatch_s)
  double fsdp_comm_s = 0;   // per micro-batch per stage: FSDP2's gathers and reductions not hidden
  // Once a step: the gradient reduction over dp and the parameter all-gather, or what
  // Megatron-LM's overlapped buckets leave exposed at the step's ends.
  double dp_sync_s = 0;
  double host_transfer_s = 0;  // offload: updated weights copied back from the host
  double optimizer_s = 0;
  double step_s = 0;
  double samples_per_s = 0, tokens_per_s = 0, mfu = 0;
  // The data-parallel collectives of the slowest stage's GPU: the framework's registry rows
  // (strategy_traits.hpp, layout_collectives) priced on the layout's groups; step_time.hpp's
  // composition turns them into fsdp_comm_s and dp_sync_s.
  std::vector<CommOp> dp_ops;
};
// Communication of one micro-batch through a stage that compute does not hide: forward, and
// backward (with the recomputed forward's).
struct CommPhaseTime {
  double forward_s = 0, backward_s = 0;
};
using CpExchange = CommPhaseTime;

// Times layouts of one model on one cluster; caches what layouts share (the compute of a
// micro-batch size and recompute mode, the collective models of each group size), so a
// planner can time thousands of layouts.
class CommContext;  // collectives.hpp
struct MessageRun;  // rule_pricing.hpp

class Model3D {
 public:
  // `comm`: routes and rings shared with other estimates on `t` (one is made if null).
  Model3D(const ModelDesc& m, const Topology& t, const InterconnectTable& table, const GpuSpec& gpu,
          const ComputeConstants& k, std::shared_ptr<CommContext> comm = nullptr);
  ~Model3D();
  Model3D(const Model3D&) = delete;
  Model3D& operator=(const Model3D&) = delete;
  // Throws as check_layout, or when the layout needs more GPUs than the cluster has.
  Time3D time(const Layout3D& l);

 private:
  struct Cache;
  // One rank's compute of `stage_layers` blocks, `dense` of them a mixture's dense first
  // blocks, with the LM head (and the multi-token prediction modules if asked), for s/cp
  // tokens.
  ComputeTime stage_compute(const Layout3D& l, std::int64_t stage_layers, std::int64_t dense,
                            bool prediction_modules);
  // The forward GEMMs of one block on one rank (1/tp of its widths, the gathered s/cp tokens
  // of a micro-batch): what --tp-comm-overlap hides the block's collectives behind.
  BlockLinearTimes linear_times(const Layout3D& l);
  // The stage that sets the pipeline's pace (Model3D::time).
  struct SlowestStage {
    std::int64_t layers = 0, dense = 0;
    bool prediction_modules = false;
  };
  SlowestStage slowest_stage(const Layout3D& l);
  // Exposed K/V exchange of a stage's `layers` for one micro-batch; `local`: stage_compute.
  CpExchange cp_exchange(const Layout3D& l, const ComputeTime& local, double layers);
  // Token dispatch and combine of a stage's `layers` MoE layers for one micro-batch under
  // expert parallelism (none when the experts are laid out as the dense part is).
  CommPhaseTime expert_exchange(const Layout3D& l, double layers);
  // One dispatch or combine of `bytes` per rank over the expert-parallel ranks.
  double token_exchange_s(const Layout3D& l, std::int64_t bytes);
  // A collective over `ranks` ranks spread over `span` consecutive GPUs.
  CollectiveEstimate group_estimate(Collective c, std::int64_t span, std::int64_t ranks,
                                    std::int64_t bytes);
  double group_collective_s(Collective c, std::int64_t span, std::int64_t ranks,
                            std::int64_t bytes) {
    return group_estimate(c, span, ranks, bytes).time_s;
  }
  // The framework's data-parallel collectives for what one GPU of a stage holds; priced once
  // for all layouts alike in what they read (the search prices 10^4 that differ only in their
  // recomputation or attention).
  const std::vector<CommOp>& data_parallel_ops(const Layout3D& l, const StageHolding& stage);
  std::vector<CommOp> price_data_parallel_ops(const Layout3D& l, const StageHolding& stage);
  // The collectives of `params` parameters held as `units`, synced over `ranks` ranks strided
  // evenly through the stage's tp x cp x dp GPUs and sharded over `shards` of them;
  // `fp8_weights` of the parameters are gathered in FP8 (Layout3D::fp8_param_gather).
  std::vector<CommOp> data_parallel_ops_of(const Layout3D& l, const std::vector<MessageRun>& units,
                                           std::int64_t params, std::int64_t ranks,
                                           std::int64_t shards, const std::string& what,
                                           std::int64_t fp8_weights);
  // Composes the micro-batches' compute with the data-parallel collectives and the optimizer
  // (step_time.hpp's step_times): sets compute_s, fsdp_comm_s, dp_sync_s, optimizer_s, dp_ops;
  // returns a micro-batch's forward with the gathers it waits for.
  double data_parallel_and_optimizer(const Layout3D& l, const ComputeTime& stage,
                                     const StageHolding& held, Time3D& out);
  const ModelDesc& m_;
  const Topology& t_;
  const InterconnectTable& table_;
  const GpuSpec& gpu_;
  const ComputeConstants& k_;
  std::unique_ptr<Cache> cache_;
};

Time3D time_3d(const ModelDesc& m, const Layout3D& l, const Topology& t,
               const InterconnectTable& table, const GpuSpec& gpu, const ComputeConstants& k);

}  // namespace dtplan::cost
