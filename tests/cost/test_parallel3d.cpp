// Tests for cost/src/parallel3d.cpp: every formula against a hand derivation.
#include <catch2/catch.hpp>
#include <optional>
#include <random>
#include <set>

#include "dtplan/cost/layout_text.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/trace.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"
#include "small_transformer.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Matchers::Contains;

namespace {

// GPT-3 175B's shapes (Korthikanti et al. 2022, Table 3): s 2048, h 12288, a 96, MLP 4h,
// dropout on; Megatron's eager attention with a fused softmax.
constexpr std::int64_t s = 2048, h = 12288, a = 96, sbh = s * h;  // b = 1

TransformerSpec gpt3() {
  TransformerSpec t;
  t.model_type = "gpt2";
  t.vocab_size = 51200;
  t.hidden_size = h;
  t.num_layers = 96;
  t.num_heads = t.num_kv_heads = a;
  t.head_dim = 128;
  t.ffn_size = 4 * h;
  t.max_positions = s;
  t.attention_dropout = t.hidden_dropout = 0.1;
  return t;
}

// One micro-batch of GPT-3 on one GPU with t-way tensor parallelism.
ActivationShape gpt3_shape(std::int64_t t, bool sp, std::int64_t b = 1) {
  ActivationShape x;
  x.micro_batch = b;
  x.tokens = s;
  x.attention = Attention::eager;
  x.tp = t;
  x.sequence_parallel = sp;
  x.layers = 96;
  return x;
}

Bytes kept_per_layer(const BlockActivations& b) {
  return b.linear + b.scores;
}

// The small model below per layer and micro-batch, s = 1024 tokens, flash attention, no
// dropout: replicated 8 sbh (QKV, MLP and two norm inputs, 2 B each), split 24 sbh (Q, the
// output projection's input, K, V: 4 x 2 sbh; GELU input and fc2 input: 2 x 2 x 4 sbh),
// and the fp32 log-sum-exp 4 a s b = 4 x 16 x 1024.
constexpr std::int64_t kSmallLayer = 32LL * 1024 * 1024 + 4 * 16 * 1024;  // 33,619,968
// The first stage's token ids of one micro-batch: 8 B x 1024.
constexpr std::int64_t kTokenIds = 8 * 1024;
// The last stage's final norm and LM head inputs of one micro-batch: 2 x 2 B x s x h.
constexpr std::int64_t kHeadInputs = 4LL * 1024 * 1024;

// The small GPT-style model (small_transformer.hpp).
ModelDesc small_model() {
  return model_from_transformer(test::small_transformer(), "small", "test");
}

// The small model on DGX H100 nodes, with what Model3D keeps references to.
struct DgxH100 {
  explicit DgxH100(std::int64_t nodes)
      : data(resolve_data_dir("")),
        table(InterconnectTable::load(data / "interconnect.json")),
        topo(Topology::build(load_node_template("dgx-h100", data / "topologies"), nodes, table)),
        gpu(GpuCatalog::load(data / "gpus.json").find("H100-SXM")),
        k(load_compute_constants(data / "compute.json")) {}
  std::filesystem::path data;
  ModelDesc m = small_model();
  InterconnectTable table;
  Topology topo;
  GpuSpec gpu;
  ComputeConstants k;
};

Layout3D layout(std::int64_t tp, std::int64_t pp, std::int64_t dp) {
  Layout3D l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.seq_len = 1024;
  return l;
}

}  // namespace

TEST_CASE("per-layer activations follow Korthikanti et al. Table 2") {
  const auto t = gpt3();
  // 5as/h = 5 x 96 x 2048 / 12288 = 80.
  CHECK(kept_per_layer(block_activations(t, gpt3_shape(1, false))).value == 114 * sbh);
  // t = 8: 10 + 24/8 + 80/8 = 23.
  const auto tp8 = block_activations(t, gpt3_shape(8, false));
  CHECK(kept_per_layer(tp8).value == 23 * sbh);
  // t = 8 with sequence parallelism: 34/8 + 80/8 = 14.25.
  const auto sp8 = block_activations(t, gpt3_shape(8, true));
  CHECK(kept_per_layer(sp8).value == 57 * sbh / 4);
  // Selective recompute drops the attention term: 34/8 = 4.25 with SP, 10 + 3 = 13 without.
  CHECK(sp8.linear.value == 17 * sbh / 4);
  CHECK(tp8.linear.value == 13 * sbh);
  // Full recompute keeps the layer input: 2sbh, split by t under sequence parallelism.
  CHECK(tp8.input.value == 2 * sbh);
  CHECK(sp8.input.value == sbh / 4);
  // Linear in the micro-batch.
  CHECK(kept_per_layer(block_activations(t, gpt3_shape(8, true, 4))).value == 4 * 57 * sbh / 4);
  // Fused attention keeps the fp32 log-sum-exp of a/t heads instead of the scores.
  auto flash = gpt3_shape(8, false);
  flash.attention = Attention::flash;
  CHECK(kept_per_layer(block_activations(t, flash)).value == 13 * sbh + 4 * (a / 8) * s);
}

TEST_CASE("a GPU's activations: its stage's layers in flight, the embedding, the head") {
  const auto t = gpt3();
  auto x = gpt3_shape(8, true);
  x.recompute = Checkpointing::selective;
  x.layers = 12;
  x.in_flight = 3;
  x.head = false;
  // 12 layers x 3 micro-batches x 4.25 sbh, one block's scores rebuilt (80/8 sbh), the token
  // ids (8 B x s) of 3 micro-batches; GPT-3 has no embedding dropout in this spec.
  const auto first = stage_activations(t, x);
  CHECK(first.total.value == 12 * 3 * 17 * sbh / 4 + 10 * sbh + 3 * 8 * s);
  CHECK(first.logits_and_loss.value == 0);
  // The last stage: one micro-batch's final norm and head inputs (2 B x sbh/8 each under
  // sequence parallelism), 16-bit logits over 51200/8 = 6400 words and Megatron's fp32
  // softmax of them.
  x.embedding = false;
  x.head = true;
  x.in_flight = 1;
  x.loss = LossKind::vocab_parallel;
  const auto last = stage_activations(t, x);
  CHECK(last.logits_and_loss.value == s * 6400 * (2 + 4));
  CHECK(last.total.value == 12 * 17 * sbh / 4 + 10 * sbh + 2 * 2 * sbh / 8 + s * 6400 * 6);
  // Full recompute: 12 layer inputs per micro-batch in flight, one whole block rebuilt.
  x.recompute = Checkpointing::full;
  x.in_flight = 2;
  x.head = false;
  CHECK(stage_activations(t, x).total.value == 12 * 2 * sbh / 4 + 57 * sbh / 4);
}

TEST_CASE("model states: 1/t of the stage's matrices, 6 + 12/dp bytes per parameter") {
  const auto m = small_model();
  // A block: QKV 1024 x 3072, out 1024 x 1024, MLP 2 x 1024 x 4096, QKV and MLP biases:
  // 12,590,080 split by t; two LayerNorms (4 h) and the out/down biases (2 h) replicated.
  // tp 2, pp 2: 4 blocks x (6,295,040 + 6,144) = 25,204,736, plus on the first stage half the
  // word embedding (16,384,000) and the position table (2,097,152): 43,685,888. The last
  // stage's copy of the tied embedding and the final LayerNorm (2 x 1024) give it 41,590,784.
  auto l = layout(2, 2, 8);
  const auto mem = memory_3d(m, l, OverheadConstants{});
  // The last stage is the heavier here: it also holds one micro-batch's logits over half the
  // vocabulary, 1024 tokens x 16,000 x (2 B bf16 + 4 B fp32 softmax) = 98,304,000 B, against
  // the first stage's 2,097,152 more parameters x 7.5 B.
  CHECK(mem.stage == 1);
  CHECK(mem.logits.value == 1024LL * 16000 * 6);
  CHECK(mem.params_per_gpu == 41590784);
  CHECK(mem.weights.value == 2 * 41590784LL);
  CHECK(mem.gradients.value == 4 * 41590784LL);
  // Distributed optimizer over dp 8: 12 / 8 = 1.5 bytes per parameter (Megatron-LM docs), of
  // which fp32 main weights 4 / 8 and Adam's moments 8 / 8.
  CHECK(mem.master_weights.value == 41590784LL / 2);
  CHECK(mem.optimizer_states.value == 41590784LL);
  l.sharding = DpSharding::none;
  CHECK(memory_3d(m, l, OverheadConstants{}).master_weights.value == 4 * 41590784LL);
  CHECK(memory_3d(m, l, OverheadConstants{}).optimizer_states.value == 8 * 41590784LL);
  // ZB-V places chunks i and 2p - 1 - i on stage i (Qi et al. 2024, section 6): the first
  // stage holds the embedding and the head, the tied word embedding once, the final norm and
  // the logits: 25,204,736 + 18,481,152 + 2,048.
  auto v = layout(2, 2, 8);
  v.interleave = 2;
  v.micro_batches = 4;
  v.schedule = PipelineSchedule::zbv;
  const auto zbv = memory_3d(m, v, OverheadConstants{});
  CHECK(zbv.stage == 0);
  CHECK(zbv.params_per_gpu == 43687936);
  CHECK(zbv.logits.value == 1024LL * 16000 * 6);
  // Without the head's logits the first stage, with more parameters, would be the heaviest.
  auto encoder = m;
  encoder.transformer->head = HeadKind::base;
  const auto headless = memory_3d(encoder, layout(2, 2, 8), OverheadConstants{});
  CHECK(headless.stage == 0);
  CHECK(headless.params_per_gpu == 43685888);
  CHECK(headless.logits.value == 0);
}

// The heaviest stage found by pricing every stage: the first of those with the most bytes.
Memory3D heaviest_of_all_stages(const ModelDesc& m, const Layout3D& l) {
  Memory3D heaviest;
  for (std::int64_t i = 0; i < l.pp; ++i) {
    auto stage = stage_memory_3d(m, l, i, OverheadConstants{}, false);
    if (i == 0 || stage.total().value > heaviest.total().value) heaviest = std::move(stage);
  }
  return heaviest;
}

TEST_CASE("memory_3d prices stages alike but for their place once, and finds the same heaviest") {
  // Every schedule, pipeline depth, micro-batch count, recomputation, uneven and even splits,
  // on the small dense model and its mixture of experts with three dense first blocks: the
  // stage memory_3d reports must be the one pricing every stage finds (index and bytes).
  auto moe = test::small_transformer();
  moe.moe = {.experts = 8, .experts_per_token = 2, .expert_ffn_size = 1024};
  moe.moe.first_dense_layers = 3;
  const std::vector<ModelDesc> models{small_model(),
                                      model_from_transformer(moe, "small-moe", "test")};
  const std::vector<std::pair<PipelineSchedule, std::int64_t>> schedules{
      {PipelineSchedule::gpipe, 1},       {PipelineSchedule::one_f_one_b, 1},
      {PipelineSchedule::interleaved, 2}, {PipelineSchedule::zb_h1, 1},
      {PipelineSchedule::zb_h2, 1},       {PipelineSchedule::zbv, 2}};
  std::int64_t compared = 0;
  std::set<std::int64_t> heaviest_stages;
  for (const auto& m : models) {
    for (const auto& [schedule, v] : schedules) {
      for (const std::int64_t pp : {2, 4}) {
        for (const std::int64_t micro_batches : {1, 3, 8}) {
          if (schedule_problem(schedule, pp, v, micro_batches)) continue;
          for (const auto recompute : {Checkpointing::none, Checkpointing::full}) {
            for (const bool uneven : {false, true}) {
              if (uneven && v > 1) continue;
              auto l = layout(1, pp, 2);
              l.schedule = schedule;
              l.interleave = v;
              l.micro_batches = micro_batches;
              l.recompute = recompute;
              if (uneven) {
                l.stage_layers = pp == 2 ? std::vector<std::int64_t>{5, 3}
                                         : std::vector<std::int64_t>{1, 3, 3, 1};
              }
              const auto all = heaviest_of_all_stages(m, l);
              const auto once = memory_3d(m, l, OverheadConstants{}, false);
              CHECK(once.stage == all.stage);
              CHECK(once.total().value == all.total().value);
              CHECK(once.params_per_gpu == all.params_per_gpu);
              heaviest_stages.insert(all.stage);
              ++compared;
            }
          }
        }
      }
    }
  }
  // Not vacuous: many layouts, and the heaviest stage is not always the first.
  CHECK(compared >= 150);
  CHECK(heaviest_stages.size() >= 2);
  CHECK_THROWS_WITH(stage_memory_3d(models[0], layout(1, 2, 2), 2, OverheadConstants{}),
                    Contains("stage 2 of a 2-stage pipeline"));
}

namespace {

// One of the layouts of a wide grid, drawn by `rng`, or nullopt where the model cannot run it.
std::optional<Layout3D> drawn_layout(const TransformerSpec& spec, std::mt19937& rng) {
  const auto pick = [&](auto&& options) {
    return options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
  };
  Layout3D l;
  l.tp = pick(std::vector<std::int64_t>{1, 2, 8});
  l.cp = pick(std::vector<std::int64_t>{1, 2});
  l.pp = pick(std::vector<std::int64_t>{1, 2, 4, 8});
  l.dp = pick(std::vector<std::int64_t>{1, 4, 16});
  l.interleave = l.pp > 1 ? pick(std::vector<std::int64_t>{1, 2}) : 1;
  if (l.pp > 1) {
    l.schedule = pick(std::vector<PipelineSchedule>{
        l.interleave > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b,
        l.interleave > 1 ? PipelineSchedule::zbv : PipelineSchedule::gpipe, PipelineSchedule::zb_h1,
        PipelineSchedule::zb_h2});
  }
  l.micro_batch = pick(std::vector<std::int64_t>{1, 2});
  l.micro_batches = pick(std::vector<std::int64_t>{1, 4, 8, 16});
  l.seq_len = pick(std::vector<std::int64_t>{2048, 4096});
  l.sequence_parallel = l.tp > 1 && pick(std::vector<bool>{false, true});
  l.recompute = pick(std::vector<Checkpointing>{Checkpointing::none, Checkpointing::selective,
                                                Checkpointing::full});
  const auto mode = pick(
      std::vector<std::pair<Framework, DpSharding>>{{Framework::megatron, DpSharding::optimizer},
                                                    {Framework::fsdp2, DpSharding::parameters},
                                                    {Framework::fsdp2, DpSharding::gradients}});
  l.framework = mode.first;
  l.sharding = mode.second;
  l.shard_group =
      l.framework == Framework::fsdp2 && l.dp > 2 ? pick(std::vector<std::int64_t>{0, 2}) : 0;
  l.offload = pick(std::vector<bool>{false, true})
                  ? (l.framework == Framework::megatron ? Offload::optimizer
                                                        : Offload::optimizer_and_params)
                  : Offload::none;
  l.fp8 = pick(std::vector<Fp8Recipe>{Fp8Recipe::none, l.framework == Framework::megatron
                                                           ? Fp8Recipe::delayed
                                                           : Fp8Recipe::tensorwise});
  l.precision = pick(std::vector<Precision>{Precision::bf16, Precision::fp16, Precision::fp32});
  l.attention = l.cp > 1 ? Attention::flash
                         : pick(std::vector<Attention>{Attention::flash, Attention::eager});
  l.optimizer = pick(std::vector<Optimizer>{Optimizer::adamw, Optimizer::sgd, Optimizer::adam8bit});
  if (l.recompute == Checkpointing::selective && l.framework == Framework::megatron) {
    // Megatron-LM's module sets: the default, or some of the discarding modules.
    for (const auto module : {RecomputeModule::mla_up_proj, RecomputeModule::layernorm,
                              RecomputeModule::moe_act, RecomputeModule::mlp}) {
      if (pick(std::vector<bool>{false, true})) l.recompute_modules.add(module);
    }
  }
  if (spec.moe.active()) {
    l.ep = pick(std::vector<std::int64_t>{1, 4, 8});
    l.etp = l.tp > 1 ? pick(std::vector<std::int64_t>{0, 1}) : 0;
    l.capacity_factor = pick(std::vector<double>{0, 1.25});
  }
  if (optimizer_problem(l.framework, l.optimizer)) return std::nullopt;
  if (l.fp8 != Fp8Recipe::none && l.precision == Precision::fp32) return std::nullopt;
  if (stage_split_problem(spec, l)) {  // the layers as even as they come
    l.stage_layers.assign(static_cast<std::size_t>(l.pp), spec.num_layers / l.pp);
    for (std::int64_t i = 0; i < spec.num_layers % l.pp; ++i)
      ++l.stage_layers[static_cast<std::size_t>(i)];
  }
  if (l.pp > 1 && schedule_problem(l.pipeline_schedule(), l.pp, l.interleave, l.micro_batches))
    return std::nullopt;
  if (expert_layout_problem(spec, l) || recompute_problem(spec, l)) return std::nullopt;
  try {
    check_layout(spec, l, 8);
  } catch (const Error&) {
    return std::nullopt;
  }
  return l;
}

}  // namespace

TEST_CASE("a stage-memory cache changes no figure of any layout") {
  // A search keeps one cache over 10^5 layouts (StageMemoryCache): a stage's pieces and
  // activations looked up by what they depend on. Thousands of layouts drawn from a wide grid
  // (tp, cp, pp, interleaving and schedules, micro-batches, sequence, precision, attention,
  // optimizer, recomputation and module sets, frameworks, hybrid sharding, offload, FP8,
  // experts and capacity), in random order through one cache per model, must price exactly
  // as they do without it. A key that leaves out a field the memory reads makes some differ
  // (tried by hand: the head flag, the dense blocks, the pipeline flag, the precision, the
  // attention kernel, the capacity factor, the micro-batches in flight).
  const auto data = resolve_data_dir("");
  const auto k = load_overheads(data / "overheads.json");
  std::mt19937 rng(20261127);
  // DeepSeek-V3 with its dense first blocks spread over several stages too (13 of 61, where
  // its own 3 fit in the first stage of every split drawn).
  auto spread = *load_model("deepseek-v3", data / "models").transformer;
  spread.moe.first_dense_layers = 13;
  const std::vector<ModelDesc> models{
      load_model("llama-2-70b", data / "models"), load_model("deepseek-v3", data / "models"),
      model_from_transformer(spread, "deepseek-v3-13-dense", "test")};
  for (const auto& m : models) {
    const auto& name = m.name;
    StageMemoryCache cache;
    std::int64_t compared = 0;
    std::set<std::int64_t> heaviest;
    for (int draw = 0; draw < 20000; ++draw) {
      const auto l = drawn_layout(*m.transformer, rng);
      if (!l) continue;
      const auto alone = memory_3d(m, *l, k, false);
      const auto cached = memory_3d(m, *l, k, cache);
      INFO(name << ": " << describe(*l));
      CHECK(cached.stage == alone.stage);
      CHECK(cached.params_per_gpu == alone.params_per_gpu);
      CHECK(cached.weights == alone.weights);
      CHECK(cached.master_weights == alone.master_weights);
      CHECK(cached.gradients == alone.gradients);
      CHECK(cached.optimizer_states == alone.optimizer_states);
      CHECK(cached.activations == alone.activations);
      CHECK(cached.logits == alone.logits);
      CHECK(cached.host == alone.host);
      CHECK(cached.buffers == alone.buffers);
      CHECK(cached.overhead == alone.overhead);
      CHECK(cached.outside_allocator == alone.outside_allocator);
      CHECK(cached.allocator_slack == alone.allocator_slack);
      heaviest.insert(alone.stage);
      ++compared;
    }
    INFO(name);
    CHECK(compared >= 1500);  // not vacuous: most draws are layouts the model runs
    CHECK(heaviest.size() >= 2);
  }
  // A cache serves one model and one set of constants.
  StageMemoryCache cache;
  const auto small = small_model();
  (void)memory_3d(small, layout(1, 2, 2), k, cache);
  const auto other = small_model();
  CHECK_THROWS_WITH(memory_3d(other, layout(1, 2, 2), k, cache), Contains("own cache"));
}

TEST_CASE("one Model3D pricing many layouts times each as a fresh one does") {
  // A search prices 10^5 layouts through one Model3D, whose caches (stage compute, group
  // collectives, the data-parallel collectives of a stage) are looked up by what they depend
  // on. Layouts drawn from the wide grid in random order must time exactly as a Model3D made
  // for each alone. A key that leaves out a field makes some differ (tried by hand: the
  // data-parallel key without the micro-batches or the shard group; the stage shards without
  // the framework, whose vocabulary padding differs -- a bug this test found).
  DgxH100 f(16);  // 128 GPUs
  std::mt19937 rng(20261127);
  auto comm = std::make_shared<CommContext>(f.topo);  // routes and rings, not under test
  auto moe = *load_model("deepseek-v3", f.data / "models").transformer;
  moe.num_layers = 16;  // its 3 dense first blocks and 13 sparse ones: quick to price
  const std::vector<ModelDesc> models{load_model("llama-2-7b", f.data / "models"),
                                      model_from_transformer(moe, "deepseek-v3-16", "test")};
  for (const auto& m : models) {
    Model3D shared(m, f.topo, f.table, f.gpu, f.k, comm);
    std::int64_t compared = 0;
    for (int draw = 0; draw < 6000 && compared < 300; ++draw) {
      const auto l = drawn_layout(*m.transformer, rng);
      if (!l || l->gpus() > f.topo.gpu_count()) continue;
      INFO(m.name << ": " << describe(*l));
      const auto cached = shared.time(*l);
      const auto alone = Model3D(m, f.topo, f.table, f.gpu, f.k, comm).time(*l);
      CHECK(cached.step_s == alone.step_s);
      CHECK(cached.dp_sync_s == alone.dp_sync_s);
      CHECK(cached.fsdp_comm_s == alone.fsdp_comm_s);
      CHECK(cached.optimizer_s == alone.optimizer_s);
      CHECK(cached.host_transfer_s == alone.host_transfer_s);
      REQUIRE(cached.dp_ops.size() == alone.dp_ops.size());
      for (std::size_t i = 0; i < alone.dp_ops.size(); ++i) {
        CHECK(cached.dp_ops[i].name == alone.dp_ops[i].name);
        CHECK(cached.dp_ops[i].group == alone.dp_ops[i].group);
        CHECK(cached.dp_ops[i].bytes == alone.dp_ops[i].bytes);
        CHECK(cached.dp_ops[i].runs == alone.dp_ops[i].runs);
        CHECK(cached.dp_ops[i].time_s == alone.dp_ops[i].time_s);
      }
      ++compared;
    }
    INFO(m.name);
    CHECK(compared >= 300);  // not vacuous
  }
}

TEST_CASE("a layout's buffers and overhead: NCCL per communicator, the context, allocator slack") {
  // 2 channels x 2 connections x 100 B = 400 B per communicator; a 1,000 B context; half of
  // what is allocated as slack (numbers chosen to be checked by hand).
  OverheadConstants k;
  k.cuda_context_bytes = 1000;
  k.allocator_slack_fraction = 0.5;
  k.nccl_channels = 2;
  k.nccl_connections_per_channel = 2;
  k.nccl_buffer_bytes_per_connection = 100;
  const auto m = small_model();
  const auto one = memory_3d(m, layout(1, 1, 1), k);
  CHECK(one.buffers.value == 0);  // one GPU: no communicator
  const std::int64_t allocated = one.total().value - one.overhead.value;
  CHECK(one.overhead.value == 1000 + (allocated + 1) / 2);  // the slack rounds up
  CHECK(one.overhead_terms.size() == 2);
  // tp 2 x pp 2 x dp 2: the tensor-parallel, data-parallel and pipeline communicators.
  const auto three = memory_3d(m, layout(2, 2, 2), k);
  CHECK(three.buffers.value == 3 * 400);
  CHECK(three.buffer_terms.at(0).name == "NCCL buffers (3 communicators)");
  // + context parallelism: a fourth.
  auto cp = layout(2, 2, 2);
  cp.cp = 2;
  CHECK(memory_3d(m, cp, k).buffers.value == 4 * 400);
  // FSDP2 hybrid sharding over dp 4 in groups of 2: a shard and a replica communicator, and
  // FSDP2's own buffers: the embedding unit (32,000 x 1,024 words and 2,048 x 1,024 positions,
  // larger than a block) gathered in bf16 with the first block, and its fp32 gradients.
  auto hybrid = layout(1, 1, 4);
  hybrid.framework = Framework::fsdp2;
  hybrid.sharding = DpSharding::parameters;
  hybrid.shard_group = 2;
  const auto with_hybrid = memory_3d(m, hybrid, k);
  constexpr std::int64_t block = 12'590'080 + 6'144;
  constexpr std::int64_t embedding = 32'000LL * 1024 + 2048LL * 1024;
  CHECK(with_hybrid.buffers.value == (embedding + block) * 2 + embedding * 4 + 2 * 400);
  CHECK(with_hybrid.buffer_terms.size() == 3);
}

TEST_CASE("the layout's optimizer sets its states, and each framework runs its own") {
  const auto m = small_model();
  // The last stage of tp 2, pp 2, dp 8 holds 41,590,784 parameters (the test above). Its
  // optimizer-sharded states per parameter are fp32 main weights + the optimizer's fp32
  // tensors, over dp 8: Adam(W) (4 + 8)/8, SGD with momentum (4 + 4)/8, plain SGD 4/8.
  constexpr std::int64_t n = 41590784;
  auto l = layout(2, 2, 8);
  l.optimizer = Optimizer::sgd_momentum;
  CHECK(memory_3d(m, l, OverheadConstants{}).optimizer_states.value == n / 2);
  CHECK(memory_3d(m, l, OverheadConstants{}).master_weights.value == n / 2);
  l.optimizer = Optimizer::sgd;
  CHECK(memory_3d(m, l, OverheadConstants{}).optimizer_states.value == 0);
  CHECK(memory_3d(m, l, OverheadConstants{}).master_weights.value == n / 2);
  CHECK(memory_3d(m, l, OverheadConstants{}).weights.value == 2 * n);  // unchanged
  // Megatron-LM's --optimizer is adam or sgd; torchtitan's [optimizer] name Adam or AdamW.
  CHECK_NOTHROW(check_layout(*m.transformer, l, 8));
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8),
                    Contains("{optimizer} sgd: torchtitan runs Adam or AdamW"));
  l.framework = Framework::megatron;
  l.sharding = DpSharding::optimizer;
  l.optimizer = Optimizer::adam8bit;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8),
                    Contains("{optimizer} adam8bit: Megatron-LM runs adam (AdamW) or sgd"));
}

TEST_CASE("1F1B holds min(p, m) micro-batches, interleaving adds (p - 1)/(p v)") {
  // Without the LM head's logits the first stage, with the embedding and the most
  // micro-batches in flight, is the heaviest.
  auto m = small_model();
  m.transformer->head = HeadKind::base;
  auto l = layout(1, 4, 1);
  l.micro_batches = 8;
  // 8 layers / 4 stages = 2 layers, 4 micro-batches in flight on the first stage, with their
  // token ids.
  CHECK(memory_3d(m, l, {}).activations.value == (kSmallLayer * 2 + kTokenIds) * 4);
  l.interleave = 2;  // 1 + 3/8
  CHECK(double(memory_3d(m, l, {}).activations.value) ==
        Approx((kSmallLayer * 2 + kTokenIds) * 4 * 1.375).margin(2));
  l.interleave = 1;
  l.micro_batches = 2;  // fewer micro-batches than stages
  CHECK(memory_3d(m, l, {}).activations.value == (kSmallLayer * 2 + kTokenIds) * 2);
}

TEST_CASE("layout rules are checked and named") {
  const auto model = small_model();  // kept: the spec below refers into it
  const auto& t = *model.transformer;
  auto sp = layout(4, 1, 1);
  sp.sequence_parallel = true;
  sp.seq_len = 1022;  // Megatron-LM scatters the sequence over the 4 tensor-parallel ranks
  CHECK_THROWS_WITH(
      check_layout(t, sp, 8),
      Contains("1022 tokens over the tensor-parallel ranks: they do not divide by tp"));
  auto l = layout(3, 1, 1);
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("do not divide by tp"));
  l = layout(16, 1, 1);
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("inside a node of 8 GPUs"));
  l = layout(1, 3, 1);
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("8 layers do not divide"));
  l = layout(1, 2, 1);
  l.interleave = 2;
  l.micro_batches = 3;
  CHECK_THROWS_WITH(check_layout(t, l, 8),
                    Contains("schedule interleaved: micro-batches must be a multiple of pp"));
  l = layout(1, 1, 1);
  l.sequence_parallel = true;
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("sequence parallelism needs tp > 1"));
}

TEST_CASE("step time: the bubble is (p - 1)/v micro-batches, full recompute adds 2 all-reduces") {
  const DgxH100 f(1);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(2, 4, 1);
  l.micro_batches = 8;
  const auto one = model.time(l);
  CHECK(one.bubble_s == Approx(3 * one.microbatch_s));
  CHECK(one.pipeline_s == Approx(11 * one.microbatch_s));
  CHECK(one.microbatch_s == Approx(one.compute_s + one.tp_comm_s + one.p2p_s));
  CHECK(one.step_s == Approx(one.pipeline_s + one.dp_sync_s + one.optimizer_s));
  l.interleave = 2;
  const auto two = model.time(l);
  CHECK(two.bubble_s == Approx(1.5 * two.microbatch_s));
  CHECK(two.p2p_s == Approx(2 * one.p2p_s));  // twice the stage boundaries
  l.interleave = 1;
  l.recompute = Checkpointing::full;
  const auto full = model.time(l);
  CHECK(full.tp_comm_s == Approx(1.5 * one.tp_comm_s));
  CHECK(full.compute_s > one.compute_s);  // the forward runs again
  // Twice the GPUs as data parallelism: the same stage work, plus a gradient reduction.
  l = layout(2, 4, 1);
  l.micro_batches = 8;
  CHECK(model.time(l).dp_sync_s == 0);
  CHECK_THROWS_WITH(model.time(layout(2, 4, 2)), Contains("16 GPUs: the cluster has 8"));
}

TEST_CASE("step time under the zero-bubble schedules: B and W split the backward") {
  const DgxH100 f(1);
  const auto& m = f.m;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(2, 4, 1);
  l.micro_batches = 8;
  const auto base = model.time(l);
  l.schedule = PipelineSchedule::zb_h1;
  const auto h1 = model.time(l);
  l.schedule = PipelineSchedule::zb_h2;
  const auto h2 = model.time(l);
  // The micro-batch's work is the same; only the idle time changes. 1F1B: 3 (F + B + W);
  // ZB-H1: 3 (F + B - W), so W = (bubble_1f1b - bubble_h1) / 6; ZB-H2: 3 max(0, F + B - 2W).
  CHECK(h1.microbatch_s == Approx(base.microbatch_s));
  const double w = (base.bubble_s - h1.bubble_s) / 6;
  // Weight gradients are half of the backward GEMMs: between a quarter and a half of the
  // micro-batch's compute (backward is about twice forward).
  CHECK(w > 0.2 * base.compute_s);
  CHECK(w < 0.5 * base.compute_s);
  CHECK(h2.bubble_s == Approx(3 * std::max(0.0, base.microbatch_s - 3 * w)).margin(1e-12));
  CHECK(h2.pipeline_s == Approx(8 * base.microbatch_s + h2.bubble_s));
  // ZB-H2 keeps 2p - 1 = 7 micro-batches in flight against 1F1B's 4.
  const auto overheads = OverheadConstants{};
  l.schedule = PipelineSchedule::one_f_one_b;
  const auto mem_1f1b = memory_3d(m, l, overheads).activations.value;
  l.schedule = PipelineSchedule::zb_h2;
  CHECK(memory_3d(m, l, overheads).activations.value ==
        Approx(static_cast<double>(mem_1f1b) * 7.0 / 4).epsilon(1e-9));
  // ZBV needs two chunks per GPU.
  l.schedule = PipelineSchedule::zbv;
  CHECK_THROWS_WITH(model.time(l), Contains("exactly two model chunks"));
}

TEST_CASE("data-parallel groups inside a node reduce over NVLink, across nodes over the NICs") {
  const DgxH100 f(2);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // tp 1 x dp 8 x pp 2: each data-parallel group is the 8 GPUs of one node (ranks tp, dp, pp).
  auto inside = layout(1, 2, 8);
  inside.micro_batches = 4;
  // tp 2 x dp 8 x pp 1: a group spans 16 ranks, both nodes.
  auto across = layout(2, 1, 8);
  across.micro_batches = 4;
  const auto t_inside = model.time(inside), t_across = model.time(across);
  REQUIRE(t_inside.dp_sync_s > 0);
  CHECK(t_across.dp_sync_s > t_inside.dp_sync_s);
  // Across: a rank of tp 2 holds 8 x (6,295,040 + 6,144) + 16,384,000 + 2,097,152 + 2,048 =
  // 68,892,672 parameters, 275,570,688 B of fp32 gradients. Its group is 4 GPUs in each of
  // the 2 nodes (the other tensor-parallel rank's group interleaved), a ring of 8 over 4
  // NICs per node: each NIC carries 2 x 7/8 x 1/4 of the bytes at 47 GB/s (400 Gb/s at 94%),
  // 2.5652 ms for an all-reduce. The distributed optimizer's reduce-scatter and all-gather
  // of bf16 parameters take half of that plus a quarter: 1.9239 ms, plus the calls' latency.
  const double all_reduce = 2 * 7.0 / 8 * 275570688.0 / 4 / 47e9;
  CHECK(t_across.dp_sync_s > 0.75 * all_reduce);
  CHECK(t_across.dp_sync_s == Approx(0.75 * all_reduce).epsilon(0.03));
}

TEST_CASE("uneven pipeline stages: Megatron's split, a given list, and the heaviest stage") {
  // Llama 3 405B: 126 layers over 16 stages, one layer fewer on the first and the last to
  // balance the embedding and the loss (Llama 3 paper, section 3.3.2): 7, 14 x 8, 7.
  TransformerSpec big;
  big.num_layers = 126;
  auto l = layout(8, 16, 1);
  std::vector<std::int64_t> expected(16, 8);
  expected.front() = expected.back() = 7;
  CHECK(layers_per_stage(big, l) == expected);
  big.num_layers = 80;  // divides: 20 each
  CHECK(layers_per_stage(big, layout(1, 4, 1)) == std::vector<std::int64_t>(4, 20));
  big.num_layers = 13;  // neither 13 nor 15 divides by 4
  CHECK_THROWS_WITH(layers_per_stage(big, layout(1, 4, 1)),
                    Contains("13 layers do not divide") && Contains("({pp_layers})"));
  l = layout(1, 4, 1);
  l.stage_layers = {4, 3, 3, 3};
  CHECK(layers_per_stage(big, l) == l.stage_layers);
  l.stage_layers = {4, 3, 3};
  CHECK_THROWS_WITH(layers_per_stage(big, l), Contains("has 3 entries for pp 4"));
  l.stage_layers = {4, 4, 3, 3};
  CHECK_THROWS_WITH(layers_per_stage(big, l), Contains("add up to 14, the model has 13"));
  l.stage_layers = {7, 1, 1, 4};
  l.interleave = 2;
  CHECK_THROWS_WITH(layers_per_stage(big, l), Contains("at least one layer per model chunk"));
}

TEST_CASE("the heaviest stage sets memory: micro-batches in flight fall along the pipeline") {
  const auto m = small_model();  // 8 layers, tied embeddings
  const auto k = OverheadConstants{};
  // pp 4, 1F1B, m = 8: stage i holds 4 - i micro-batches of its 2 layers; stage 0 also has
  // the embedding and holds the most activations, so it is the heaviest.
  auto l = layout(1, 4, 1);
  l.micro_batches = 8;
  const auto mem = memory_3d(m, l, k);
  CHECK(mem.stage == 0);
  CHECK(mem.activations.value == (kSmallLayer * 2 + kTokenIds) * 4);
  const double layer = kSmallLayer;
  // pp 5 on 8 layers: 8 + 2 = 10 divides by 5, so 1, 2, 2, 2, 1. Stage 0 holds 1 layer and
  // the embedding with 5 micro-batches in flight; stage 1 2 layers with 4; stage 4 1 layer,
  // the tied head's copy of the word embedding (Megatron keeps one on the last stage), the
  // final norm and one micro-batch's head inputs, logits and fp32 softmax (1024 x 32,000 x
  // 6 B). By hand:
  l = layout(1, 5, 1);
  l.micro_batches = 8;
  const auto split = layers_per_stage(*m.transformer, l);
  CHECK(split == std::vector<std::int64_t>{1, 2, 2, 2, 1});
  const double block = 12.0 * 1024 * 1024 + 13 * 1024;  // matrices, biases and norms
  const double embedding = 32000.0 * 1024 + 2048.0 * 1024, head = 32000.0 * 1024;
  const double final_norm = 2 * 1024;   // the last stage's LayerNorm weight and bias
  const double per_param = 2 + 4 + 12;  // bf16 weights, fp32 main grads, Adam (dp 1)
  const double stage0 = (block + embedding) * per_param + (layer * 1 + kTokenIds) * 5;
  const double stage1 = 2 * block * per_param + layer * 2 * 4;
  const double stage4 =
      (block + head + final_norm) * per_param + layer + kHeadInputs + 1024.0 * 32000 * 6;
  const auto heavy = memory_3d(m, l, k);
  CHECK(heavy.stage == 4);  // the loss outweighs stage 0's 4 more micro-batches in flight
  CHECK(stage4 > std::max(stage0, stage1));
  CHECK(static_cast<double>(heavy.total().value - heavy.overhead.value) ==
        Approx(stage4).epsilon(1e-9));
  // Interleaved, per stage: Megatron's warm-up 2(p - i - 1) + (v - 1)p chunk micro-batches
  // plus one, over v: p = 4, v = 2 gives 5.5 on the first stage and 2.5 on the last.
  CHECK(stage_in_flight(PipelineSchedule::interleaved, 4, 2, 8, 0) == Approx(5.5));
  CHECK(stage_in_flight(PipelineSchedule::interleaved, 4, 2, 8, 3) == Approx(2.5));
  CHECK(stage_in_flight(PipelineSchedule::one_f_one_b, 4, 1, 8, 3) == 1);
  CHECK(stage_in_flight(PipelineSchedule::zb_h2, 4, 1, 8, 1) == 5);  // 2(p - i) - 1
}

TEST_CASE("the slowest stage sets the pace: an uneven split is timed by its largest stage") {
  const DgxH100 f(1);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // pp 5 (1, 2, 2, 2, 1) and pp 4 (2 each): both are paced by a 2-layer stage.
  auto five = layout(1, 5, 1);
  five.micro_batches = 10;
  auto four = layout(1, 4, 1);
  four.micro_batches = 10;
  CHECK(model.time(five).compute_s == Approx(model.time(four).compute_s));
  // Giving the list explicitly as 1, 3, 2, 2 makes a 3-layer stage the pace. A stage's compute
  // is the LM head plus its layers, so 3 layers cost one layer more than 2, as 2 cost more
  // than 1 (pp 8: a layer per stage).
  auto eight = layout(1, 8, 1);
  eight.micro_batches = 16;
  const double c1 = model.time(eight).compute_s, c2 = model.time(five).compute_s;
  four.stage_layers = {1, 3, 2, 2};
  const double c3 = model.time(four).compute_s;
  CHECK(c3 - c2 == Approx(c2 - c1).epsilon(1e-9));
  CHECK(c3 > c2);
}

namespace {

// The small model on the round-number 4-GPU PCIe switch (10 GB/s links, efficiency 1; tests'
// interconnect_simple.json), a GPU of 1e14 bf16 FLOP/s, attention at 50% and no per-kernel
// cost: the context-parallel exchange can be derived by hand.
struct RoundSwitch {
  RoundSwitch()
      : table(InterconnectTable::load(kTopo / "interconnect_simple.json")),
        topo(Topology::build(load_node_template((kTopo / "switch4.json").string(), data), 1,
                             table)) {
    gpu.name = "round";
    gpu.memory = Bytes{80LL << 30};
    gpu.memory_bandwidth_bytes_per_s = 1e12;
    gpu.peak_flops.bf16 = 1e14;
    k.gemm_efficiency = k.attention_efficiency = k.memory_efficiency = 0.5;
    k.cpu_optimizer_bytes_per_s = 1e10;
    k.host_transfer_efficiency = 0.5;
  }
  const std::filesystem::path kTopo = std::filesystem::path(DTPLAN_TEST_DATA_DIR) / "topo";
  std::filesystem::path data = resolve_data_dir("");
  ModelDesc m = small_model();
  InterconnectTable table;
  Topology topo;
  GpuSpec gpu;
  ComputeConstants k;
};

Layout3D context_parallel(std::int64_t cp, CpComm comm) {
  auto l = layout(1, 1, 1);
  l.seq_len = 2048;
  l.cp = cp;
  l.cp_comm = comm;
  return l;
}

}  // namespace

TEST_CASE("context parallelism: s/cp tokens of activations, optimizer sharded over dp x cp") {
  const OverheadConstants overheads;
  auto one = context_parallel(1, CpComm::p2p);
  const auto two = context_parallel(2, CpComm::p2p);
  // cp 1 with eager attention, s 2048, h 1024, a 16, 8 layers, no dropout: 32 sbh and the
  // 16-bit scores 2 a s^2 per layer; the token ids (8 s) and the final norm and head inputs
  // (2 x 2 sbh) of the one stage.
  one.attention = Attention::eager;
  constexpr std::int64_t sbh2 = 2048LL * 1024;
  CHECK(memory_3d(small_model(), one, overheads).activations.value ==
        8 * (32 * sbh2 + 2 * 16 * 2048LL * 2048) + 8 * 2048 + 4 * sbh2);
  // Context parallelism runs on fused attention only.
  one.cp = 2;
  CHECK_THROWS_WITH(check_layout(*small_model().transformer, one, 8),
                    Contains("fused attention") && Contains("({attention} flash)"));
  one.cp = 1;
  // cp 2: 1024 tokens per rank under flash attention (the layout's default).
  const auto mem = memory_3d(small_model(), two, overheads);
  CHECK(mem.activations.value == 8 * kSmallLayer + kTokenIds + kHeadInputs);
  // Megatron's distributed optimizer shards main weights and moments (12 B) over dp x cp = 2.
  CHECK(mem.master_weights.value == mem.params_per_gpu * 4 / 2);
  CHECK(mem.optimizer_states.value == mem.params_per_gpu * 8 / 2);
  CHECK(mem.weights.value == mem.params_per_gpu * 2);
  CHECK(two.gpus() == 2);
  one.dp = 2;
  CHECK(memory_3d(small_model(), one, overheads).optimizer_states == mem.optimizer_states);
}

TEST_CASE("context parallelism: layout rules name the sequence split and the heads") {
  const auto m = *small_model().transformer;
  auto l = context_parallel(4, CpComm::p2p);
  l.seq_len = 2044;  // not a multiple of 2 x cp = 8
  CHECK_THROWS_WITH(check_layout(m, l, 8), Contains("does not divide into 2 x cp = 8 chunks"));
  l.seq_len = 2048;
  CHECK_NOTHROW(check_layout(m, l, 8));
  l.cp = 32;  // Ulysses splits the 16 heads over 32 ranks: impossible
  l.cp_comm = CpComm::a2a;
  CHECK_THROWS_WITH(check_layout(m, l, 8), Contains("16 attention heads per tensor-parallel rank "
                                                    "do not divide by cp 32"));
  // GQA: 16 heads divide by 8, their 4 key/value heads do not; the message names those.
  auto gqa = m;
  gqa.num_kv_heads = 4;
  l.cp = 8;
  CHECK_THROWS_WITH(check_layout(gqa, l, 8),
                    Contains("4 key/value heads per tensor-parallel rank do not divide by cp 8"));
  CHECK(parse_cp_comm("all_gather") == CpComm::all_gather);
  CHECK_THROWS_WITH(parse_cp_comm("ring"), Contains("known: p2p, all_gather, a2a"));
}

TEST_CASE("ring attention: the K/V pass is exposed where it outlasts one chunk's attention") {
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  const auto base = model.time(context_parallel(1, CpComm::p2p));
  CHECK(base.cp_comm_s == 0);
  const auto ring = model.time(context_parallel(2, CpComm::p2p));
  // A rank's K and V: 2 x 1024 tokens x 1024 x 2 B = 4,194,304 B; over a 10 GB/s PCIe link
  // plus 5 us per send: 424.4304 us a step. One chunk pair's causal flash attention:
  // 4 x 1024^2 x 1024 / 2 FLOPs at 5e13 FLOP/s = 42.9497 us forward, 2.5 x that backward.
  const double step = 5e-6 + 4194304.0 / 1e10, pair = 4.0 * 1024 * 1024 * 1024 / 2 / 5e13;
  const double forward = step - pair;                                // cp - 1 = 1 step
  const double backward = 5e-6 + 2 * 4194304.0 / 1e10 - 2.5 * pair;  // K/V and their gradients
  CHECK(ring.cp_comm_s == Approx(8 * (forward + backward)).epsilon(1e-9));
  // Each rank computes half the tokens' GEMMs but as much attention as half the whole
  // sequence's: cp x the attention of 1024 tokens (the causal split is balanced).
  CHECK(ring.samples_per_s < base.samples_per_s * 2);
}

TEST_CASE("all-gather and Ulysses context parallelism: exposed collectives of the K/V bytes") {
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // All-gather of both ranks' K/V (8,388,608 B) and, backward, again plus a reduce-scatter of
  // their gradients: on 2 ranks each moves half the bytes over its 10 GB/s link.
  const double half = 4194304.0 / 1e10;
  const auto gather = model.time(context_parallel(2, CpComm::all_gather));
  CHECK(gather.cp_comm_s == Approx(8 * 3 * half).epsilon(0.03));  // + per-call latency
  CHECK(gather.cp_comm_s > 8 * 3 * half);
  // Ulysses: Q, K, V in and the output back, (2q + 2k) x 1024 tokens x 2 B = 8,388,608 B per
  // rank, of which half crosses to the other rank; forward and backward.
  const auto ulysses = model.time(context_parallel(2, CpComm::a2a));
  CHECK(ulysses.cp_comm_s == Approx(8 * 2 * half).epsilon(0.03));
  CHECK(ulysses.cp_comm_s > 8 * 2 * half);
  // Recomputation repeats the forward exchange.
  auto recompute = context_parallel(2, CpComm::a2a);
  recompute.recompute = Checkpointing::selective;
  CHECK(model.time(recompute).cp_comm_s == Approx(ulysses.cp_comm_s * 1.5).epsilon(1e-9));
}

namespace {

// One block of the small model: 12,590,080 matrix parameters and biases split by t, 6,144
// norm weights and biases replicated (see "model states" above); t = 1 here.
constexpr std::int64_t kBlock = 12'590'080 + 6'144;

Layout3D fsdp2(std::int64_t dp, DpSharding sharding) {
  auto l = layout(1, 1, dp);
  l.framework = Framework::fsdp2;
  l.sharding = sharding;
  return l;
}

}  // namespace

TEST_CASE("FSDP2 x TP: fp32 shards, bf16 gathers of a block and the next, fp32 gradient buffer") {
  const auto m = small_model();
  const OverheadConstants overheads;
  const auto mem = memory_3d(m, fsdp2(4, DpSharding::parameters), overheads);
  const auto n = mem.params_per_gpu;
  // torchtitan's MixedPrecisionPolicy(bf16, reduce fp32): fp32 parameters and gradients and
  // AdamW's two fp32 moments, all sharded over the 4 ranks.
  CHECK(mem.weights.value == n * 4 / 4);
  CHECK(mem.optimizer_states.value == n * 8 / 4);
  // The gradients' n * 4 / 4 bytes are not all there at the peak: with one micro-batch and
  // zero_grad(set_to_none=True) it comes at the start of backward, with only the head's fp32
  // gradient shard, 32,000 x 1,024 x 4 B / 4 ranks.
  CHECK(mem.gradients.value == 32000LL * 1024 * 4 / 4);
  // torchtitan wraps the embedding as a unit of its own (apply_fsdp, since PR #1094): here
  // 32,000 x 1,024 words and 2,048 x 1,024 positions, 34,865,152, larger than a block. At the
  // start of forward it is in use while the first block is prefetched: the most gathered in
  // bf16 at once, more than two blocks. Its fp32 gradients are the largest unit's.
  constexpr std::int64_t embedding = 32'000LL * 1024 + 2048LL * 1024;
  CHECK(mem.buffers.value == (embedding + kBlock) * 2 + embedding * 4);
  // PyTorch SDPA keeps no scores (s 1024, h 1024, 8 layers), its one stage the token ids and
  // the final norm and head inputs.
  CHECK(mem.activations.value == 8 * kSmallLayer + kTokenIds + kHeadInputs);
  // The loss's peak is in backward: torchtitan deletes the bf16 logits first (train.py, "to
  // avoid peaking memory"), then nll_loss's backward makes a dense fp32 gradient of the kept
  // fp32 log-softmax and log_softmax's backward the logits' fp32 gradient: 12 B x 1024 x
  // 32,000, more than forward's bf16 logits, fp32 copy and log-softmax (10 B).
  CHECK(mem.logits.value == 1024LL * 32000 * 12);
  // reshard_after_forward=False keeps every block gathered from forward to backward.
  const auto kept = memory_3d(m, fsdp2(4, DpSharding::gradients), overheads);
  CHECK(kept.buffers.value == n * 2 + embedding * 4);
  // Hybrid sharding: groups of 2 shard, the 2 groups replicate.
  auto hybrid = fsdp2(4, DpSharding::parameters);
  hybrid.shard_group = 2;
  CHECK(memory_3d(m, hybrid, overheads).weights.value == n * 4 / 2);
}

TEST_CASE("FSDP2 selective is torchtitan's per-op policy: backward gathers the sequence again") {
  // torchtitan's tensor parallelism is sequence-parallel: each way of each block an all-gather
  // before the column-parallel GEMMs and a reduce-scatter after the row-parallel one. The
  // per-op policy saves the reduce-scatters' outputs, not the all-gathers': backward repeats
  // half the forward's collectives, 2 + 1/2 forward's worth against 2 without recomputation
  // and 3 under full recomputation. Megatron-LM's selective (core_attn) repeats none.
  const DgxH100 f(1);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(2, 1, 4);
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  l.sequence_parallel = true;
  const auto none = model.time(l);
  REQUIRE(none.tp_comm_s > 0);
  l.recompute = Checkpointing::selective;
  CHECK(model.time(l).tp_comm_s == Approx(1.25 * none.tp_comm_s).epsilon(1e-12));
  l.recompute = Checkpointing::full;
  CHECK(model.time(l).tp_comm_s == Approx(1.5 * none.tp_comm_s).epsilon(1e-12));
  // Full checkpointing of every 2nd block (torchtitan's selective_ac_option "2") repeats half
  // the blocks' forward collectives: 2 + 1/2.
  l.checkpoint_every = 2;
  CHECK(model.time(l).tp_comm_s == Approx(1.25 * none.tp_comm_s).epsilon(1e-12));
  l.recompute = Checkpointing::selective;
  CHECK_THROWS_WITH(model.time(l), Contains("{checkpoint_every} 2 needs {checkpointing} full"));
  l.checkpoint_every = 1;
  l.framework = Framework::megatron;
  l.sharding = DpSharding::none;
  l.recompute = Checkpointing::full;
  l.checkpoint_every = 2;
  CHECK_THROWS_WITH(model.time(l), Contains("Megatron-LM recomputes the first blocks"));
  l.checkpoint_every = 1;
  l.recompute = Checkpointing::none;
  const auto megatron = model.time(l);
  l.recompute = Checkpointing::selective;
  CHECK(model.time(l).tp_comm_s == Approx(megatron.tp_comm_s).epsilon(1e-12));
}

TEST_CASE("FSDP2 layout rules name the framework's sharding modes and the shard group") {
  const auto m = *small_model().transformer;
  auto l = fsdp2(4, DpSharding::optimizer);
  CHECK_THROWS_WITH(check_layout(m, l, 8), Contains("FSDP2 shards parameters and gradients"));
  l.sharding = DpSharding::parameters;
  l.shard_group = 3;
  CHECK_THROWS_WITH(check_layout(m, l, 8), Contains("shard group 3 does not divide dp x cp = 4"));
  auto megatron = layout(1, 1, 4);
  megatron.sharding = DpSharding::parameters;
  CHECK_THROWS_WITH(check_layout(m, megatron, 8), Contains("needs framework fsdp2"));
  CHECK(parse_framework("fsdp2") == Framework::fsdp2);
  CHECK_THROWS_WITH(parse_dp_sharding("full"),
                    Contains("known: none, optimizer, gradients, parameters"));
}

TEST_CASE("FSDP2 step: with enough compute only the first gather of each pass shows") {
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // 8 x 2048 tokens: a block's forward (2 x 12.6e6 x 16384 FLOPs at 5e13 FLOP/s, 8.3 ms)
  // outlasts its bf16 all-gather over the 4 ranks' 10 GB/s links (3/4 x 25,192,448 B: 1.89
  // ms), and the backward (twice that) the gather plus the fp32 reduce-scatter (3.78 ms). The
  // units are the 8 blocks and the root (embedding, positions, final norm: R parameters),
  // gathered first. U messages alongside enough compute leave T/U exposed (step_time.hpp):
  // forward (8g + g_R)/9, backward (8g + g_R + 8r + r_R)/9.
  auto l = fsdp2(4, DpSharding::parameters);
  l.seq_len = 2048;
  l.micro_batch = 8;
  const double root = static_cast<double>(f.m.params - 8 * kBlock);
  const double g = 0.75 * kBlock * 2 / 1e10, r = 0.75 * kBlock * 4 / 1e10;
  const double g_root = 0.75 * root * 2 / 1e10, r_root = 0.75 * root * 4 / 1e10;
  const double forward = (8 * g + g_root) / 9, backward = (8 * (g + r) + g_root + r_root) / 9;
  const auto t = model.time(l);
  CHECK(t.fsdp_comm_s == Approx(forward + backward).epsilon(0.01));  // + latency
  CHECK(t.fsdp_comm_s > forward + backward);
  CHECK(t.dp_sync_s == 0);  // gradients were reduce-scattered in backward
  // The registry's FSDP2 rows, priced on the 4 ranks: 9 messages each.
  REQUIRE(t.dp_ops.size() == 3);
  CHECK(t.dp_ops[0].messages == 9);
  CHECK(t.dp_ops[2].collective == Collective::reduce_scatter);
  CHECK(t.dp_ops[2].bytes.value == (8 * kBlock + f.m.params - 8 * kBlock) * 4);
  // Blocks kept gathered from forward: no gathers in backward.
  l.sharding = DpSharding::gradients;
  CHECK(model.time(l).fsdp_comm_s == Approx(forward + (8 * r + r_root) / 9).epsilon(0.01));
}

TEST_CASE("Megatron data-parallel step: the registry's rows, priced on the dp group") {
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // dp 4 on 10 GB/s links, P parameters per GPU. The distributed optimizer reduce-scatters
  // the fp32 main gradients after the last micro-batch (3/4 x 4P B at 10 GB/s) and all-gathers
  // the updated bf16 weights after the step (3/4 x 2P B), both exposed (Megatron-LM docs,
  // "Distributed Optimizer"); without it, one all-reduce of the gradients (2 x 3/4 x 4P B).
  auto l = layout(1, 1, 4);
  l.micro_batches = 3;
  const double p = static_cast<double>(f.m.params);
  const auto sharded = model.time(l);
  REQUIRE(sharded.dp_ops.size() == 2);
  CHECK(sharded.dp_ops[0].collective == Collective::reduce_scatter);
  CHECK(sharded.dp_ops[0].runs == 1);  // once per step, not per micro-batch
  CHECK(sharded.dp_ops[0].bytes.value == f.m.params * 4);
  CHECK(sharded.dp_ops[1].collective == Collective::all_gather);
  CHECK(sharded.dp_ops[1].bytes.value == f.m.params * 2);
  const double rs = 0.75 * 4 * p / 1e10, ag = 0.75 * 2 * p / 1e10;
  CHECK(sharded.dp_sync_s == Approx(rs + ag).epsilon(0.01));  // + latency
  CHECK(sharded.dp_sync_s > rs + ag);
  l.sharding = DpSharding::none;
  const auto replicated = model.time(l);
  REQUIRE(replicated.dp_ops.size() == 1);
  CHECK(replicated.dp_ops[0].collective == Collective::all_reduce);
  CHECK(replicated.dp_sync_s == Approx(2 * rs).epsilon(0.01));
  // The micro-batches are not slowed: nothing overlaps them.
  CHECK(replicated.fsdp_comm_s == 0);
  CHECK(replicated.step_s ==
        Approx(3 * replicated.microbatch_s + replicated.dp_sync_s + replicated.optimizer_s));
}

// dp 4, 3 micro-batches of 8 x 2048 tokens: the layout of the overlap tests below.
Layout3D overlap_layout() {
  auto l = layout(1, 1, 4);
  l.seq_len = 2048;
  l.micro_batch = 8;
  l.micro_batches = 3;
  return l;
}

TEST_CASE("Megatron --overlap-grad-reduce and --overlap-param-gather: buckets beside compute") {
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // dp 4 on 10 GB/s links, P = 8 blocks + the root, 135.6 M parameters; 3 micro-batches of 8 x
  // 2048 tokens (a backward of about 133 ms, a forward of 66 ms). Megatron-LM's buckets hold
  // max(40,000,000, 1,000,000 x 4) parameters: 3 full and the rest, 4 messages. Reduced
  // alongside the last micro-batch's backward, 4 messages beside enough compute leave the
  // first T/4 exposed (step_time.hpp): rs / 4 of the reduce-scatter (3/4 x 4P B at 10 GB/s),
  // the all-gather still after the step. --overlap-param-gather moves the gather beside the
  // next step's first forward: ag / 4 of it exposed there.
  auto l = overlap_layout();
  const double p = static_cast<double>(f.m.params);
  REQUIRE((p > 120e6 && p < 160e6));
  const double rs = 0.75 * 4 * p / 1e10, ag = 0.75 * 2 * p / 1e10;
  const auto after = model.time(l);
  CHECK(after.dp_sync_s == Approx(rs + ag).epsilon(0.01));
  CHECK(after.fsdp_comm_s == 0);
  l.overlap_grad_reduce = true;
  const auto reduce = model.time(l);
  REQUIRE(reduce.dp_ops.size() == 2);
  CHECK(reduce.dp_ops[0].messages == 4);
  CHECK(reduce.dp_ops[0].runs == 1);  // the last micro-batch's backward only
  // What the buckets leave exposed falls at the ends of the step, once: not in each
  // micro-batch (nor, under a pipeline, in the bubble).
  CHECK(reduce.fsdp_comm_s == 0);
  CHECK(reduce.dp_sync_s == Approx(ag + rs / 4).epsilon(0.02));  // + latency
  l.overlap_param_gather = true;
  const auto both = model.time(l);
  CHECK(both.dp_ops[1].messages == 4);
  CHECK(both.dp_sync_s == Approx(rs / 4 + ag / 4).epsilon(0.02));
  CHECK(both.step_s < reduce.step_s);
  CHECK(reduce.step_s < after.step_s);
  // Without the reduce overlap Megatron-LM (since August 2024, 4e3840535b) still takes the
  // gather overlap, but its buckets are off: the next forward waits on one whole gather, as
  // exposed as the gather after the step.
  l.overlap_grad_reduce = false;
  const auto gather_only = model.time(l);
  CHECK(gather_only.dp_sync_s == Approx(after.dp_sync_s));
  CHECK(gather_only.step_s == Approx(after.step_s));
  // Megatron-LM's own rules: the gather overlap needs the distributed optimizer; FSDP2
  // overlaps by design.
  l.overlap_grad_reduce = true;
  l.sharding = DpSharding::none;
  CHECK_THROWS_WITH(model.time(l), Contains("needs Megatron-LM's distributed optimizer"));
  l.overlap_param_gather = false;
  CHECK(model.time(l).dp_ops[0].collective == Collective::all_reduce);
  l = fsdp2(4, DpSharding::parameters);
  l.overlap_grad_reduce = true;
  CHECK_THROWS_WITH(model.time(l), Contains("is Megatron-LM's"));
}

TEST_CASE("Megatron --ddp-bucket-size and --grad-reduce-in-bf16: buckets and bytes reduced") {
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // The layout of the overlap test above: P = 135.6 M parameters on dp 4, 3 micro-batches.
  // Buckets of 20,000,000 parameters: ceil(P / 2e7) = 7 messages, the first rs / 7 of the
  // reduce-scatter and ag / 7 of the gather exposed.
  auto l = overlap_layout();
  l.overlap_grad_reduce = l.overlap_param_gather = true;
  l.ddp_bucket_params = 20'000'000;
  const double p = static_cast<double>(f.m.params);
  REQUIRE((p > 120e6 && p < 140e6));
  const double rs = 0.75 * 4 * p / 1e10, ag = 0.75 * 2 * p / 1e10;
  const auto small = model.time(l);
  CHECK(small.dp_ops[0].messages == 7);
  CHECK(small.dp_ops[1].messages == 7);
  CHECK(small.dp_sync_s == Approx(rs / 7 + ag / 7).epsilon(0.03));  // + latency
  // bf16 main gradients: the reduce-scatter carries 2 B a parameter, half the fp32 one; the
  // gather is unchanged. Memory: the gradient buffer is 2 B a parameter instead of 4.
  l.grad_reduce_bf16 = true;
  const auto half = model.time(l);
  CHECK(half.dp_ops[0].bytes.value == f.m.params * 2);
  CHECK(half.dp_ops[1].bytes.value == f.m.params * 2);
  CHECK(half.dp_sync_s == Approx(rs / 14 + ag / 7).epsilon(0.03));
  // Under a pipeline the exposed tail falls once, after the first stage's last backward: the
  // micro-batches and the bubble of pp 2 are those without the overlap, however small the
  // buckets.
  auto piped = layout(1, 2, 2);
  piped.seq_len = 2048;
  piped.micro_batch = 8;
  piped.micro_batches = 2;
  const auto plain_pipe = model.time(piped);
  piped.overlap_grad_reduce = true;
  piped.ddp_bucket_params = 1'000'000;
  const auto bucketed_pipe = model.time(piped);
  CHECK(bucketed_pipe.microbatch_s == Approx(plain_pipe.microbatch_s));
  CHECK(bucketed_pipe.bubble_s == Approx(plain_pipe.bubble_s));
  const OverheadConstants overheads;
  CHECK(memory_3d(f.m, l, overheads).gradients.value == 2 * f.m.params);
  l.grad_reduce_bf16 = false;
  CHECK(memory_3d(f.m, l, overheads).gradients.value == 4 * f.m.params);
  // Megatron-LM ignores a bucket size without the reduce overlap; dtplan refuses it, and
  // bf16 reduction of fp16 or fp32 training.
  l.overlap_grad_reduce = l.overlap_param_gather = false;
  CHECK_THROWS_WITH(model.time(l), Contains("{ddp_bucket_size} needs {overlap_grad_reduce}"));
  l.ddp_bucket_params = 0;
  l.grad_reduce_bf16 = true;
  l.precision = Precision::fp16;
  CHECK_THROWS_WITH(model.time(l), Contains("{grad_reduce_in_bf16} needs {precision} bf16"));
}

TEST_CASE("Megatron --fp8-param-gather: Linear weights held and gathered in FP8") {
  RoundSwitch f;
  f.gpu.peak_flops.fp8 = 2 * f.gpu.peak_flops.bf16;  // FP8 tensor cores, as Hopper's
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  // dp 4, FP8 per-tensor scaling. The 8 blocks' Linear weights, 4 h^2 + 2 h f =
  // 4 x 1024^2 + 2 x 1024 x 4096 = 12,582,912 each, W = 100,663,296 in all, are the FP8
  // tensors Transformer Engine keeps (data and transpose, 2 B each, with or without the
  // flag). With it no bf16 copy of them is kept (2 W B less in weights), and the distributed
  // optimizer's gather sends them at 1 B: 2 P - W bytes instead of 2 P.
  auto l = overlap_layout();
  l.fp8 = Fp8Recipe::tensorwise;
  const std::int64_t w = 8LL * (4 * 1024 * 1024 + 2 * 1024 * 4096);
  const OverheadConstants overheads;
  const auto bf16 = memory_3d(f.m, l, overheads);
  const auto plain = model.time(l);
  l.fp8_param_gather = true;
  const auto fp8 = memory_3d(f.m, l, overheads);
  const auto gathered = model.time(l);
  CHECK(bf16.weights.value - fp8.weights.value == 2 * w);
  CHECK(fp8.buffers.value == bf16.buffers.value);  // the FP8 copies stay: they are the weights
  REQUIRE(gathered.dp_ops.size() == 2);
  CHECK(plain.dp_ops[1].bytes.value == 2 * f.m.params);
  CHECK(gathered.dp_ops[1].bytes.value == 2 * f.m.params - w);
  CHECK(gathered.dp_ops[0].bytes.value == plain.dp_ops[0].bytes.value);  // gradients: fp32
  CHECK(gathered.dp_sync_s < plain.dp_sync_s);
  // Megatron-LM's: an FP8 recipe and the distributed optimizer.
  l.fp8 = Fp8Recipe::none;
  CHECK_THROWS_WITH(model.time(l), Contains("{fp8_param_gather}"));
  l.fp8 = Fp8Recipe::tensorwise;
  l.sharding = DpSharding::none;
  CHECK_THROWS_WITH(model.time(l), Contains("{fp8_param_gather}"));
}

TEST_CASE("layout offload: Megatron-LM's CPU optimizer, FSDP2's CPUOffloadPolicy") {
  RoundSwitch f;
  f.gpu.pcie_generation = 4;
  f.gpu.pcie_lanes = 16;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  const OverheadConstants overheads;
  // PCIe 4.0 x16: 16 GT/s x 16 lanes / 8 bits x 128/130 coding, at the 0.5 transfer
  // efficiency of the fixture; the CPU optimizer moves 1e10 B/s.
  const double link = 16e9 * 16 / 8 * 128.0 / 130.0 * 0.5;
  const std::int64_t p = f.m.params, shard = (p + 3) / 4;  // dp 4
  // Megatron-LM --optimizer-cpu-offload with the distributed optimizer: the fp32 main weights,
  // Adam's moments and a copy of the fp32 gradient shard live on the host (16 B per sharded
  // parameter); bf16 weights and fp32 main gradients stay on the GPU.
  auto l = layout(1, 1, 4);
  l.offload = Offload::optimizer;
  const auto mem = memory_3d(f.m, l, overheads);
  CHECK(mem.host.value == 16 * shard);
  CHECK(mem.optimizer_states.value == 0);
  CHECK(mem.master_weights.value == 0);
  CHECK(mem.weights.value == 2 * p);
  CHECK(mem.gradients.value == 4 * p);
  // The step on the CPU reads and writes the fp32 weights and both moments, reads the fp32
  // gradient and writes the bf16 copy: 2 x 4 + 4 + 2 x 8 + 2 = 30 B per parameter; the
  // updated bf16 weights come back over PCIe.
  const auto t = model.time(l);
  // The 4 ranks of the node share the server's memory bandwidth.
  CHECK(t.optimizer_s == Approx(4 * 30.0 * static_cast<double>(p / 4) / 1e10));
  CHECK(t.host_transfer_s == Approx(2.0 * static_cast<double>(p / 4) / link));
  CHECK(t.step_s == Approx(t.pipeline_s + t.dp_sync_s + t.host_transfer_s + t.optimizer_s));
  double drawn = 0;  // the timeline tiles the step, host transfers included
  for (const auto& e : timeline_3d(l, t))
    drawn += e.end_s - e.start_s;
  CHECK(drawn == Approx(t.step_s));
  // FSDP2's CPUOffloadPolicy: the fp32 parameter, gradient and Adam shards on the host (16 B
  // per sharded parameter), nothing of them on the GPU; each all-gather first copies the bf16
  // shard in.
  auto fsdp = fsdp2(4, DpSharding::parameters);
  const auto kept = model.time(fsdp);
  fsdp.offload = Offload::optimizer_and_params;
  const auto fm = memory_3d(f.m, fsdp, overheads);
  CHECK(fm.host.value == 16 * shard);
  CHECK(fm.weights.value + fm.gradients.value + fm.optimizer_states.value == 0);
  const auto ft = model.time(fsdp);
  REQUIRE(ft.dp_ops.size() == kept.dp_ops.size());
  CHECK(ft.dp_ops[0].time_s - kept.dp_ops[0].time_s ==
        Approx(2.0 * static_cast<double>(shard) / link));
  CHECK(ft.dp_ops[2].time_s == kept.dp_ops[2].time_s);  // the reduce-scatter fetches nothing
  // Each framework offloads its own way.
  l.offload = Offload::optimizer_and_params;
  CHECK_THROWS_WITH(model.time(l), Contains("{offload} optimizer+params: Megatron-LM"));
  fsdp.offload = Offload::optimizer;
  CHECK_THROWS_WITH(model.time(fsdp), Contains("CPUOffloadPolicy"));
}

TEST_CASE("one memory model: a one-stage FSDP2 layout holds FSDP FULL_SHARD's model states") {
  // The same pricing (memory.cpp) lays out both: fp32 parameter and gradient shards and AdamW's
  // fp32 moments over 4 ranks, no master copy (FSDP's flat parameters are the fp32 weights).
  const auto m = small_model();
  const auto layout = memory_3d(m, fsdp2(4, DpSharding::parameters), OverheadConstants{});
  TrainingConfig c;
  c.strategy = Strategy::fsdp_full;
  c.dp_size = 4;
  c.seq_len = 1024;
  const auto dp = estimate_memory(m, c, OverheadConstants{});
  CHECK(layout.params_per_gpu == m.params);
  CHECK(layout.weights == dp.gpu.weights);
  CHECK(layout.gradients == dp.gpu.gradients);
  CHECK(layout.master_weights == dp.gpu.master_weights);
  CHECK(layout.optimizer_states == dp.gpu.optimizer_states);
  // Explained as every strategy is, with the layout's notes.
  const auto explained = [&](const std::string& component) {
    for (const auto& [key, text] : layout.explain) {
      if (key == component) return text;
    }
    return std::string();
  };
  CHECK_THAT(explained("weights"), Contains("4 B (fp32)") && Contains("(1/4 shard)"));
  auto hybrid = fsdp2(4, DpSharding::parameters);
  hybrid.shard_group = 2;
  CHECK_THAT(memory_3d(m, hybrid, OverheadConstants{}).notes.at(0),
             Contains("groups of 2 GPUs shard, 2 groups replicate"));
}

TEST_CASE("a search's figures-only memory equals the explained one, without the text") {
  // The shipped constants: every overhead term is non-zero.
  const auto k = load_overheads(resolve_data_dir("") / "overheads.json");
  const auto m = small_model();
  auto interleaved = layout(2, 2, 2);
  interleaved.interleave = 2;
  interleaved.micro_batches = 4;
  interleaved.sequence_parallel = true;
  auto cp = layout(1, 1, 2);
  cp.cp = 2;
  cp.recompute = Checkpointing::selective;
  for (const auto& l : {layout(1, 1, 1), layout(2, 4, 1), interleaved, cp,
                        fsdp2(4, DpSharding::gradients), fsdp2(4, DpSharding::parameters)}) {
    const auto full = memory_3d(m, l, k, true);
    const auto figures = memory_3d(m, l, k, false);
    CHECK(figures.total() == full.total());
    CHECK(figures.stage == full.stage);
    CHECK(figures.activations == full.activations);
    CHECK(figures.buffers == full.buffers);
    CHECK(figures.overhead == full.overhead);
    CHECK(figures.activation_terms.empty());
    CHECK(figures.explain.empty());
    CHECK_FALSE(full.activation_terms.empty());
  }
}

TEST_CASE("groups across nodes share the NICs with the groups interleaved with them") {
  // tp 8 x cp 2 on two DGX H100 nodes: each context-parallel group is one GPU in each node,
  // and the 8 groups (one per tensor-parallel rank) exchange at the same time, each through
  // its own 400 Gb/s NIC (50 GB/s at 94%: 47 GB/s, data/interconnect.json).
  const DgxH100 f(2);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(8, 1, 1);
  l.cp = 2;
  l.cp_comm = CpComm::all_gather;
  l.seq_len = 2048;
  l.micro_batch = 8;
  // A rank's K and V: 2 x 1024 tokens x 8 x 128 (16 heads of 64 / tp 8) x 2 B = 4,194,304 B;
  // per layer an all-gather forward, again backward and a reduce-scatter of the gradients,
  // each moving the peer's half through one NIC: 8 x 3 x 4,194,304 B / 47e9 B/s = 2.142 ms,
  // plus each call's latency.
  const double nic_bound = 8 * 3 * 4194304.0 / 47e9;
  const auto t = model.time(l);
  CHECK(t.cp_comm_s > nic_bound);
  CHECK(t.cp_comm_s < 1.3 * nic_bound);
}

TEST_CASE("a layout's compute follows the training's attention kernel") {
  // Eager attention materialises and reads the s x s scores (memory-bound softmax and
  // dropout) where a fused kernel does not: the same layout computes longer with it, as the
  // data-parallel strategies do (compute_time.hpp).
  const DgxH100 f(1);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(2, 1, 1);
  const auto flash = model.time(l);
  l.attention = Attention::eager;
  const auto eager = model.time(l);
  CHECK(eager.compute_s > flash.compute_s);
  TrainingConfig c;
  c.seq_len = 1024;
  c.attention = Attention::eager;
  const auto whole_eager = estimate_compute(f.m, c, f.gpu, f.k);
  c.attention = Attention::flash;
  const auto whole_flash = estimate_compute(f.m, c, f.gpu, f.k);
  // The difference is the attention kernels' own: the same sign on the whole model.
  CHECK(whole_eager.attention_s > whole_flash.attention_s);
}

TEST_CASE("FSDP2 under pipeline parallelism: one gather and one reduce-scatter per step") {
  // torch.distributed.pipelining's stage turns FSDP2's gradient sync and resharding after
  // backward off for all but the last backward of a step (stage.py, backward_maybe_with_nosync);
  // torchtitan keeps blocks gathered from forward under PP (reshard_after_forward_policy
  // "default"). A stage therefore gathers its blocks in the first micro-batch, accumulates
  // unsharded fp32 gradients (FSDPParam.to_accumulated_grad_if_needed casts to reduce_dtype)
  // and reduce-scatters them after the last.
  RoundSwitch f;
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = fsdp2(2, DpSharding::gradients);
  l.pp = 2;
  l.seq_len = 2048;
  l.micro_batch = 8;
  const auto per_step = [&](std::int64_t m) {
    l.micro_batches = m;
    const auto t = model.time(l);
    REQUIRE(t.dp_ops.size() == 2);
    CHECK(t.dp_ops[0].runs == 1);  // the forward gathers
    CHECK(t.dp_ops[1].runs == 1);  // the reduce-scatter
    return t.fsdp_comm_s * static_cast<double>(m);
  };
  // The exposed FSDP time of a step does not grow with its micro-batches.
  const double four = per_step(4);
  CHECK(four > 0);
  CHECK(per_step(8) == Approx(four).epsilon(1e-9));
  // Without a pipeline, torchtitan reduce-scatters in every micro-batch: 8 micro-batches
  // expose twice the reductions of 4.
  auto flat = fsdp2(4, DpSharding::gradients);
  flat.seq_len = 2048;
  flat.micro_batch = 8;
  flat.micro_batches = 4;
  const double flat_four = model.time(flat).fsdp_comm_s * 4;
  flat.micro_batches = 8;
  CHECK(model.time(flat).fsdp_comm_s * 8 == Approx(2 * flat_four).epsilon(1e-9));

  // Memory: the fp32 shard of the gradients and, accumulated until the last micro-batch, the
  // stage's unsharded fp32 gradients (4 B per parameter); with blocks kept gathered, the stage's
  // bf16 parameters and one block's fp32 gradients before reduction.
  l.micro_batches = 4;
  const auto mem = memory_3d(f.m, l, OverheadConstants{});
  const auto n = mem.params_per_gpu;
  CHECK(mem.gradients.value == n * 4 / 2 + n * 4);
  // The last stage, the heavier: 4 of the 8 blocks, and the head -- its copy of the tied
  // embedding, 32,000 x 1,024, and the final LayerNorm, 2 x 1,024 -- a unit larger than a block.
  constexpr std::int64_t head = 32'000LL * 1024 + 2 * 1024;
  CHECK(n == 4 * kBlock + head);
  CHECK(mem.buffers.value == n * 2 + head * 4);
  // The explanation says why, and offers no flag: the schedule, not the user, defers the sync.
  bool explained = false;
  for (const auto& [component, text] : mem.explain) {
    if (component != "gradients") continue;
    CHECK_THAT(text, Contains("the pipeline stage syncs after its last backward"));
    CHECK_THAT(text, !Contains("avoids it"));
    explained = true;
  }
  CHECK(explained);
}

TEST_CASE("a layout's attention kernel is its framework's: Transformer Engine or PyTorch") {
  // On an H100, Megatron-LM runs cuDNN's fused attention (Transformer Engine) and FSDP2
  // PyTorch's scaled_dot_product_attention (FlashAttention-2): the bundled constants put them
  // at 0.53 and 0.35 of the bf16 peak (data/compute.json). The same stage differs only there:
  // its GEMMs and tensor-parallel collectives are the same.
  const DgxH100 f(1);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto megatron = layout(2, 1, 4);
  megatron.seq_len = 2048;
  megatron.micro_batch = 4;
  auto fsdp = megatron;
  fsdp.framework = Framework::fsdp2;
  fsdp.sharding = DpSharding::parameters;
  const auto te = model.time(megatron);
  const auto torch = model.time(fsdp);
  CHECK(torch.compute_s > te.compute_s);
  CHECK(torch.tp_comm_s == te.tp_comm_s);
  // Without measured curves both frameworks' kernels run at attention_efficiency.
  auto k = f.k;
  k.attention_kernels.clear();
  Model3D general(f.m, f.topo, f.table, f.gpu, k);
  CHECK(general.time(fsdp).compute_s == Approx(general.time(megatron).compute_s));
}

TEST_CASE("tensor parallelism splits every expert and keeps the router whole") {
  // The small model's MLP as 8 GELU experts of 1024, 2 per token. A block: attention
  // 4 x 1024^2 + 4 x 1024 biases, the router 1024 x 8, 8 experts of 2 x 1024 x 1024 + 1024
  // + 1024 biases, two LayerNorms 4 x 1024. At tp 2 the attention's matrices and QKV biases,
  // the experts' matrices and up biases halve (column- and row-parallel); the output
  // projection's bias, the norms, the router and each expert's down bias stay whole.
  auto m = small_model();
  auto& t = *m.transformer;
  t.moe = {.experts = 8, .experts_per_token = 2, .expert_ffn_size = 1024};
  m = model_from_transformer(t, "small-moe", "test");
  auto l = layout(2, 1, 1);
  const auto mem = memory_3d(m, l, OverheadConstants{});
  const std::int64_t split = (4 * 1024 * 1024 + 3 * 1024) + 8 * (2 * 1024 * 1024 + 1024);
  const std::int64_t whole = 1024 + 4 * 1024 + 8 * 1024 + 8 * 1024;
  // One stage: 8 blocks, half the word embedding, the position table, the final LayerNorm.
  CHECK(mem.params_per_gpu == 8 * (split / 2 + whole) + 32000 * 1024 / 2 + 2048 * 1024 + 2 * 1024);
  // An expert width tp does not divide is refused, naming it.
  t.moe.expert_ffn_size = 1001;
  CHECK_THROWS_WITH(
      check_layout(t, l, 8),
      Contains(
          "experts' intermediate size 1001 does not divide by the expert tensor parallel size 2"));
  // A sliding window shorter than the sequence is refused under context parallelism.
  t.moe = {};
  t.sliding_window = 512;
  auto cp = layout(1, 1, 1);
  cp.cp = 2;
  CHECK_THROWS_WITH(check_layout(t, cp, 8), Contains("context parallelism with a sliding window"));
}

TEST_CASE("FSDP2 with tensor parallelism: loss_parallel's backward holds four fp32 logits") {
  // torchtitan's loss under tensor parallelism runs PyTorch's loss_parallel on the rank's
  // 32000 / 2 = 16,000 logits per token. It frees the bf16 logits before backward, whose peak
  // keeps the fp32 log-softmax and makes a zero gradient, exp of the log-softmax and their
  // sum (torch/distributed/tensor/parallel/loss.py, _nll_loss_and_log_softmax_backward):
  // 4 x 4 bytes per logit, where Megatron-LM's vocab-parallel loss keeps 2 + 4.
  const auto m = small_model();
  auto l = layout(2, 1, 4);
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  CHECK(memory_3d(m, l, OverheadConstants{}).logits.value == 16LL * 1024 * 16000);
  l.framework = Framework::megatron;
  l.sharding = DpSharding::optimizer;
  CHECK(memory_3d(m, l, OverheadConstants{}).logits.value == 6LL * 1024 * 16000);
  // Without tensor parallelism the loss is torch's cross-entropy over all 32000 logits, cast
  // to fp32, the bf16 logits deleted before backward: its peak, in backward, the kept fp32
  // log-softmax, its gradient and the logits' fp32 gradient, 12 bytes each (forward's bf16
  // logits, fp32 copy and log-softmax are 10).
  l = layout(1, 1, 8);
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  CHECK(memory_3d(m, l, OverheadConstants{}).logits.value == 12LL * 1024 * 32000);
  // In fp32 the same three tensors, 12 bytes, against forward's logits and log-softmax (8).
  l.precision = Precision::fp32;
  CHECK(memory_3d(m, l, OverheadConstants{}).logits.value == 12LL * 1024 * 32000);
}

TEST_CASE("FP8 under Megatron-LM: weight copies and transposes kept, Linear inputs saved in FP8") {
  // Transformer Engine keeps each block Linear's FP8 weight and its transpose across the step:
  // 2 B per weight of the 8 blocks' matrices (QKV 3 x 1024^2, output 1024^2, fc1 1024 x 4096,
  // fc2 4096 x 1024), on top of everything bf16 keeps. The biases are not quantized: they stay
  // bf16 and join in the GEMM's epilogue.
  const auto m = small_model();
  auto l = layout(1, 1, 8);
  const auto plain = memory_3d(m, l, OverheadConstants{});
  l.fp8 = Fp8Recipe::delayed;
  const auto fp8 = memory_3d(m, l, OverheadConstants{});
  const std::int64_t linear = 4 * 1024 * 1024 + 2 * 1024 * 4096;
  CHECK(fp8.buffers.value - plain.buffers.value == 2 * 8 * linear);
  CHECK(fp8.weights == plain.weights);
  // A block's saved Linear inputs are 1 B instead of 2: QKV and MLP inputs (s h each), the
  // output projection's (s q) and the down projection's (s f), s 1024: 1024 x (1024 + 1024 +
  // 1024 + 4096) bytes less per layer.
  ActivationShape shape;
  shape.tokens = 1024;
  shape.layers = 1;
  const auto kept = block_activations(*m.transformer, shape);
  shape.fp8_linear_inputs = true;
  CHECK(kept.linear.value - block_activations(*m.transformer, shape).linear.value ==
        1024LL * (3 * 1024 + 4096));
  // torchao's recipes are FSDP2's, Transformer Engine's Megatron-LM's.
  l.fp8 = Fp8Recipe::rowwise;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8), Contains("rowwise is torchao's"));
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  l.fp8 = Fp8Recipe::blockwise;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8), Contains("tensorwise or rowwise"));
}

TEST_CASE("Ulysses across nodes: a strided all-to-all priced over the whole nodes") {
  // tp 8 x cp 2 on two DGX H100 nodes: each a2a group is 2 GPUs, one per node, 8 apart. A
  // rank of it holds 512 of the 1024 tokens and 16/8 = 2 heads (q and k/v widths 128): it
  // sends Q, K, V in and the output back, 512 x (2 x 128 + 2 x 128) x 2 B = 524,288 bytes, an
  // all-to-all that sends (n-1)/n of its bytes through its own NIC, as every GPU of the two
  // nodes would: priced as the 16-GPU all-to-all, forward and again backward, per layer.
  const DgxH100 f(2);
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(8, 1, 1);
  l.cp = 2;
  l.cp_comm = CpComm::a2a;
  l.sequence_parallel = true;
  CommModel nodes(f.topo, f.table, 16);
  const double a2a = nodes.estimate(Collective::all_to_all, Bytes{524'288}).time_s;
  CHECK(model.time(l).cp_comm_s == Approx(8 * 2 * a2a).epsilon(1e-9));
}

TEST_CASE(
    "tp comm overlap: collectives shorter than their GEMMs leave each pipeline's last "
    "chunk") {
  // Llama 2 70B at tp 2 on one DGX H100, sequence 4096: each rank's forward GEMMs take 0.25 to
  // 2.3 ms, while an all-gather or reduce-scatter of the block's 64 MiB of activations between
  // two NVLink GPUs takes under 0.1 ms. Every ring exchange and bulk transfer then hides
  // behind its GEMM, and only the last of the 4 chunks of each pipelined reduce-scatter (the
  // output projection's and the last MLP Linear's, forward) is exposed, 2 x c / 4 per block,
  // against the 4 c each way (two all-reduces) of the collectives run alone; plus what the
  // userbuffers kernels' SMs cost the GEMMs beside them.
  DgxH100 f(1);
  f.m = load_model("llama-2-70b", f.data / "models");
  Model3D model(f.m, f.topo, f.table, f.gpu, f.k);
  auto l = layout(2, 1, 4);
  l.seq_len = 4096;
  l.sequence_parallel = true;
  l.framework = Framework::megatron;
  const auto plain = model.time(l);
  l.tp_comm_overlap = true;
  const auto hidden = model.time(l);
  const double c = plain.tp_comm_s / (80 * 4 * 2);  // 80 blocks, 4 collectives each way
  const auto shard = [&] {
    auto t = *f.m.transformer;
    t.num_heads /= 2;
    t.num_kv_heads /= 2;
    t.ffn_size /= 2;
    return t;
  }();
  TrainingConfig cfg;
  cfg.precision = Precision::bf16;
  cfg.micro_batch = 1;
  cfg.seq_len = 4096;
  const auto g = block_linear_times(shard, cfg, f.gpu, f.k);
  REQUIRE(c < g.qkv_s / 2);  // the regime this test is about
  REQUIRE(c < g.proj_s);
  // The pipelined and bulk kernels take 16 of the H100's 132 SMs (TE's default num_sm): the
  // two pipelined GEMMs run at 116/132 of their speed throughout, adding (mu - 1) g each, and
  // each of the four bulk transfers a block runs backward costs its GEMM c (1 - 1/mu).
  const double mu = 132.0 / 116.0;
  const double forward = 2 * c / 4 + (mu - 1) * (g.proj_s + g.fc2_s);
  const double backward = 4 * c * (1 - 1 / mu);
  CHECK(hidden.tp_comm_s == Approx(80 * (forward + backward)).epsilon(1e-9));
  CHECK(hidden.compute_s == Approx(plain.compute_s).epsilon(1e-12));
  CHECK(hidden.step_s < plain.step_s);
}

TEST_CASE("tp comm overlap is Megatron-LM's and needs sequence parallelism") {
  const DgxH100 f(1);
  auto l = layout(2, 1, 4);
  l.framework = Framework::megatron;
  l.tp_comm_overlap = true;
  CHECK_THROWS_WITH(check_layout(*f.m.transformer, l, 8),
                    Contains("{tp_comm_overlap} needs {sequence_parallel}"));
  l.sequence_parallel = true;
  CHECK_NOTHROW(check_layout(*f.m.transformer, l, 8));
  l.framework = Framework::fsdp2;
  CHECK_THROWS_WITH(check_layout(*f.m.transformer, l, 8),
                    Contains("{tp_comm_overlap} is Megatron-LM's"));
}
