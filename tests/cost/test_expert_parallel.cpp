// Tests for expert parallelism in cost/src/parallel3d.cpp (ep, etp, the expert data-parallel
// group of Megatron-LM's parallel folding): every figure against a hand derivation.
#include <catch2/catch.hpp>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"
#include "small_transformer.hpp"

using namespace dtplan;
using namespace dtplan::cost;
using Catch::Matchers::Contains;

namespace {

// The small GPT-style model (small_transformer.hpp: h 1024, 8 layers, vocabulary 32000,
// learned positions, biases, tied embeddings) whose MLP is 8 GELU experts of 1024, 2 per token.
ModelDesc small_moe() {
  auto t = test::small_transformer();
  t.moe = {.experts = 8, .experts_per_token = 2, .expert_ffn_size = 1024};
  return model_from_transformer(t, "small-moe", "test");
}

// tp 2 x dp 4 (8 GPUs, one DGX H100), sequence parallel, 1024 tokens, the experts over ep 4
// whole (etp 1): edp = 8 / (1 x 4) = 2.
Layout3D folded() {
  Layout3D l;
  l.tp = 2;
  l.dp = 4;
  l.sequence_parallel = true;
  l.seq_len = 1024;
  l.ep = 4;
  l.etp = 1;
  return l;
}

struct DgxH100 {
  DgxH100()
      : data(resolve_data_dir("")),
        table(InterconnectTable::load(data / "interconnect.json")),
        topo(Topology::build(load_node_template("dgx-h100", data / "topologies"), 1, table)),
        gpu(GpuCatalog::load(data / "gpus.json").find("H100-SXM")),
        k(load_compute_constants(data / "compute.json")) {}
  std::filesystem::path data;
  InterconnectTable table;
  Topology topo;
  GpuSpec gpu;
  ComputeConstants k;
};

// Per block: the attention's matrices and QKV biases (4 x 1024^2 + 3 x 1024) split over tp;
// each expert's two matrices and up bias (2 x 1024^2 + 1024) over ep x etp, its down bias
// (1024) over ep (whole over etp, as a row-parallel bias); whole: the output projection's
// bias, two LayerNorms, the router (1024 x 8).
constexpr std::int64_t kAttention = 4 * 1024 * 1024 + 3 * 1024;
constexpr std::int64_t kExpert = 2 * 1024 * 1024 + 1024;
constexpr std::int64_t kDownBias = 1024;
constexpr std::int64_t kWhole = 1024 + 4 * 1024 + 8 * 1024;
// The stage's embedding (half the vocabulary at tp 2), positions and final LayerNorm.
constexpr std::int64_t kOutside = 32000 * 1024 / 2 + 2048 * 1024 + 2 * 1024;

// One block of 1024 tokens at tp 2 with sequence parallelism, experts split etp ways.
ActivationShape one_block(std::int64_t etp) {
  ActivationShape a;
  a.tokens = 1024;
  a.tp = 2;
  a.sequence_parallel = true;
  a.layers = 1;
  a.expert_tp = etp;
  return a;
}

}  // namespace

TEST_CASE("expert parallelism: a GPU holds E/ep experts, their states sharded over edp") {
  const auto m = small_moe();
  const auto l = folded();
  CHECK(l.expert_dp() == 2);
  const auto mem = memory_3d(m, l, OverheadConstants{});
  // 8 experts over ep 4: 2 whole experts per block, with their down biases.
  const std::int64_t experts = 8 * 2 * (kExpert + kDownBias);
  const std::int64_t params = 8 * (kAttention / 2 + kWhole) + experts + kOutside;
  CHECK(mem.params_per_gpu == params);
  // Megatron-LM: bf16 weights and fp32 main gradients of everything held; the distributed
  // optimizer's fp32 main weights and Adam's two moments over the 4 dp x cp ranks for the
  // dense part, over the 2 expert-data-parallel ranks for the experts.
  const std::int64_t shard = (params - experts + 3) / 4 + experts / 2;
  CHECK(mem.weights.value == 2 * params);
  CHECK(mem.gradients.value == 4 * params);
  CHECK(mem.master_weights.value == 4 * shard);
  CHECK(mem.optimizer_states.value == 8 * shard);
  // Without expert parallelism every GPU holds all 8 experts, split over tp.
  auto plain = folded();
  plain.ep = 1;
  plain.etp = 0;
  CHECK(memory_3d(m, plain, OverheadConstants{}).params_per_gpu ==
        8 * (kAttention / 2 + 8 * kExpert / 2 + 8 * kDownBias + kWhole) + kOutside);
  // FSDP2 sharding states over groups of 2 of the 4 dp ranks (hybrid), experts unfolded: every
  // state, experts included, is sharded over the group of 2 (fp32 Adam moments, 8 B each).
  plain.framework = Framework::fsdp2;
  plain.sharding = DpSharding::parameters;
  plain.shard_group = 2;
  const auto hybrid = memory_3d(m, plain, OverheadConstants{});
  CHECK(hybrid.optimizer_states.value == 8 * ((hybrid.params_per_gpu + 1) / 2));
}

TEST_CASE("expert tensor parallelism below tp: experts see the tokens of etp ranks") {
  // One block at tp 2 with sequence parallelism, b 1, s 1024: a rank holds 512 tokens.
  // With etp 2 the experts compute the k = 2 copies of 1024 tokens at half width; with etp 1
  // the copies of the rank's own 512 tokens at full width. The inner tensors are the same
  // bytes (rows x width), the permuted copies and outputs (2 B x rows x h each) halve:
  // 2 x 2 B x 1024 rows x 1024 fewer.
  const auto m = small_moe();
  const auto& t = *m.transformer;
  auto a = one_block(2);
  const auto wide = block_activations(t, a);
  a.expert_tp = 1;
  const auto whole = block_activations(t, a);
  CHECK(wide.linear.value - whole.linear.value == 2LL * 2 * 1024 * 1024);
}

TEST_CASE("expert parallelism: two all-to-alls each way per MoE layer, no MLP TP collectives") {
  const DgxH100 f;
  const auto m = small_moe();
  Model3D model(m, f.topo, f.table, f.gpu, f.k);
  const auto l = folded();
  const auto t = model.time(l);
  // A rank's 1024 / 2 = 512 tokens, 2 copies each, 1024 x 2 B: 2 MiB per all-to-all over the
  // 4 expert-parallel ranks (etp 1: the first 4 GPUs of the node); dispatch and combine
  // forward and backward, 8 layers.
  CommModel ep_group(f.topo, f.table, 4);
  const double a2a = ep_group.estimate(Collective::all_to_all, Bytes{2LL * 1024 * 1024}).time_s;
  CHECK(t.ep_comm_s == Approx(8 * 4 * a2a).epsilon(1e-9));
  // Tensor parallelism is left with the attention's two collectives each way of the four
  // a dense layer has (sequence-parallel all-gather and reduce-scatter of 1024 x 1024 x 2 B,
  // priced as all-reduces of that size).
  CommModel tp_group(f.topo, f.table, 2);
  const double ar = tp_group.estimate(Collective::all_reduce, Bytes{2LL * 1024 * 1024}).time_s;
  CHECK(t.tp_comm_s == Approx(8 * 2 * ar).epsilon(1e-9));
  auto plain = folded();
  plain.ep = 1;
  plain.etp = 0;
  const auto p = model.time(plain);
  CHECK(p.ep_comm_s == 0);
  CHECK(p.tp_comm_s == Approx(8 * 4 * ar).epsilon(1e-9));
  // Full recomputation repeats the forward's dispatch and combine.
  auto full = folded();
  full.recompute = Checkpointing::full;
  CHECK(model.time(full).ep_comm_s == Approx(8 * 6 * a2a).epsilon(1e-9));
  // ep 2 x etp 2: the all-to-all of the same 2 MiB between 2 ranks 2 GPUs apart (inside the
  // node: priced on 2 GPUs), then an all-gather of the 2 etp ranks' rows (4 MiB gathered)
  // before the experts and a reduce-scatter after, each way.
  auto wide = folded();
  wide.ep = 2;
  wide.etp = 2;
  CommModel pair(f.topo, f.table, 2);
  const double one_way =
      2 * pair.estimate(Collective::all_to_all, Bytes{2LL * 1024 * 1024}).time_s +
      pair.estimate(Collective::all_gather, Bytes{4LL * 1024 * 1024}).time_s +
      pair.estimate(Collective::reduce_scatter, Bytes{4LL * 1024 * 1024}).time_s;
  CHECK(model.time(wide).ep_comm_s == Approx(8 * 2 * one_way).epsilon(1e-9));
}

TEST_CASE("expert parallelism: the experts' gradients sync over the expert data-parallel ranks") {
  const DgxH100 f;
  const auto m = small_moe();
  Model3D model(m, f.topo, f.table, f.gpu, f.k);
  const auto t = model.time(folded());
  // Megatron-LM's distributed optimizer: a reduce-scatter of the gradients and an all-gather
  // of the updated weights, once over the 4 dp x cp ranks for the dense part and once over
  // the 2 expert-data-parallel ranks for the 2 experts x 8 layers this GPU holds.
  std::int64_t expert_bytes = 0, dense_ops = 0, expert_ops = 0;
  for (const auto& op : t.dp_ops) {
    INFO(op.name << " on " << op.group);
    if (op.group.find("expert dp") != std::string::npos) {
      ++expert_ops;
      CHECK(op.group.rfind("2 GPUs", 0) == 0);
      if (op.collective == Collective::reduce_scatter) expert_bytes = op.bytes.value;
    } else {
      ++dense_ops;
      CHECK(op.group.rfind("4 GPUs", 0) == 0);
    }
  }
  CHECK(dense_ops == 2);
  CHECK(expert_ops == 2);
  CHECK(expert_bytes == 4 * 8 * 2 * (kExpert + kDownBias));  // fp32 main gradients
}

TEST_CASE("expert layouts that cannot fold are refused, naming the rule") {
  const auto m = small_moe();
  const auto& t = *m.transformer;
  auto l = folded();
  l.ep = 3;
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("8 experts do not divide over ep 3"));
  l.ep = 8;
  l.etp = 2;  // 2 x 8 = 16 does not divide the 8 GPUs
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("etp x ep = 16 does not divide"));
  // A dense model has no experts to spread.
  auto dense = t;
  dense.moe = {};
  CHECK_THROWS_WITH(check_layout(dense, folded(), 8), Contains("needs a mixture-of-experts"));
  // Folded experts dispatch each rank's own tokens: tp > 1 needs sequence parallelism; so
  // does Megatron-LM's MoE layer under tensor parallelism when it is not folded.
  l = folded();
  l.sequence_parallel = false;
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("is needed with tp > 1"));
  l.ep = 1;
  l.etp = 0;
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("needs sequence parallelism"));
  // torchtitan keeps each expert whole under expert parallelism.
  l = folded();
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  l.etp = 2;
  CHECK_THROWS_WITH(check_layout(t, l, 8), Contains("keeps each expert whole"));
  l.etp = 1;
  CHECK_NOTHROW(check_layout(t, l, 8));
}

TEST_CASE("a capacity factor pads every expert's inputs: rows, exchange and activations grow") {
  // Megatron-LM's --moe-expert-capacity-factor 1.25 with --moe-pad-expert-input-to-capacity:
  // each expert receives and computes 1.25 x its balanced share of the routed rows.
  const DgxH100 f;
  const auto m = small_moe();
  Model3D model(m, f.topo, f.table, f.gpu, f.k);
  auto l = folded();
  l.capacity_factor = 1.25;
  // 512 tokens x 2 copies x 1.25 x 1024 x 2 B = 2.5 MiB per all-to-all.
  CommModel ep_group(f.topo, f.table, 4);
  const double a2a = ep_group.estimate(Collective::all_to_all, Bytes{5LL * 1024 * 1024 / 2}).time_s;
  CHECK(model.time(l).ep_comm_s == Approx(8 * 4 * a2a).epsilon(1e-9));
  // The padded rows reach the GEMMs: a model timing both agrees with fresh ones.
  const double padded_s = model.time(l).compute_s;
  auto dropless = l;
  dropless.capacity_factor = 0;
  const double dropless_s = model.time(dropless).compute_s;
  CHECK(padded_s > dropless_s);
  CHECK(Model3D(m, f.topo, f.table, f.gpu, f.k).time(dropless).compute_s == dropless_s);
  // One block at tp 2, sequence parallel, etp 1: 2 x 512 = 1024 routed rows balanced, whose
  // permuted copies and outputs (2 x 2 B x 1024) and GELU inner tensors (2 x 2 B x 1024 wide)
  // are 8 MiB; a quarter more rows keep 2 MiB more.
  auto a = one_block(1);
  const auto balanced = block_activations(*m.transformer, a);
  a.expert_rows_factor = 1.25;
  CHECK(block_activations(*m.transformer, a).linear.value - balanced.linear.value ==
        2LL * 1024 * 1024);
  // Refused where it means nothing: a dense model, torchtitan's dropless experts, nonsense.
  auto dense = *m.transformer;
  dense.moe = {};
  Layout3D plain;
  plain.dp = 8;
  plain.seq_len = 1024;
  plain.capacity_factor = 1.25;
  CHECK_THROWS_WITH(check_layout(dense, plain, 8), Contains("needs a mixture-of-experts model"));
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8), Contains("dropless"));
  l = folded();
  l.capacity_factor = -1;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8), Contains("0 (dropless) or at least 1"));
  // Below 1 tokens are dropped; above E/k = 4 no expert could fill its capacity.
  l.capacity_factor = 0.5;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8), Contains("from 1 to experts/k = 4"));
  l.capacity_factor = 4.5;
  CHECK_THROWS_WITH(check_layout(*m.transformer, l, 8), Contains("from 1 to experts/k = 4"));
}

TEST_CASE("FP8 experts save their Linear inputs in FP8 too") {
  // One block at tp 2, sequence parallel, etp 1: 1024 routed rows; the up projection's input
  // (the routed copies, 1024 x 1024) and the down projection's (the GELU output, 1024 x 1024)
  // are kept in 1 byte instead of 2, besides the attention's and the block's own inputs.
  const auto m = small_moe();
  auto a = one_block(1);
  const auto bf16 = block_activations(*m.transformer, a);
  a.fp8_linear_inputs = true;
  const auto fp8 = block_activations(*m.transformer, a);
  // Dense part: QKV and MLP inputs 2 x 1024 x 1024 over tp 2 (sequence parallel), the output
  // projection's 1024 x 1024 / 2; experts: 2 x 1024 x 1024.
  const std::int64_t dense = 2LL * 1024 * 1024 / 2 + 1024LL * 1024 / 2;
  CHECK(bf16.linear.value - fp8.linear.value == dense + 2LL * 1024 * 1024);
}

TEST_CASE("Gemma 2 and gpt-oss: every parameter on one GPU, sinks and extra norms included") {
  const auto data = resolve_data_dir("");
  for (const char* name : {"gemma-2-9b", "gpt-oss-20b"}) {
    const auto m = load_model(name, data / "models");
    Layout3D l;
    l.seq_len = 4096;
    CHECK(memory_3d(m, l, OverheadConstants{}).params_per_gpu == m.params);
  }
  // Gemma 2 9B at tp 2: each block's matrices (44,040,192 attention + 154,140,672 GeGLU) split
  // in two, its four RMSNorms (4 x 3584) whole; half the tied 256,000 x 3584 embedding and the
  // final norm.
  const auto gemma = load_model("gemma-2-9b", data / "models");
  Layout3D l;
  l.tp = 2;
  l.sequence_parallel = true;
  l.seq_len = 4096;
  CHECK(memory_3d(gemma, l, OverheadConstants{}).params_per_gpu ==
        42 * (198'180'864LL / 2 + 4 * 3584) + 256'000LL * 3584 / 2 + 3584);
  // gpt-oss-20b at tp 2, ep 1: the 64 sinks split with their heads; the attention's output bias,
  // the norms, the router and its bias whole; each expert's matrices and input biases split,
  // its output bias whole (kept with the expert, as a row-parallel bias).
  const auto oss = load_model("gpt-oss-20b", data / "models");
  l.etp = 0;
  const std::int64_t split =
      2880 * (4096 + 1024) + 4096 * 2880 + 4096 + 1024 + 64 + 32 * (3LL * 2880 * 2880 + 2 * 2880);
  const std::int64_t whole = 2880 + 2 * 2880 + 2880 * 32 + 32 + 32 * 2880;
  CHECK(memory_3d(oss, l, OverheadConstants{}).params_per_gpu ==
        24 * (split / 2 + whole) + 2 * (201'088LL * 2880 / 2) + 2880);
}

TEST_CASE("DeepSeek-V3: dense first blocks on the first stage, MTP beside the head") {
  const auto data = resolve_data_dir("");
  const auto m = load_model("deepseek-v3", data / "models");
  Layout3D l;
  l.seq_len = 4096;
  // One GPU holds everything: the 671,026,419,200 of the model and the MTP module.
  CHECK(memory_3d(m, l, OverheadConstants{}).params_per_gpu == m.params);
  // pp 4 with stages of 16, 15, 15, 15 layers: the three dense blocks fall on the first stage;
  // the last holds 15 sparse blocks of 11,507,286,272, the MTP module (11,610,068,224), the
  // LM head 129280 x 7168, the final norm, and a copy of the 129280 x 7168 word embedding the
  // MTP module embeds with (Megatron-LM builds it on the stage that runs MTP), the most of any.
  l.pp = 4;
  l.stage_layers = {16, 15, 15, 15};
  const auto& t = *m.transformer;
  CHECK(dense_on_stage(t, l, 0) == 3);
  CHECK(dense_on_stage(t, l, 1) == 0);
  CHECK(memory_3d(m, l, OverheadConstants{}).params_per_gpu ==
        15 * 11'507'286'272LL + 11'610'068'224LL + 2 * 129'280LL * 7168 + 7168);
  // Under interleaving the layers go round the stages in chunks: 64 layers over pp 4 x 2 are
  // chunks of 8, so 10 dense first layers fill stage 0's first chunk and 2 of stage 1's.
  auto ten = t;
  ten.num_layers = 64;
  ten.moe.first_dense_layers = 10;
  Layout3D v;
  v.pp = 4;
  v.interleave = 2;
  v.seq_len = 4096;
  CHECK(dense_on_stage(ten, v, 0) == 8);
  CHECK(dense_on_stage(ten, v, 1) == 2);
  CHECK(dense_on_stage(ten, v, 2) == 0);
  // Megatron-LM's split counting the embedding and the loss as layers: 10 layers over pp 2 x
  // v 2 are chunks of 3 but for the first stage's first chunk and the last stage's last (2
  // each): stage 0 holds layers 0-1 and 5-7, stage 1 layers 2-4 and 8-9; of 5 dense first
  // layers, stage 0 holds 2 and stage 1 3.
  auto odd = t;
  odd.num_layers = 10;
  odd.moe.first_dense_layers = 5;
  Layout3D w;
  w.pp = 2;
  w.interleave = 2;
  w.seq_len = 4096;
  REQUIRE(layers_per_stage(odd, w) == std::vector<std::int64_t>{5, 5});
  CHECK(dense_on_stage(odd, w, 0) == 2);
  CHECK(dense_on_stage(odd, w, 1) == 3);
}

// FSDP2 gathers a stage block by block: the block in use and the prefetched one, and one
// block's gradients wait for their reduce-scatter. On a DeepSeek-V3 stage that starts with its
// three dense blocks those must be the largest blocks, the sparse ones, not the first two.
TEST_CASE("FSDP2 on a DeepSeek-V3 stage gathers its largest blocks, not its first") {
  const auto data = resolve_data_dir("");
  const auto m = load_model("deepseek-v3", data / "models");
  Layout3D l;
  l.framework = Framework::fsdp2;
  l.sharding = DpSharding::parameters;
  l.pp = 2;
  l.stage_layers = {41, 20};  // the first stage the heaviest: 3 dense and 38 sparse blocks
  l.dp = 256;
  l.ep = 8;
  l.seq_len = 4096;
  // A sparse block on one GPU at ep 8: attention and norms 187,121,920 (with the router's
  // 256 score biases), the router 256 x 7168, and 32 routed experts and the shared one of
  // 3 x 7168 x 2048 each -- 1,642,283,264, against a dense block's 583,483,392 (its MLP
  // 3 x 7168 x 18432 and the same attention less the biases).
  const std::int64_t sparse = 187'121'920LL + 256LL * 7168 + 33LL * 3 * 7168 * 2048;
  REQUIRE(sparse == 1'642'283'264LL);
  const auto mem = memory_3d(m, l, OverheadConstants{});
  auto term = [&](const std::string& starts) {
    for (const auto& t : mem.buffer_terms)
      if (t.name.rfind(starts, 0) == 0) return t.bytes.value;
    return std::int64_t{-1};
  };
  CHECK(term("gathered bf16 parameters") == 2 * 2 * sparse);         // two blocks, 2 B
  CHECK(term("one unit's unsharded fp32 gradients") == 4 * sparse);  // one block, 4 B
}

TEST_CASE("overlapped expert all-to-alls hide behind the adjacent micro-batch's compute") {
  const DgxH100 f;
  const auto m = small_moe();
  Model3D model(m, f.topo, f.table, f.gpu, f.k);
  auto l = folded();
  l.seq_len = 8192;
  l.micro_batch = 4;
  l.micro_batches = 8;
  const auto plain = model.time(l);
  // The regime Megatron-LM's overlap is for: each way's all-to-alls (half the micro-batch's)
  // shorter than the compute they hide behind (the backward is about two thirds of it, the
  // forward one third).
  REQUIRE(plain.ep_comm_s < 0.5 * plain.compute_s);
  auto over = l;
  over.overlap_ep_comm = true;
  // Of 8 micro-batches only the first forward's and the last backward's exchange are exposed:
  // (A_f + A_b) / 8 per micro-batch.
  const auto hidden = model.time(over);
  CHECK(hidden.ep_comm_s == Approx(plain.ep_comm_s / 8).epsilon(1e-9));
  CHECK(hidden.compute_s == Approx(plain.compute_s).epsilon(1e-12));
  // Under a pipeline the first stage's warm-up forwards and cool-down backwards run unpaired:
  // pp 2 x v 2 has (2 - 1) x 2 + (2 - 1) x 2 = 4 of the 8 x 2 chunk passes each way exposed.
  auto piped = l;
  piped.pp = 2;
  piped.dp = 2;
  piped.interleave = 2;
  const auto plain_piped = model.time(piped);
  REQUIRE(plain_piped.ep_comm_s < 0.5 * plain_piped.compute_s);
  piped.overlap_ep_comm = true;
  CHECK(model.time(piped).ep_comm_s == Approx(plain_piped.ep_comm_s * 4 / 16).epsilon(1e-9));
  // One micro-batch has no partner: nothing is hidden.
  over.micro_batches = 1;
  l.micro_batches = 1;
  CHECK(model.time(over).ep_comm_s == Approx(model.time(l).ep_comm_s).epsilon(1e-12));
  // Megatron-LM's own conditions (transformer_config.py): interleaving under pipeline
  // parallelism, expert parallelism, no full recomputation.
  over.pp = 2;
  over.dp = 2;
  CHECK_THAT(*expert_layout_problem(*m.transformer, over),
             Contains("{overlap_ep_comm} with {pp} > 1 needs an interleaved schedule"));
  over.pp = 1;
  over.dp = 4;
  over.recompute = Checkpointing::full;
  CHECK_THAT(*expert_layout_problem(*m.transformer, over), Contains("full recomputation"));
  over.recompute = Checkpointing::none;
  over.ep = 1;
  over.etp = 0;
  CHECK_THAT(*expert_layout_problem(*m.transformer, over), Contains("({ep} > 1)"));
}

TEST_CASE("DeepEP sends a token once to each node its experts are on") {
  // k of E experts at random over N nodes: N (1 - C(E - E/N, k) / C(E, k)) nodes per token.
  // DeepSeek-V3's 256 experts, 8 per token, over 4 nodes: 4 (1 - C(192, 8) / C(256, 8)).
  CHECK(expected_nodes_per_token(256, 8, 4, 0, 0) == Approx(3.614214305566513).epsilon(1e-12));
  // Its node-limited routing, 4 of 8 groups: over 4 nodes (2 groups each) 4 (1 - C(6, 4) /
  // C(8, 4)) = 22/7; over 8 nodes (a group each) 4, fewer than the 5.29 of unlimited routing.
  CHECK(expected_nodes_per_token(256, 8, 4, 8, 4) == Approx(22.0 / 7).epsilon(1e-12));
  CHECK(expected_nodes_per_token(256, 8, 8, 8, 4) == Approx(4.0).epsilon(1e-12));
  CHECK(expected_nodes_per_token(256, 8, 1, 8, 4) == 1.0);
  // 64 experts of 1024, 2 per token, over ep 16 on two DGX H100 nodes: the network carries
  // 2 (1 - 32 x 31 / (64 x 63)) = 1.5079... of the 2 copies per token, NVLink forwards both
  // copies among a node's 8 ranks; the longer sets each dispatch and combine.
  const auto data = resolve_data_dir("");
  const auto table = InterconnectTable::load(data / "interconnect.json");
  const auto topo = Topology::build(load_node_template("dgx-h100", data / "topologies"), 2, table);
  const auto gpu = GpuCatalog::load(data / "gpus.json").find("H100-SXM");
  const auto k = load_compute_constants(data / "compute.json");
  auto t = test::small_transformer();
  t.moe = {.experts = 64, .experts_per_token = 2, .expert_ffn_size = 1024};
  const auto m = model_from_transformer(t, "wide-moe", "test");
  Model3D model(m, topo, table, gpu, k);
  Layout3D l;
  l.dp = 16;
  l.ep = 16;
  l.etp = 1;
  l.seq_len = 1024;
  l.deepep = true;
  // 1024 tokens x 2 copies x 1024 x 2 B per rank.
  const std::int64_t bytes = 1024LL * 2 * 1024 * 2;
  const double per_token = 2 * (1 - 32.0 * 31 / (64.0 * 63));
  CommModel all(topo, table, 16), node(topo, table, 8);
  const double network =
      all.estimate(Collective::all_to_all,
                   Bytes{static_cast<std::int64_t>(std::ceil(bytes * per_token / 2))})
          .time_s;
  const double nvlink = node.estimate(Collective::all_to_all, Bytes{bytes}).time_s;
  // 8 layers, dispatch and combine each way.
  CHECK(model.time(l).ep_comm_s == Approx(8 * 4 * std::max(network, nvlink)).epsilon(1e-9));
  // The layout's note says how tokens travel.
  const auto notes = memory_3d(m, l, OverheadConstants{}, true).notes;
  CHECK(std::any_of(notes.begin(), notes.end(),
                    [](const std::string& n) { return n.find("through DeepEP") != n.npos; }));
  l.deepep = false;
  const double plain = all.estimate(Collective::all_to_all, Bytes{bytes}).time_s;
  CHECK(model.time(l).ep_comm_s == Approx(8 * 4 * plain).epsilon(1e-9));
}

TEST_CASE("recomputing the mixture's layer repeats its token exchange, moe_act does not") {
  // The folded layout's experts (GELU, no shared expert, tp 2 with sequence parallelism):
  // selective recomputation of `moe` rebuilds each sparse block's forward in backward, its
  // dispatch and combine included; moe_act only the activation, on the GPU.
  const DgxH100 f;
  const auto m = small_moe();
  Model3D model(m, f.topo, f.table, f.gpu, f.k);
  auto l = folded();
  l.recompute = Checkpointing::selective;
  l.recompute_modules = RecomputeModules::empty();
  const auto plain = model.time(l);
  l.recompute_modules = parse_recompute_modules("moe");
  const auto rebuilt = model.time(l);
  // Dispatch and combine each way: the forward's once more, 3/2 of the exchange.
  CHECK(rebuilt.ep_comm_s == Approx(1.5 * plain.ep_comm_s).epsilon(1e-12));
  // The experts' MLP runs without tensor parallelism (folded apart): no TP collective again.
  CHECK(rebuilt.tp_comm_s == Approx(plain.tp_comm_s).epsilon(1e-12));
  CHECK(rebuilt.compute_s > plain.compute_s);
  l.recompute_modules = parse_recompute_modules("moe_act");
  CHECK(model.time(l).ep_comm_s == Approx(plain.ep_comm_s).epsilon(1e-12));
  // Megatron-LM's own conditions: moe not with the overlapped exchange; modules only where
  // the model has them and only under selective recomputation and Megatron-LM.
  l.recompute_modules = parse_recompute_modules("moe");
  l.overlap_ep_comm = true;
  CHECK_THAT(*recompute_problem(*m.transformer, l), Contains("{overlap_ep_comm}"));
  l.overlap_ep_comm = false;
  l.recompute_modules = parse_recompute_modules("mla_up_proj");
  CHECK_THAT(*recompute_problem(*m.transformer, l), Contains("latent attention (MLA)"));
  l.recompute_modules = parse_recompute_modules("shared_experts");
  CHECK_THAT(*recompute_problem(*m.transformer, l), Contains("a shared expert"));
  l.recompute_modules = parse_recompute_modules("mlp");
  CHECK_THAT(*recompute_problem(*m.transformer, l), Contains("dense MLP blocks"));
  l.recompute_modules = parse_recompute_modules("moe_act");
  CHECK_FALSE(recompute_problem(*m.transformer, l));
  l.recompute = Checkpointing::full;
  CHECK_THAT(*recompute_problem(*m.transformer, l), Contains("needs {checkpointing} selective"));
  l.recompute = Checkpointing::selective;
  l.framework = Framework::fsdp2;
  CHECK_THAT(*recompute_problem(*m.transformer, l), Contains("Megatron-LM's"));
  // A dense model has no experts to recompute.
  const auto dense = model_from_transformer(test::small_transformer(), "small", "test");
  l.framework = Framework::megatron;
  l.ep = 1;
  l.etp = 0;
  CHECK_THAT(*recompute_problem(*dense.transformer, l), Contains("a mixture of experts"));
}

TEST_CASE("expert exchange: the all-to-all is priced on whole nodes, up to 1024 GPUs") {
  Layout3D l;
  l.tp = 8;
  l.ep = 256;
  l.etp = 4;  // 4 x 256 = 1024 GPUs: 128 whole nodes of 8
  CHECK_FALSE(expert_exchange_problem(l, 8));
  l.etp = 8;  // 2048 GPUs
  const auto why = expert_exchange_problem(l, 8);
  REQUIRE(why);
  CHECK_THAT(*why, Contains("etp x ep = 2048 GPUs is priced on 2048 GPUs of whole nodes"));
  // An NVL72 rack is one node of 72 GPUs: 1,024 GPUs take 15 racks, 1,080 GPUs.
  l.ep = 128;
  CHECK_THAT(*expert_exchange_problem(l, 72), Contains("priced on 1080 GPUs"));
  // Inside one node the all-to-all runs over the ep ranks alone.
  l.ep = 16;
  l.etp = 1;
  CHECK_FALSE(expert_exchange_problem(l, 72));
  l.ep = 1;  // no experts split: nothing exchanged
  CHECK_FALSE(expert_exchange_problem(l, 8));
}
