// Tests for planner/src/search3d.cpp: the rules every layout it returns obeys, and the ranking.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>

#include "cluster_fixture.hpp"
#include "dtplan/cost/layout_text.hpp"

using namespace dtplan;

namespace {

// A model on DGX H100 nodes with the bundled constants.
struct DgxH100 : test::Cluster {
  DgxH100(const std::string& model, std::int64_t nodes)
      : Cluster(model, "dgx-h100", nodes, "H100-SXM") {}
};

// Megatron-LM layouts at tp 1 and pp 1 for a global batch of 256 sequences of 4096 tokens.
planner::Request3D megatron_tp1_pp1() {
  planner::Request3D r;
  r.global_batch = 256;
  r.seq_len = 4096;
  r.tps = {1};
  r.pps = {1};
  r.frameworks = {cost::Framework::megatron};
  return r;
}

}  // namespace

TEST_CASE("3D search: Llama 2 70B on 16 DGX H100 nodes, every layout valid, fastest first") {
  // The case: global batch 1024, sequence 4096.
  const DgxH100 f("llama-2-70b", 16);
  planner::Request3D r;
  r.global_batch = 1024;
  r.seq_len = 4096;
  r.top_k = 10;
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  CHECK(res.out_of_memory > 0);  // 70B without enough splitting does not fit 80 GB
  for (std::size_t i = 0; i < res.ranked.size(); ++i) {
    const auto& l = res.ranked[i].layout;
    INFO("tp " << l.tp << " pp " << l.pp << " v " << l.interleave);
    CHECK(l.tp * l.pp * l.dp == 128);
    CHECK(l.tp <= 8);       // inside a node
    CHECK(64 % l.tp == 0);  // 64 heads
    CHECK(8 % l.tp == 0);   // 8 key/value heads
    // 80 layers over the stages, each with a layer per model chunk at least.
    CHECK(std::accumulate(l.stage_layers.begin(), l.stage_layers.end(), std::int64_t{0}) == 80);
    CHECK(*std::min_element(l.stage_layers.begin(), l.stage_layers.end()) >= l.interleave);
    CHECK(l.micro_batch * l.micro_batches * l.dp == 1024);
    CHECK(double(res.ranked[i].memory.total().value) <= res.usable_bytes);
    if (i > 0) CHECK(res.ranked[i - 1].time.step_s <= res.ranked[i].time.step_s);
  }
  // Restricting the search keeps only what was asked for.
  r.tps = {8};
  r.pps = {4};
  const auto only = f.search(r);
  REQUIRE(!only.ranked.empty());
  for (const auto& c : only.ranked) {
    CHECK(c.layout.tp == 8);
    CHECK(c.layout.pp == 4);
  }
}

TEST_CASE("3D search: a rejected layout keeps what the search priced, its time only if it fit") {
  const DgxH100 f("llama-2-70b", 2);
  planner::Request3D r;
  r.global_batch = 64;
  r.seq_len = 4096;
  const auto res = f.search(r);
  REQUIRE(res.out_of_memory > 0);
  REQUIRE(!res.ranked.empty());
  std::int64_t over = 0, slower = 0;
  for (const auto& rej : res.rejected) {
    const auto c = rej.candidate();
    // Re-pricing the layout gives the figures the search kept (it prices without
    // explanations, so nothing else was dropped).
    const auto again = cost::memory_3d(f.m, rej.layout, f.overheads, false);
    CHECK(c.memory.total().value == again.total().value);
    CHECK(c.memory.stage == again.stage);
    CHECK(again.activation_terms.empty());
    CHECK(again.explain.empty());
    if (rej.reason == planner::Reason::out_of_memory) {
      ++over;
      CHECK_FALSE(rej.time);  // never timed
      CHECK(rej.amount ==
            Approx((double(again.total().value) - res.usable_bytes) / double(1LL << 30)));
    } else if (rej.reason == planner::Reason::slower) {
      ++slower;
      REQUIRE(rej.time);
      CHECK(c.time.step_s > 0);
      CHECK(rej.time->dp_ops.empty());  // no rejected entry lists its collectives
      CHECK(c.objective == rej.objective);
      CHECK(rej.objective >= res.ranked.front().objective);
    }
  }
  CHECK(over == res.out_of_memory);
  CHECK(slower + 1 == res.fit);
}

TEST_CASE("3D search at 128K tokens: context parallelism is what fits, down to 4K tokens a rank") {
  // Llama 3 8B, 131,072 tokens, 32 H100s. Without cp one layer's activations alone are
  // 131072 x 4096 x 34 B / t (Korthikanti, sequence parallel, selective): 17 GiB / t, so only
  // full recompute fits; the default cp sizes go up to 131072 / 4096 = 32.
  const DgxH100 f("llama-3-8b", 4);
  planner::Request3D r;
  r.global_batch = 32;
  r.seq_len = 131072;
  r.top_k = 20;
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  for (const auto& c : res.ranked) {
    const auto& l = c.layout;
    CHECK(l.tp * l.cp * l.pp * l.dp == 32);
    CHECK(l.cp <= 32);
    CHECK(131072 % (2 * l.cp) == 0);
    CHECK(l.cp_comm == cost::CpComm::p2p);  // the default exchange
  }
  CHECK(res.ranked.front().layout.cp > 1);
  // Without context parallelism nothing keeps 128K tokens of activations under 72 GiB here.
  r.cps = {1};
  const auto none = f.search(r);
  REQUIRE(!none.ranked.empty());
  for (const auto& c : none.ranked)
    CHECK(c.layout.recompute == Checkpointing::full);
  // Context parallelism spares the recomputation: it is the faster way to fit.
  CHECK(res.ranked.front().layout.recompute != Checkpointing::full);
  CHECK(res.ranked.front().time.step_s < none.ranked.front().time.step_s);
  // Asking for Ulysses tries it where the heads allow: 32 heads, 8 key/value heads.
  r.cps = {2, 4};
  r.cp_comms = {cost::CpComm::a2a};
  r.tps = {2};
  const auto ulysses = f.search(r);
  for (const auto& c : ulysses.ranked) {
    CHECK(c.layout.cp_comm == cost::CpComm::a2a);
    CHECK((8 / c.layout.tp) % c.layout.cp == 0);
  }
  // cp 3 cannot cut 131,072 tokens into 6 chunks: the reason says so.
  r.cps = {3};
  r.cp_comms.clear();
  const auto none_at_all = f.search(r);
  CHECK(none_at_all.evaluated == 0);
  CHECK_THAT(none_at_all.no_layout,
             Catch::Matchers::Contains("cp must split the 131072-token sequence into 2 x cp "
                                       "chunks (1,2,4,8,16,32,64,128; of those the request "
                                       "allows: none)"));
}

TEST_CASE("3D search: Megatron-LM and FSDP2 layouts in one ranking, restricted by framework") {
  const DgxH100 f("llama-2-70b", 4);
  planner::Request3D r;
  r.global_batch = 128;
  r.seq_len = 4096;
  r.top_k = 50;
  const auto both = f.search(r);
  REQUIRE(both.best_of_framework.count(cost::Framework::megatron) == 1);
  REQUIRE(both.best_of_framework.count(cost::Framework::fsdp2) == 1);
  // The ranking's head is the faster of the two frameworks' bests.
  const double megatron = both.best_of_framework.at(cost::Framework::megatron).time.step_s;
  const double fsdp = both.best_of_framework.at(cost::Framework::fsdp2).time.step_s;
  CHECK(both.ranked.front().time.step_s == std::min(megatron, fsdp));
  for (const auto& c : both.ranked) {
    const auto& l = c.layout;
    if (l.framework == cost::Framework::fsdp2) {
      CHECK(l.sharding >= cost::DpSharding::gradients);
      CHECK(l.dp * l.cp > 1);
    } else {
      CHECK(l.sharding == cost::DpSharding::optimizer);
    }
  }
  r.frameworks = {cost::Framework::megatron};
  const auto only = f.search(r);
  REQUIRE(!only.ranked.empty());
  for (const auto& c : only.ranked)
    CHECK(c.layout.framework == cost::Framework::megatron);
  CHECK(only.ranked.front().time.step_s == Approx(megatron));
}

TEST_CASE("3D search: offloading fits Llama 2 70B on one DGX H100, within the node's host memory") {
  // 70B on 8 GPUs keeps its states on the GPUs only as 8 x 16 B per parameter: 138 GB of
  // model states per GPU before activations, over 80 GB. Offloaded (Megatron-LM's optimizer,
  // FSDP2's parameters, gradients and optimizer), the host holds 16 B per sharded parameter
  // for each GPU of the node.
  const DgxH100 f("llama-2-70b", 1);
  planner::Request3D r;
  r.global_batch = 8;
  r.seq_len = 4096;
  r.top_k = 20;
  r.offloads = {Offload::none};
  CHECK(f.search(r).ranked.empty());
  r.offloads = {Offload::none, Offload::optimizer, Offload::optimizer_and_params};
  r.host_per_node = Bytes{2048LL << 30};
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  for (const auto& c : res.ranked) {
    const auto& l = c.layout;
    CHECK(l.offload == (l.framework == cost::Framework::megatron ? Offload::optimizer
                                                                 : Offload::optimizer_and_params));
    CHECK(c.memory.host.value * 8 <= r.host_per_node.value);
    CHECK(c.time.host_transfer_s > 0);
  }
  // A node with 512 GiB cannot hold what FSDP2 over 8 ranks offloads (8 x 16 B x 69e9 / 8 =
  // 1.1 TB): those are rejected as over host memory, and what remains fits the host.
  r.host_per_node = Bytes{512LL << 30};
  const auto small = f.search(r);
  CHECK(small.host_out_of_memory > 0);
  CHECK(small.evaluated ==
        small.fit + small.out_of_memory + small.host_out_of_memory + small.past_deadline);
  for (const auto& c : small.ranked)
    CHECK(c.memory.host.value * 8 <= r.host_per_node.value);
}

TEST_CASE("3D search: a mixture of experts fits Megatron-LM by spreading its experts") {
  // Mixtral 8x7B: about 1.6B parameters outside the experts (attention 32 x 41.9M, embedding
  // and head 2 x 131M) and 45.1B in them (32 layers x 8 experts x 3 x 4096 x 14336). At tp 1
  // and pp 1 Megatron-LM keeps bf16 weights and fp32 main gradients of all it holds, 6 B a
  // parameter: 280 GB with every expert, 6 x (1.6 + 45.1 / 4) = 77 GB over ep 4 -- both above
  // the 71.7 GiB an H100 leaves with 10% headroom -- and 43 GB over ep 8.
  const DgxH100 f("mixtral-8x7b", 4);
  auto r = megatron_tp1_pp1();
  r.top_k = 10;
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  for (const auto& c : res.ranked) {
    const auto& l = c.layout;
    CHECK(l.ep == 8);
    CHECK(l.expert_tp() == 1);
    CHECK(l.expert_dp() == 4);  // 32 GPUs / (etp 1 x ep 8)
    CHECK(double(c.memory.total().value) <= res.usable_bytes);
  }
  // Held to ep 1 nothing fits.
  r.eps = {1};
  CHECK(f.search(r).ranked.empty());
}

TEST_CASE("3D search: a model with sliding windows searches past context parallelism") {
  // Gemma 2 9B at 8192 tokens: its 4096-token window on alternate layers is not modelled
  // under context parallelism, so the search leaves cp > 1 out instead of failing on it.
  const DgxH100 f("gemma-2-9b", 1);
  planner::Request3D r;
  r.global_batch = 64;
  r.seq_len = 8192;
  r.top_k = 50;
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  for (const auto& c : res.ranked)
    CHECK(c.layout.cp == 1);
}

TEST_CASE("3D search: recompute modules fit a mixture where attention-only recomputation cannot") {
  // Mixtral 8x7B over ep 8 on 32 GPUs keeps about 43 GB of states a GPU (the test above). A
  // block keeps 315,552 bytes a token (activations tests: 32,768 + 20,480 + 32 + 32,768 +
  // 229,376, and the fp32 log-sum-exp's 128), 41.4 GB for 32 layers of one 4096-token
  // sequence: too much beside the states in the 71.7 GiB an H100 leaves. layernorm and
  // moe_act discard the router's input (8,192) and two of the experts' four SwiGLU tensors
  // for the two routed copies (114,688): 25.3 GB, which fits.
  const DgxH100 f("mixtral-8x7b", 4);
  auto r = megatron_tp1_pp1();
  r.eps = {8};
  r.micro_batches = {1};
  r.recompute = {Checkpointing::selective};
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  for (const auto& c : res.ranked)
    CHECK(c.layout.recompute_modules.has(RecomputeModule::moe_act));
  r.recompute_modules = {RecomputeModules{}};
  CHECK(f.search(r).ranked.empty());
  // The discarding modules of each model: latent attention adds mla_up_proj; delayed FP8
  // scaling refuses layernorm and moe_act; a dense model without latent attention has none.
  const auto deepseek = load_model("deepseek-v3", resolve_data_dir("") / "models");
  CHECK(text_of(planner::discarding_modules(*deepseek.transformer, Fp8Recipe::none)) ==
        "layernorm,mla_up_proj,moe_act");
  CHECK(text_of(planner::discarding_modules(*deepseek.transformer, Fp8Recipe::delayed)) ==
        "mla_up_proj");
  const auto llama = load_model("llama-3-8b", resolve_data_dir("") / "models");
  CHECK(planner::discarding_modules(*llama.transformer, Fp8Recipe::none).bits == 0);
}

TEST_CASE("3D search: uneven pipelines split the layers as evenly as they come") {
  // DeepSeek-V3's 61 layers divide by neither 8 nor 16, nor do 63 (with the embedding and the
  // loss counted): 61 = 8 x 7 + 5 puts one more layer on five middle stages, 7, 8 x 5, 7, 7;
  // 61 = 16 x 3 + 13 on the first thirteen of the fourteen middle stages, 3, 4 x 13, 3, 3.
  const DgxH100 f("deepseek-v3", 128);
  planner::Request3D r;
  r.global_batch = 8192;
  r.seq_len = 4096;
  r.tps = {2};
  r.pps = {8, 16};
  r.eps = {64};
  r.frameworks = {cost::Framework::megatron};
  r.recompute = {Checkpointing::full};
  r.top_k = 50;
  const auto res = f.search(r);
  REQUIRE(!res.ranked.empty());
  for (const auto& c : res.ranked) {
    const auto& l = c.layout;
    if (l.pp == 8) CHECK(l.stage_layers == std::vector<std::int64_t>{7, 8, 8, 8, 8, 8, 7, 7});
    if (l.pp == 16) {
      std::vector<std::int64_t> sixteen(16, 4);
      sixteen.front() = sixteen[14] = sixteen.back() = 3;
      CHECK(l.stage_layers == sixteen);
    }
  }
  // Modules the model lacks, or no Megatron-LM layout to run them, are refused by name.
  r.recompute = {Checkpointing::selective};
  r.recompute_modules = {parse_recompute_modules("shared_experts,moe_act")};
  CHECK_NOTHROW(f.search(r));
  const DgxH100 mixtral("mixtral-8x7b", 4);
  auto m = megatron_tp1_pp1();
  m.recompute_modules = {parse_recompute_modules("mla_up_proj")};
  CHECK_THROWS_WITH(mixtral.search(m), Catch::Contains("mla_up_proj needs latent attention"));
  m.recompute_modules = {parse_recompute_modules("moe_act")};
  m.fp8 = Fp8Recipe::delayed;
  CHECK_THROWS_WITH(mixtral.search(m), Catch::Contains("moe_act: Megatron-LM refuses"));
  m.fp8 = Fp8Recipe::none;
  m.frameworks = {cost::Framework::fsdp2};
  CHECK_THROWS_WITH(mixtral.search(m), Catch::Contains("run under fsdp2 only"));
}

TEST_CASE("3D search: the overlapped exchange and DeepEP where Megatron-LM runs them") {
  // Asked for, the overlap goes on every expert-parallel layout Megatron-LM runs it on (no
  // full recomputation; interleaving under a pipeline), DeepEP on those with whole experts.
  const DgxH100 f("mixtral-8x7b", 4);
  planner::Request3D r;
  r.global_batch = 256;
  r.seq_len = 4096;
  r.frameworks = {cost::Framework::megatron};
  r.overlap_ep_comm = r.deepep = true;
  r.top_k = 200;
  const auto res = f.search(r);
  REQUIRE(res.ranked.size() > 20);
  std::size_t overlapped = 0;
  for (const auto& c : res.ranked) {
    const auto& l = c.layout;
    const bool runs =
        l.ep > 1 && l.recompute != Checkpointing::full && (l.pp == 1 || l.interleave > 1);
    CHECK(l.overlap_ep_comm == runs);
    CHECK(l.deepep == (l.ep > 1 && l.expert_tp() == 1));
    overlapped += l.overlap_ep_comm ? 1 : 0;
  }
  CHECK(overlapped > 0);
}

TEST_CASE("3D search: the same result on any number of threads, and a bad count refused") {
  // Mixtral 8x7B on 4 DGX H100 nodes: Megatron-LM and FSDP2 layouts, experts, offload, every
  // reason of rejection, enough layouts that every thread prices several batches' slices.
  const DgxH100 f("mixtral-8x7b", 4);
  planner::Request3D r;
  r.global_batch = 256;
  r.seq_len = 4096;
  r.top_k = 20;
  r.threads = 1;
  const auto one = f.search(r);
  REQUIRE(one.evaluated > 4 * 2048);
  REQUIRE(one.out_of_memory > 0);
  REQUIRE(one.fit > 20);
  auto same_candidate = [](const planner::Candidate3D& a, const planner::Candidate3D& b) {
    CHECK(cost::describe(a.layout) == cost::describe(b.layout));
    CHECK(a.objective == b.objective);
    CHECK(a.time.step_s == b.time.step_s);
    CHECK(a.memory.total().value == b.memory.total().value);
    CHECK(a.memory.host.value == b.memory.host.value);
  };
  for (const std::int64_t threads : {2, 3, 8}) {
    CAPTURE(threads);
    r.threads = threads;
    const auto many = f.search(r);
    CHECK(many.evaluated == one.evaluated);
    CHECK(many.out_of_memory == one.out_of_memory);
    CHECK(many.host_out_of_memory == one.host_out_of_memory);
    CHECK(many.fit == one.fit);
    REQUIRE(many.ranked.size() == one.ranked.size());
    for (std::size_t i = 0; i < one.ranked.size(); ++i)
      same_candidate(many.ranked[i], one.ranked[i]);
    REQUIRE(many.pareto.size() == one.pareto.size());
    for (std::size_t i = 0; i < one.pareto.size(); ++i)
      same_candidate(many.pareto[i], one.pareto[i]);
    REQUIRE(many.rejected.size() == one.rejected.size());
    for (std::size_t i = 0; i < one.rejected.size(); ++i) {
      const auto& a = many.rejected[i];
      const auto& b = one.rejected[i];
      CHECK(a.reason == b.reason);
      CHECK(a.amount == b.amount);
      CHECK(cost::describe(a.layout) == cost::describe(b.layout));
      CHECK(a.memory.total().value == b.memory.total().value);
    }
  }
  r.threads = -1;
  CHECK_THROWS_WITH(f.search(r), Catch::Contains("threads: -1"));
}

TEST_CASE("3D search: expert layouts whose all-to-all spans more than 1024 GPUs are left out") {
  // DeepSeek-V3 (256 routed experts) on 2,048 H800: ep 256 x etp 8 lays each expert-parallel
  // group one GPU per node over all 256 nodes, an all-to-all priced on 2,048 GPUs of whole
  // nodes, past what cost::kMaxAllToAllGpus allows. The search skips those layouts (it used to
  // end the whole plan with the all-to-all's error) and says why.
  const test::Cluster f("deepseek-v3", "hgx-h800", 256, "H800");
  planner::Request3D r;
  r.global_batch = 15360;
  r.seq_len = 4096;
  r.tps = {8};
  r.pps = {1};
  r.cps = {1};
  r.eps = {128, 256};
  r.etps = {8};
  r.frameworks = {cost::Framework::megatron};
  r.sequence_parallel = {true};
  const auto res = f.search(r);
  CHECK(res.exchange_unpriced > 0);
  CHECK_THAT(
      res.exchange_unpriced_why,
      Catch::Matchers::Contains("etp x ep = 2048 GPUs is priced on 2048 GPUs of whole nodes"));
  // ep 128 x etp 8 spans 1,024 GPUs, 128 nodes: priced.
  for (const auto& c : res.ranked) {
    CHECK(c.layout.ep == 128);
  }
  CHECK(res.evaluated > 0);
}
