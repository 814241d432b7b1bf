// Prediction of a dtplan-run step from a hardware profile (see profile_step.hpp).
#include "dtplan/cost/profile_step.hpp"

#include <algorithm>
#include <numeric>

#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"

namespace dtplan::cost {
namespace {

using Mode = RuntimeMode;

Strategy runtime_equivalent(Strategy s) {
  switch (runtime_mode(s)) {
    case Mode::ddp:
      return Strategy::ddp;
    case Mode::dp:
      return Strategy::dp;
    case Mode::zero1:
      return Strategy::zero1;
    case Mode::zero2:
      return Strategy::zero2;
    case Mode::zero3:
      return Strategy::zero3;
  }
  return s;
}

// Element-wise calls of one layer's forward over T tokens (bias adds, residual copies, and in
// the value_only workload the value copy; the MLP activation is timed on its own): the elements
// each call touches, each read and written once in fp32. Backward does about twice this (bias
// gradients, copies, the activation's product with its gradient).
std::vector<std::int64_t> elementwise_calls(const DenseStack& s, std::int64_t tokens) {
  const std::int64_t T = tokens, h = s.hidden, f = s.ffn;
  std::vector<std::int64_t> calls{T * s.qkv_size()};
  if (s.attention == StackAttention::value_only) calls.push_back(T * s.q_size());
  for (auto n : {T * h, T * h, T * h, T * h, T * f, T * f})
    calls.push_back(n);
  if (s.gated) calls.push_back(T * f);
  return calls;
}

double elementwise_forward_s(const DenseStack& s, std::int64_t tokens, const HardwareProfile& p) {
  double t = 0;
  for (auto elements : elementwise_calls(s, tokens)) {
    t += p.elementwise_s_per_byte.time_s(8.0 * static_cast<double>(elements), "element-wise");
  }
  return t * static_cast<double>(s.layers);
}

// The layer parts around the GEMMs and attention that the causal workload adds, priced by the
// bytes they move at the profile's element-wise rate. Per layer, forward: two norms (read x,
// write y: 8 bytes an element, plus the statistics pass: 12 in all) and rotary on queries and
// keys (read and write: 8); backward: two norms (read x, dy, dx, write dx: 16) and the
// inverse rotary (8). Learned positions add one pass of 12 bytes an element each way, once.
struct ForwardBackward {
  double forward_s = 0, backward_s = 0;
  double blocks_forward_s = 0;  // the part of forward_s inside the blocks
};

ForwardBackward layer_extras(const DenseStack& s, std::int64_t tokens, const HardwareProfile& p) {
  ForwardBackward x;
  if (s.attention == StackAttention::value_only) return x;
  const auto T = static_cast<double>(tokens), h = static_cast<double>(s.hidden);
  const double qk = T * static_cast<double>(s.q_size() + s.kv_size());
  auto bytes = [&](double b) { return p.elementwise_s_per_byte.time_s(b, "element-wise"); };
  const double rotary = s.positions == StackPositions::rotary ? bytes(8 * qk) : 0;
  const double layers = static_cast<double>(s.layers);
  x.forward_s = x.blocks_forward_s = layers * (2 * bytes(12 * T * h) + rotary);
  x.backward_s = layers * (2 * bytes(16 * T * h) + rotary);
  if (s.final_norm && s.has_head()) {
    x.forward_s += bytes(12 * T * h);
    x.backward_s += bytes(16 * T * h);
  }
  if (s.positions == StackPositions::learned && s.has_embedding()) {
    x.forward_s += bytes(12 * T * h);
    x.backward_s += bytes(12 * T * h);
  }
  return x;
}

// Attention over every sequence, head and layer: the profile's timing of the runtime's own
// kernels when it has one; otherwise its parts, each at the profile's rate -- the products
// (attention_gemms_of), the causal softmax over the squares, and in backward zeroing the QKV
// gradient (4 bytes an element), do . o per query row (8) and ds = p (dp - delta) over the
// squares (read p, dp, write: 12).
ForwardBackward attention_time(const DenseStack& s, std::int64_t tokens, const HardwareProfile& p) {
  ForwardBackward x;
  if (s.attention == StackAttention::value_only) return x;
  if (p.attention) {
    const auto heads = static_cast<double>(s.batch(tokens) * s.heads * s.layers);
    x.forward_s = x.blocks_forward_s = heads * p.attention->forward_s(s.seq_len, s.head_dim);
    x.backward_s = heads * p.attention->backward_s(s.seq_len, s.head_dim);
    return x;
  }
  const auto gemms = attention_gemms_of(s, tokens);
  for (const auto& g : gemms.forward)
    x.forward_s += p.gemm_time_s(g);
  for (const auto& g : gemms.backward)
    x.backward_s += p.gemm_time_s(g);
  const auto T = static_cast<double>(tokens), layers = static_cast<double>(s.layers);
  const double squares = T * static_cast<double>(s.heads * s.seq_len);
  auto bytes = [&](double b) { return p.elementwise_s_per_byte.time_s(b, "element-wise"); };
  x.forward_s += layers * p.softmax_s_per_element.time_s(squares, "softmax");
  x.blocks_forward_s = x.forward_s;
  x.backward_s += layers * (bytes(4 * T * static_cast<double>(s.qkv_size())) +
                            bytes(8 * T * static_cast<double>(s.q_size())) + bytes(12 * squares));
  return x;
}

// Mask draws at the profile's rate, taken at the size of one hidden-sized mask (a profile
// without the rate: each draw a 9-byte element-wise pass).
double draw_time_s(double draws, const DenseStack& s, std::int64_t tokens,
                   const HardwareProfile& p) {
  if (draws <= 0) return 0;
  const auto call = static_cast<double>(tokens * s.hidden);
  if (p.dropout_draw_s_per_element) {
    return draws * p.dropout_draw_s_per_element->s_per_unit(call, "dropout draw");
  }
  return draws * 9 * p.elementwise_s_per_byte.s_per_unit(9 * call, "element-wise");
}

// Forward and backward compute of one micro-step: every Linear's forward GEMM, then its two
// backward GEMMs; attention; norms and positions; element-wise calls; the MLP activation; the
// loss. Backward also reruns what recomputation discarded: every block's forward (full), or
// the attention core (selective).
ForwardBackward compute_time(const DenseStack& s, std::int64_t tokens, const HardwareProfile& p) {
  const auto gemms = gemms_of(s, tokens);
  // The LM head's three GEMMs come last (a pipeline stage before the last has none).
  const std::size_t head_first = gemms.size() - (s.has_head() ? 3 : 0);
  double block_gemms = 0, head_gemm = 0, backward_gemms = 0;
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const double t = p.gemm_time_s(gemms[i]);
    if (i % 3 != 0) {
      backward_gemms += t;
    } else {
      (i < head_first ? block_gemms : head_gemm) += t;
    }
  }
  const auto attention = attention_time(s, tokens, p);
  const auto extras = layer_extras(s, tokens, p);
  const double ew = elementwise_forward_s(s, tokens, p);
  const double act_elements = static_cast<double>(tokens * s.ffn);
  const double layers = static_cast<double>(s.layers);
  const double blocks = block_gemms + attention.blocks_forward_s + extras.blocks_forward_s + ew +
                        layers * p.activation_s_per_element.time_s(act_elements, "MLP activation");
  ForwardBackward x;
  x.blocks_forward_s = blocks;
  const double loss = s.has_head() ? p.softmax_s_per_element.time_s(
                                         static_cast<double>(tokens * s.vocab), "softmax")
                                   : 0;
  x.forward_s = blocks + head_gemm + (extras.forward_s - extras.blocks_forward_s) + loss;
  x.backward_s =
      backward_gemms + attention.backward_s + extras.backward_s + 2 * ew +
      layers * p.activation_grad_s_per_element.time_s(act_elements, "MLP activation backward");
  if (s.recompute == Checkpointing::full) x.backward_s += blocks;
  if (s.recompute == Checkpointing::selective) x.backward_s += attention.blocks_forward_s;
  // 16-bit compute's roundings, weight copies and accumulations of rounded results; dropout's
  // passes and mask draws.
  const auto dropout = dropout_work(s, tokens);
  const auto mixed = mixed_precision_passes(s, tokens);
  for (const auto* passes : {&mixed, &dropout.passes}) {
    for (const auto& pass : *passes) {
      const double t = pass.count * p.elementwise_s_per_byte.time_s(pass.bytes, "element-wise");
      (pass.backward ? x.backward_s : x.forward_s) += t;
    }
  }
  x.forward_s += draw_time_s(dropout.forward_draws, s, tokens, p);
  x.backward_s += draw_time_s(dropout.backward_draws, s, tokens, p);
  // Tensor parallelism in fp32 without hidden dropout: a row-parallel projection's summed
  // output is added to the residual in a pass of its own (12 bytes an element), where one
  // process accumulates the GEMM onto the residual.
  if (s.tp > 1 && s.compute == ElementType::fp32 && s.hidden_dropout == 0) {
    const double t = 2 * static_cast<double>(s.layers) *
                     p.elementwise_s_per_byte.time_s(12.0 * static_cast<double>(tokens * s.hidden),
                                                     "element-wise");
    x.forward_s += t;
    if (s.recompute == Checkpointing::full) x.backward_s += t;
  }
  return x;
}

struct Schedule {
  RuntimePrediction& out;
  const HardwareProfile& p;
  std::int64_t ranks;
  double add(const std::string& kind, const std::string& phase, std::int64_t bytes,
             std::int64_t count) {
    if (count == 0) return 0;
    // Returns the uncorrected time; each operation is listed with the step correction.
    const double t = p.collective_time_s(kind, ranks, bytes);
    for (auto& c : out.collectives) {
      if (c.kind == kind && c.phase == phase && c.bytes == bytes) {
        c.count_per_step += count;
        return t * static_cast<double>(count);
      }
    }
    out.collectives.push_back({kind, phase, bytes, count, t * p.correction.collective_scale});
    return t * static_cast<double>(count);
  }
};

// Tensor parallelism's all-reduces in one micro-step over the tp ranks (dense_model.hpp), in
// the phases the runtime labels them: forward sums the embedding lookup, each block's two
// row-parallel outputs, and the loss's row maxima (tokens floats) and sums (2 x tokens);
// backward sums the head's and each block's two column-parallel input gradients, and reruns
// forward's block sums under full recomputation (on a pipeline stage: the embedding's sum on
// the first, the loss's and the head's on the last). Returns {forward, backward} time.
std::pair<double, double> tensor_parallel_collectives(Schedule& sched, const DenseStack& s,
                                                      std::int64_t tokens, std::int64_t A) {
  if (s.tp <= 1) return {0, 0};
  const std::int64_t hidden_bytes = tokens * s.hidden * 4, L = s.layers;
  const std::string fwd = "tensor-parallel forward", bwd = "tensor-parallel backward";
  const std::int64_t embedding = s.has_embedding() ? 1 : 0, head = s.has_head() ? 1 : 0;
  double f = sched.add("all_reduce", fwd, hidden_bytes, (embedding + 2 * L) * A);
  f += sched.add("all_reduce", fwd, tokens * 4, head * A);
  f += sched.add("all_reduce", fwd, 2 * tokens * 4, head * A);
  const std::int64_t rerun = s.recompute == Checkpointing::full ? 2 * L : 0;
  const double b = sched.add("all_reduce", bwd, hidden_bytes, (head + 2 * L + rerun) * A);
  return {f, b};
}

// A pipeline stage's exchanges with its neighbours in one step (Trainer::pipeline_step: warmup
// W = min(pp - 1 - stage, A) forwards, A - W alternations, W backwards), each one activation
// (or its gradient) of the micro-batch, at the profile's 2-rank send_recv fit, in the phase that
// waits on it. Returns {forward, backward} time.
std::pair<double, double> pipeline_exchanges(Schedule& sched, const DenseStack& s,
                                             std::int64_t tokens, std::int64_t A) {
  if (s.pp <= 1) return {0, 0};
  const std::int64_t prev = s.has_embedding() ? 0 : 1, next = s.has_head() ? 0 : 1;
  const std::int64_t W = std::min(s.pp - 1 - s.stage, A), S = A - W, bytes = tokens * s.hidden * 4;
  const double f = sched.add("send_recv", "pipeline forward", bytes, W * (prev + next) + S * prev);
  const double b = sched.add("send_recv", "pipeline backward", bytes,
                             S * next + (S > 0 ? prev : 0) + W * (next + prev));
  return {f, b};
}

// What a stage waits for other stages in one-forward-one-backward over A micro-batches: the
// pipeline takes the sum of every stage's forward and backward of one micro-batch plus A - 1
// times the slowest stage's, of which this stage computes A of its own. A stage before the last
// waits in backward, for gradients to come back; the last waits in forward, for activations.
// Returns {forward, backward}.
std::pair<double, double> pipeline_idle(const DenseStack& s, std::int64_t tokens, std::int64_t A,
                                        const ForwardBackward& own, const HardwareProfile& p) {
  if (s.pp <= 1) return {0, 0};
  const auto whole = pipeline_whole_of(s);
  double sum = 0, slowest = 0;
  for (std::int64_t q = 0; q < s.pp; ++q) {
    const auto t = compute_time(pipeline_stage(whole, s.pp, q), tokens, p);
    sum += t.forward_s + t.backward_s;
    slowest = std::max(slowest, t.forward_s + t.backward_s);
  }
  const double mine = own.forward_s + own.backward_s;
  const double idle =
      std::max(0.0, sum + static_cast<double>(A - 1) * slowest - static_cast<double>(A) * mine);
  return s.has_head() ? std::pair{idle, 0.0} : std::pair{0.0, idle};
}

std::map<std::string, std::int64_t> memory_of(const RuntimeRun& r, Mode mode) {
  const auto& s = r.stack;
  TrainingConfig c;
  c.strategy = runtime_equivalent(r.strategy);  // FSDP modes run as the ZeRO stage they match
  c.precision = Precision::fp32;
  c.optimizer = r.optimizer;
  c.dp_size = r.ranks;
  c.gpus_per_node = r.ranks;
  c.micro_batch = r.micro_batch;
  c.grad_bucket_view = true;  // the runtime's buckets are views of the gradient buffer
  const auto states = estimate_memory(model_from_param_count(params_of(s), "dtplan-run workload"),
                                      c, OverheadConstants{});
  const auto units = padded_units(s, r.ranks);
  const std::int64_t largest = *std::max_element(units.begin(), units.end());
  const std::int64_t tokens = r.micro_batch * s.seq_len;
  // A pipeline stage keeps a model (activations, scratch, batch) per micro-batch in flight.
  const std::int64_t models = std::min(s.pp - s.stage, r.grad_accum);
  std::int64_t buffers = models * scratch_elements(s, tokens);
  if (mode != Mode::ddp && mode != Mode::dp) buffers += largest / r.ranks;  // reduce-scatter out
  if (mode == Mode::zero2 || mode == Mode::zero3) {
    // Backward holds one unit's gradient at a time -- and, with tied embeddings on one stage,
    // the embedding's from the head to the end; ZeRO-3 also holds the gathered unit.
    const std::int64_t block = units[s.has_embedding() ? 1 : 0];
    const std::int64_t emb = s.has_embedding() ? units.front() : 0;
    const std::int64_t head = s.has_head() ? units.back() : 0;
    const std::int64_t held = mode == Mode::zero3 ? 2 : 1;
    buffers += s.tied && s.pp == 1 ? emb + std::max(held == 2 ? emb : 0, held * block)
                                   : std::max({held * head, held * block, emb});
  }
  const std::int64_t activations =
      (stored_elements_per_token(s) * 4 + mask_bytes_per_token(s)) * tokens;
  return {{"weights", states.gpu.weights.value},
          {"gradients", states.gpu.gradients.value},
          {"optimizer_states", states.gpu.optimizer_states.value},
          {"activations", models * activations},
          {"buffers", buffers * 4},
          {"data", models * 2 * tokens * 4}};
}

}  // namespace

RuntimeMode runtime_mode(Strategy s) {
  if (const auto mode = traits_of(s).runtime) return *mode;
  throw Error("strategy " + std::string(name_of(s)) +
              ": not executed by dtplan-run yet (it needs a 2-D process grid); run fsdp-full "
              "or zero3 instead");
}

bool runtime_no_sync(Strategy s, bool requested) {
  const auto mode = runtime_mode(s);
  if (mode == RuntimeMode::zero1) return true;
  return requested && mode == RuntimeMode::ddp && supports_no_sync(s);
}

std::vector<std::int64_t> padded_units(const DenseStack& s, std::int64_t ranks) {
  std::vector<std::int64_t> out;
  for (const auto& u : units_of(s))
    out.push_back((u.params + ranks - 1) / ranks * ranks);
  return out;
}

std::vector<std::int64_t> bucket_elements(const DenseStack& s, std::int64_t ranks,
                                          std::int64_t cap_bytes) {
  const auto units = padded_units(s, ranks);
  std::vector<std::int64_t> out;
  std::int64_t open = 0;
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    open += *it;
    if (open * 4 >= cap_bytes || std::next(it) == units.rend()) {
      out.push_back(open);
      open = 0;
    }
  }
  return out;
}

RuntimePrediction predict_runtime_step(const RuntimeRun& r, const HardwareProfile& p) {
  const Mode mode = runtime_mode(r.strategy);
  const auto& s = r.stack;
  const std::int64_t tokens = r.micro_batch * s.seq_len, A = r.grad_accum, n = r.ranks;
  RuntimePrediction out;
  Schedule sched{out, p, n};
  const auto compute = compute_time(s, tokens, p);
  const double fwd = compute.forward_s, bwd = compute.backward_s;
  const auto units = padded_units(s, n);
  const std::int64_t flat = std::accumulate(units.begin(), units.end(), std::int64_t{0});
  const auto L = s.layers;
  // Collectives, by phase, as the runtime issues them.
  double fwd_comm = 0, bwd_comm = 0, wait = 0, opt_comm = 0;
  if (mode == Mode::ddp) {
    for (auto b : bucket_elements(s, n, r.bucket_cap_bytes)) {
      bwd_comm += sched.add("all_reduce", "backward", b * 4, r.no_sync ? 1 : A);
    }
  } else if (mode == Mode::dp) {
    bwd_comm += sched.add("reduce", "backward", flat * 4, A);
    opt_comm += sched.add("broadcast", "optimizer", flat * 4, 1);
  } else {
    for (const auto unit : units) {
      const auto bytes = unit * 4;
      if (mode == Mode::zero1) {
        wait += sched.add("reduce_scatter", "gradient sync", bytes, 1);
      } else {
        bwd_comm += sched.add("reduce_scatter", "backward", bytes, A);
      }
      if (mode != Mode::zero3) opt_comm += sched.add("all_gather", "optimizer", bytes, 1);
    }
    if (mode == Mode::zero3) {
      // Forward gathers every unit of the stage (the tied embedding twice: lookup and head);
      // backward re-gathers the blocks, the head's weights being kept from forward.
      const bool tied_here = s.tied && s.pp == 1;
      if (s.has_embedding()) {
        fwd_comm += sched.add("all_gather", "forward", units.front() * 4, tied_here ? 2 * A : A);
      }
      if (s.has_head() && !tied_here) {
        fwd_comm += sched.add("all_gather", "forward", units.back() * 4, A);
      }
      const auto block = units[s.has_embedding() ? 1 : 0];
      fwd_comm += sched.add("all_gather", "forward", block * 4, L * A);
      bwd_comm += sched.add("all_gather", "backward", block * 4, L * A);
    }
  }
  Schedule tp_sched{out, p, s.tp};
  const auto [tp_fwd, tp_bwd] = tensor_parallel_collectives(tp_sched, s, tokens, A);
  fwd_comm += tp_fwd;
  bwd_comm += tp_bwd;
  Schedule pair_sched{out, p, 2};  // stage neighbours; the tied embedding's two stages
  const auto [pp_fwd, pp_bwd] = pipeline_exchanges(pair_sched, s, tokens, A);
  fwd_comm += pp_fwd;
  bwd_comm += pp_bwd;
  if (s.pp > 1 && s.tied && (s.has_embedding() || s.has_head())) {
    wait += pair_sched.add("all_reduce", "gradient sync", s.vocab * s.hidden * 4, 1);
  }
  const auto [idle_fwd, idle_bwd] = pipeline_idle(s, tokens, A, compute, p);
  auto& raw = out.parts;
  raw.compute_s = static_cast<double>(A) * (fwd + bwd) + idle_fwd + idle_bwd;
  raw.collectives_s = fwd_comm + bwd_comm;
  raw.optimizer_collectives_s = wait + opt_comm;
  // The slowest rank updates as the runtime calls it: one region of every parameter under
  // DDP and on DP's rank 0, each unit's slice under ZeRO. Norm, non-finite check and scaling
  // read the gradients three times; zeroing writes them (16 bytes per parameter).
  const bool adam = r.optimizer == Optimizer::adam || r.optimizer == Optimizer::adamw;
  const auto& update = adam ? p.adam_s_per_param : p.sgd_s_per_param;
  const auto region_s = [&](double params) {
    return update.time_s(params, "optimizer update") +
           p.elementwise_s_per_byte.time_s(16.0 * params, "element-wise");
  };
  raw.optimizer_s = 0;
  if (mode == Mode::ddp || mode == Mode::dp) {
    raw.optimizer_s = region_s(static_cast<double>(flat));
  } else {
    for (auto u : units) {
      const auto shard = u / n;  // whole elements per rank, as the sharded optimizer holds them
      raw.optimizer_s += region_s(static_cast<double>(shard));
    }
  }
  const auto& corr = p.correction;
  const double fb = raw.compute_s * corr.compute_scale + raw.collectives_s * corr.collective_scale;
  out.forward_s = (static_cast<double>(A) * fwd + idle_fwd) * corr.compute_scale +
                  fwd_comm * corr.collective_scale;
  out.backward_s = fb - out.forward_s;
  out.comm_wait_s = wait * corr.collective_scale;
  out.optimizer_s = raw.optimizer_s * corr.optimizer_scale + opt_comm * corr.collective_scale;
  out.step_s = out.forward_s + out.backward_s + out.comm_wait_s + out.optimizer_s;
  out.memory = memory_of(r, mode);
  for (const auto& [k, v] : out.memory)
    out.peak_bytes += v;
  return out;
}

}  // namespace dtplan::cost
