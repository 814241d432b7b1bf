// Numerical equivalence, run under mpirun -np 2 and -np 4: DDP, DP, ZeRO-1/2/3 and gradient
// accumulation end with the weights single-process training reaches on the same global batch,
// and no_sync accumulation communicates once per optimizer step.
//
// Tolerance: 3 steps of Adam(W) with lr 1e-3 move a weight by up to 3e-3; the strategies differ
// from the reference only in the order floats are summed (relative ~1e-7 on gradients), so any
// weight may differ by at most 2e-6 -- while a strategy that lost a gradient slice, skipped the
// averaging or double-counted a micro-step would be off by ~1e-3.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/runtime/cpu_device.hpp"
#include "dtplan/runtime/mpi_group.hpp"
#include "dtplan/runtime/parallel_groups.hpp"
#include "dtplan/runtime/trainer.hpp"
#include "tiny_stack.hpp"

using namespace dtplan;
using namespace dtplan::runtime;

namespace {

constexpr double kTolerance = 2e-6;

// Three steps in fp32. Under 16-bit compute one: the strategies' fp32 sums in different orders
// leave weights a few fp32 units apart, and the next step's rounding of those weights to 16
// bits can land either way (in the fp16 DDP case below, 7e-6 apart after three steps).
int steps_of(const cost::DenseStack& s) {
  return s.compute == cost::ElementType::fp32 ? 3 : 1;
}

std::vector<float> train(const cost::DenseStack& s, TrainerSettings set, const MpiGroup& g) {
  auto dev = make_cpu_device(1LL << 30, 1);
  auto comm = g.make_communicator();
  Trainer t(s, set, *dev, *comm, g);
  for (int i = 0; i < steps_of(s); ++i)
    t.step(i);
  return t.gather_parameters();
}

// The same global batch in one process: micro-batches of the same size, n x as many.
std::vector<float> reference(const cost::DenseStack& s, TrainerSettings set, int world) {
  set.strategy = Strategy::ddp;
  set.grad_accum *= world;
  return train(s, set, MpiGroup::self());
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    d = std::max(d, std::fabs(double{a[i]} - b[i]));
  return d;
}

void check_equivalent(Strategy strategy, std::int64_t accum, bool gated, bool tied,
                      Optimizer opt = Optimizer::adamw, bool fp16 = false, float clip = 1.0f,
                      cost::ElementType compute = cost::ElementType::fp32, double dropout = 0) {
  const auto world = MpiGroup::world();
  auto s = test::tiny_stack(gated, tied);
  s.compute = compute;
  s.attention_dropout = s.hidden_dropout = s.embedding_dropout = dropout;
  TrainerSettings set;
  set.strategy = strategy;
  set.optimizer = opt;
  set.micro_batch = 2;
  set.grad_accum = accum;
  set.bucket_cap_bytes = 1500 * 4;  // several buckets
  set.loss_scaling = fp16;
  set.max_grad_norm = clip;
  // SGD's step is lr x the (clipped) gradient; lr 1 makes it as large as Adam's.
  if (opt == Optimizer::sgd_momentum) set.lr = 1.0f;
  const auto got = train(s, set, world);
  const auto want = reference(s, set, world.size());
  auto initial = cost::DenseStack(s);
  TrainerSettings none = set;
  none.lr = 0;
  const auto start = train(initial, none, MpiGroup::self());
  INFO(name_of(strategy) << " accum " << accum << " on " << world.size() << " ranks");
  CHECK(max_diff(got, want) < kTolerance);
  // Not vacuous: training moved the weights far more than the tolerance.
  CHECK(max_diff(want, start) > 100 * kTolerance);
}

}  // namespace

TEST_CASE("equivalence: DDP matches single-process training") {
  check_equivalent(Strategy::ddp, 1, false, true);
  check_equivalent(Strategy::ddp, 3, true, false);
}

TEST_CASE("equivalence: DataParallel (reduce to rank 0) matches") {
  check_equivalent(Strategy::dp, 1, true, true);
  check_equivalent(Strategy::dp, 2, false, false);
}

TEST_CASE("equivalence: ZeRO-1 matches") {
  check_equivalent(Strategy::zero1, 1, true, true);
  check_equivalent(Strategy::zero1, 3, false, false);
}

TEST_CASE("equivalence: ZeRO-2 matches") {
  check_equivalent(Strategy::zero2, 1, false, true);
  check_equivalent(Strategy::zero2, 2, true, false);
}

TEST_CASE("equivalence: ZeRO-3 matches") {
  check_equivalent(Strategy::zero3, 1, true, false);
  check_equivalent(Strategy::zero3, 3, false, true);
}

TEST_CASE("equivalence: 16-bit compute, each strategy the same rounding") {
  // Every rank rounds its own micro-batches as one process would; the strategies differ only
  // in how they sum fp32 gradients.
  check_equivalent(Strategy::zero3, 2, true, false, Optimizer::adamw, false, 1.0f,
                   cost::ElementType::bf16);
  check_equivalent(Strategy::ddp, 2, false, true, Optimizer::adamw, true, 1.0f,
                   cost::ElementType::fp16);
}

TEST_CASE("equivalence: dropout masks follow the sample, not the rank or the micro-step") {
  // p = 0.3 everywhere: a rank that drew its masks from its own position (rank, micro-step)
  // would drop other elements than one process does for the same sample.
  check_equivalent(Strategy::ddp, 2, true, false, Optimizer::adamw, false, 1.0f,
                   cost::ElementType::fp32, 0.3);
  check_equivalent(Strategy::zero3, 1, false, true, Optimizer::adamw, false, 1.0f,
                   cost::ElementType::fp32, 0.3);
  check_equivalent(Strategy::zero2, 2, false, false, Optimizer::adamw, false, 1.0f,
                   cost::ElementType::bf16, 0.3);
}

TEST_CASE("equivalence: SGD with momentum, loss scaling and a clip that bites") {
  // max_grad_norm 1e-3 is far below the gradient norm, so the clip scales every step: the
  // sharded strategies must sum squares over all shards to agree.
  check_equivalent(Strategy::zero2, 2, true, true, Optimizer::sgd_momentum, true, 1e-3f);
  check_equivalent(Strategy::zero1, 2, false, false, Optimizer::adam, true, 1e-3f);
  check_equivalent(Strategy::zero3, 1, true, true, Optimizer::adamw, false, 1e-3f);
}

TEST_CASE("equivalence: no_sync accumulation communicates once per optimizer step") {
  const auto world = MpiGroup::world();
  const auto s = test::tiny_stack(true, false);
  auto count = [&](Strategy strategy, bool no_sync, std::string_view kind) {
    TrainerSettings set;
    set.strategy = strategy;
    set.micro_batch = 1;
    set.grad_accum = 4;
    set.no_sync = no_sync;
    // Units: head 444, blocks 1,240 each, embedding 444 floats -> buckets {head, block 1},
    // {block 0}, {embedding}.
    set.bucket_cap_bytes = 1000 * 4;
    auto dev = make_cpu_device(1LL << 30, 1);
    auto comm = world.make_communicator();
    Trainer t(s, set, *dev, *comm, world);
    const auto m = t.step(0);
    std::int64_t n = 0;
    for (const auto& c : m.collectives)
      n += name_of(c.kind) == kind;
    return std::pair{n, t.buckets()};
  };
  const auto [once, buckets] = count(Strategy::ddp, true, "all_reduce");
  const auto [every, same_buckets] = count(Strategy::ddp, false, "all_reduce");
  REQUIRE(buckets >= 3);
  CHECK(once == buckets);       // the last micro-step only
  CHECK(every == 4 * buckets);  // each of the 4 micro-steps
  // ZeRO-1 reduce-scatters each of its 4 units (embedding, 2 blocks, head) once per step.
  CHECK(count(Strategy::zero1, true, "reduce_scatter").first == 4);
  // ZeRO-2 cannot skip: every micro-step reduce-scatters every unit.
  CHECK(count(Strategy::zero2, true, "reduce_scatter").first == 16);
}

namespace {

// The rank's part of a tp x dp x pp job over the world: its tensor-parallel share of its stage.
cost::DenseStack part_of(const cost::DenseStack& whole, int tp, int pp, int stage) {
  auto s = cost::tensor_parallel_share(whole, tp);
  return pp > 1 ? cost::pipeline_stage(s, pp, stage) : s;
}

std::vector<float> train_parallel(const cost::DenseStack& whole, TrainerSettings set, int tp,
                                  int pp) {
  const auto world = MpiGroup::world();
  ParallelGroups g(world, tp, pp, whole.tied,
                   [](const MpiGroup& h) { return h.make_communicator(); });
  auto dev = make_cpu_device(1LL << 30, 1);
  Trainer t(part_of(whole, tp, pp, g.stage()), set, *dev, g.data_parallel(), world,
            g.model_parallel());
  for (int i = 0; i < steps_of(whole); ++i)
    t.step(i);
  return t.gather_parameters();
}

// The whole model trained in one process on the same global batch must end with the weights
// the stages (and their tensor-parallel shares) reassemble.
void check_pipeline(Strategy strategy, int tp, int pp, std::int64_t accum, cost::DenseStack s,
                    double dropout = 0, float clip = 1.0f, Optimizer opt = Optimizer::adamw) {
  const auto world = MpiGroup::world();
  if (world.size() % (tp * pp) != 0) return;
  s.attention_dropout = s.hidden_dropout = s.embedding_dropout = dropout;
  TrainerSettings set;
  set.strategy = strategy;
  set.micro_batch = 2;
  set.grad_accum = accum;
  set.bucket_cap_bytes = 700 * 4;
  set.max_grad_norm = clip;
  set.optimizer = opt;
  if (opt == Optimizer::sgd_momentum) set.lr = 1.0f;  // steps as large as Adam's
  const auto got = train_parallel(s, set, tp, pp);
  const auto whole = cost::whole_of(cost::tensor_parallel_share(s, tp));
  const auto want = reference(whole, set, world.size() / (tp * pp));
  TrainerSettings none = set;
  none.lr = 0;
  const auto start = train(whole, none, MpiGroup::self());
  INFO(name_of(strategy) << " tp " << tp << " x pp " << pp << " x dp " << world.size() / (tp * pp)
                         << ", " << accum << " micro-batches");
  CHECK(max_diff(got, want) < kTolerance);
  CHECK(max_diff(want, start) > 100 * kTolerance);
}

// Tensor parallelism alone: tp consecutive ranks, the rest data-parallel.
void check_tensor_parallel(Strategy strategy, int tp, std::int64_t accum, cost::DenseStack s,
                           double dropout = 0, float clip = 1.0f,
                           Optimizer opt = Optimizer::adamw) {
  check_pipeline(strategy, tp, 1, accum, std::move(s), dropout, clip, opt);
}

// The tiny stack with as many key/value heads as query heads, for tp 4.
cost::DenseStack full_heads(bool gated, bool tied) {
  auto s = test::tiny_stack(gated, tied);
  s.kv_heads = s.heads;
  return s;
}

}  // namespace

TEST_CASE("equivalence: tensor parallelism over 2 ranks matches single-process training") {
  // vocab 37 is padded to 38 on 2 ranks; the reference trains the padded model.
  check_tensor_parallel(Strategy::ddp, 2, 1, test::tiny_stack(false, true));
  check_tensor_parallel(Strategy::ddp, 2, 2, test::tiny_stack(true, false));
}

TEST_CASE("equivalence: tensor parallelism with dropout draws each head's mask once") {
  // A rank drawing its heads' attention masks from its own position (not the heads' place in
  // the whole model) drops other probabilities than one process does.
  check_tensor_parallel(Strategy::ddp, 2, 1, test::tiny_stack(true, true), 0.3);
  // SGD: at -np 4 one value-projection weight's gradient cancels to 7e-9 (the others ~1e-3),
  // where the sum order moves it by 2.6%; Adam's update g / (|g| + 1e-8) turns that into 6e-6
  // of weight. SGD's update is linear in the gradient, so the tolerance's reasoning holds.
  check_tensor_parallel(Strategy::zero2, 2, 2, test::tiny_stack(false, false), 0.3, 1.0f,
                        Optimizer::sgd_momentum);
}

TEST_CASE("equivalence: tensor parallelism counts replicated gradients once in the norm") {
  // A clip of 1e-3 bites every step: a norm that counted the norms' and the row-parallel
  // biases' gradients on both ranks would scale every update differently.
  check_tensor_parallel(Strategy::ddp, 2, 1, test::tiny_stack(true, false), 0, 1e-3f);
  check_tensor_parallel(Strategy::zero1, 2, 2, test::tiny_stack(false, true), 0, 1e-3f);
}

TEST_CASE("equivalence: tensor x data parallelism, each strategy over the data-parallel ranks") {
  // At -np 4: 2 tensor-parallel ranks x 2 data-parallel ranks (skipped at -np 2 for tp 4).
  check_tensor_parallel(Strategy::zero3, 2, 2, test::tiny_stack(true, false), 0, 1e-3f);
  check_tensor_parallel(Strategy::zero1, 2, 1, test::tiny_stack(false, true), 0.3);
  check_tensor_parallel(Strategy::ddp, 4, 2, full_heads(true, true), 0.3);
  check_tensor_parallel(Strategy::zero2, 4, 1, full_heads(false, false));
}

TEST_CASE("equivalence: memory the runtime allocates is what the cost model predicts") {
  // Model states come from the memory model (estimate_memory, fp32), activations and buffers
  // from the stack's shapes: every component must agree to the byte on rank 0.
  const auto world = MpiGroup::world();
  cost::HardwareProfile profile;  // times are irrelevant here; every collective is known
  for (const char* k : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"}) {
    profile.collectives.push_back({k, world.size(), 1e-5, 1e-9, 0});
  }
  for (auto* c : {&profile.elementwise_s_per_byte, &profile.softmax_s_per_element,
                  &profile.activation_s_per_element, &profile.activation_grad_s_per_element,
                  &profile.adam_s_per_param, &profile.sgd_s_per_param}) {
    c->points = {{1, 1e-9}};
  }
  for (auto strategy : {Strategy::ddp, Strategy::dp, Strategy::zero1, Strategy::zero2,
                        Strategy::zero3, Strategy::fsdp_full}) {
    for (bool tied : {true, false}) {
      auto s = test::tiny_stack(true, tied);
      // 16-bit compute adds one unit's rounded weights and two temporaries (untied only: the
      // tied stack is checked in fp32, with dropout's one-byte masks and its temporary).
      if (!tied) s.compute = cost::ElementType::bf16;
      if (tied) s.attention_dropout = s.hidden_dropout = s.embedding_dropout = 0.1;
      TrainerSettings set;
      set.strategy = strategy;
      set.micro_batch = 2;
      set.grad_accum = 2;
      auto dev = make_cpu_device(1LL << 30, 1);
      auto comm = world.make_communicator();
      Trainer t(s, set, *dev, *comm, world);
      t.step(0);
      cost::RuntimeRun run{s, strategy, set.optimizer,         world.size(),
                           2, 2,        t.no_sync_effective(), set.bucket_cap_bytes,
                           {}};
      const auto p = cost::predict_runtime_step(run, profile);
      const auto measured = world.all_gather({static_cast<double>(dev->peak_bytes())});
      INFO(name_of(strategy) << (tied ? " tied" : " untied, bf16") << " on " << world.size());
      for (int c = 0; c < kMemoryComponents; ++c) {
        const auto comp = static_cast<MemoryComponent>(c);
        INFO(name_of(comp));
        if (world.rank() == 0)
          CHECK(p.memory.at(std::string(name_of(comp))) == dev->at_peak()[comp]);
      }
      CHECK(p.peak_bytes == static_cast<std::int64_t>(measured.front()));
    }
  }
}

namespace {

cost::DenseStack four_layers(bool gated, bool tied) {
  auto s = test::tiny_stack(gated, tied);
  s.layers = 4;
  return s;
}

}  // namespace

TEST_CASE("equivalence: a 2-stage pipeline matches single-process training") {
  // 4 micro-batches: stage 0 runs 1 forward ahead, then alternates. Tied: the last stage's
  // copy of the embedding learns from the sum of both stages' gradients.
  check_pipeline(Strategy::ddp, 1, 2, 4, test::tiny_stack(false, true));
  check_pipeline(Strategy::zero1, 1, 2, 3, test::tiny_stack(true, false), 0.3);
  // One micro-batch: nothing to overlap; a clip that bites counts the tied copy once.
  check_pipeline(Strategy::ddp, 1, 2, 1, test::tiny_stack(true, true), 0, 1e-3f);
  check_pipeline(Strategy::zero3, 1, 2, 2, test::tiny_stack(false, false), 0.3, 1e-3f);
}

TEST_CASE("equivalence: pipeline stages with tensor and data parallelism") {
  // At -np 4: 2 stages x 2 data-parallel ranks, 2 stages x 2 tensor-parallel ranks, 4 stages
  // with more micro-batches than stages and with fewer.
  check_pipeline(Strategy::ddp, 1, 2, 3, test::tiny_stack(true, true), 0.3);
  check_pipeline(Strategy::zero1, 2, 2, 4, test::tiny_stack(false, true), 0, 1e-3f);
  check_pipeline(Strategy::zero2, 2, 2, 2, test::tiny_stack(true, false), 0.3);
  check_pipeline(Strategy::ddp, 1, 4, 6, four_layers(false, false), 0.3, 1e-3f);
  check_pipeline(Strategy::zero1, 1, 4, 2, four_layers(true, true));
}

TEST_CASE("equivalence: tied embeddings across stages refuse sharded gradients") {
  const auto world = MpiGroup::world();
  ParallelGroups g(world, 1, 2, true, [](const MpiGroup& h) { return h.make_communicator(); });
  TrainerSettings set;
  set.strategy = Strategy::zero3;
  auto dev = make_cpu_device(1LL << 30, 1);
  const auto s = part_of(test::tiny_stack(false, true), 1, 2, g.stage());
  CHECK_THROWS_WITH(Trainer(s, set, *dev, g.data_parallel(), world, g.model_parallel()),
                    Catch::Contains("tied embeddings across pipeline stages") &&
                        Catch::Contains("use ddp or zero1"));
}

TEST_CASE("equivalence: a model-parallel rank allocates what the cost model predicts") {
  // Every rank's states, activations and buffers -- its tensor-parallel share (the row-parallel
  // temporary and the vocab-parallel loss's three values per token included) of its pipeline
  // stage (a model per micro-batch in flight: 2 on the first of 2 stages, 1 on the last), the
  // strategy over the data-parallel rest -- the same byte for byte.
  const auto world = MpiGroup::world();
  cost::HardwareProfile profile;  // times are irrelevant; every group size is known
  for (const char* k :
       {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv"}) {
    for (int n : {2, 4})
      profile.collectives.push_back({k, n, 1e-5, 1e-9, 0});
  }
  for (auto* c : {&profile.elementwise_s_per_byte, &profile.softmax_s_per_element,
                  &profile.activation_s_per_element, &profile.activation_grad_s_per_element,
                  &profile.adam_s_per_param, &profile.sgd_s_per_param}) {
    c->points = {{1, 1e-9}};
  }
  for (const auto& [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    if (world.size() % (tp * pp) != 0) continue;
    const int dp = world.size() / (tp * pp);
    for (auto strategy : {Strategy::ddp, Strategy::zero1, Strategy::zero3}) {
      for (bool gated : {true, false}) {
        auto whole = test::tiny_stack(gated, !gated);
        if (gated) whole.compute = cost::ElementType::bf16;
        TrainerSettings set;
        set.strategy = strategy;
        set.micro_batch = 2;
        set.grad_accum = 3;
        ParallelGroups g(world, tp, pp, whole.tied,
                         [](const MpiGroup& h) { return h.make_communicator(); });
        if (pp > 1 && whole.tied && strategy == Strategy::zero3) continue;  // refused
        const auto part = part_of(whole, tp, pp, g.stage());
        auto dev = make_cpu_device(1LL << 30, 1);
        Trainer t(part, set, *dev, g.data_parallel(), world, g.model_parallel());
        const auto measured = t.step(0);
        cost::RuntimeRun run{part, strategy, set.optimizer,         dp,
                             2,    3,        t.no_sync_effective(), set.bucket_cap_bytes,
                             {}};
        const auto p = cost::predict_runtime_step(run, profile);
        INFO(name_of(strategy) << (gated ? " gated, bf16" : " GELU, fp32") << ", tp " << tp
                               << " x pp " << pp << " x dp " << dp << ", stage " << g.stage());
        for (int c = 0; c < kMemoryComponents; ++c) {
          const auto comp = static_cast<MemoryComponent>(c);
          INFO(name_of(comp));
          CHECK(p.memory.at(std::string(name_of(comp))) == dev->at_peak()[comp]);
        }
        // And every collective and exchange the step made is one the prediction lists, as
        // often (a data-parallel group of one issues its all-reduces too).
        std::map<std::tuple<std::string, std::string, std::int64_t>, std::int64_t> made;
        for (const auto& c : measured.collectives)
          ++made[{std::string(name_of(c.kind)), c.phase, c.bytes}];
        std::int64_t listed = 0;
        for (const auto& c : p.collectives) {
          INFO(c.kind << " " << c.phase << " " << c.bytes);
          CHECK(made[{c.kind, c.phase, c.bytes}] == c.count_per_step);
          listed += c.count_per_step;
        }
        CHECK(listed == static_cast<std::int64_t>(measured.collectives.size()));
      }
    }
  }
}

TEST_CASE("CPU collectives: each kind's result, by hand from every rank's input") {
  const auto world = MpiGroup::world();
  auto comm = world.make_communicator();
  const int n = world.size(), r = world.rank();
  constexpr std::int64_t kCount = 3;  // elements per rank's block
  // Rank q contributes 10 q + i at element i: sums over ranks are n(n-1)/2 x 10 + n i.
  std::vector<float> in(static_cast<std::size_t>(n * kCount)), out(in.size());
  const auto fill = [&] {
    for (std::size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(10 * r) + static_cast<float>(i);
  };
  const auto sum_at = [&](std::int64_t i) { return static_cast<float>(5 * n * (n - 1) + n * i); };
  fill();
  comm->wait(comm->all_reduce(in.data(), n * kCount));
  for (std::int64_t i = 0; i < n * kCount; ++i)
    CHECK(in[static_cast<std::size_t>(i)] == sum_at(i));
  fill();
  comm->wait(comm->reduce_scatter(in.data(), out.data(), kCount));
  for (std::int64_t i = 0; i < kCount; ++i)  // rank r receives block r of the sum
    CHECK(out[static_cast<std::size_t>(i)] == sum_at(r * kCount + i));
  fill();
  comm->wait(comm->all_gather(in.data(), out.data(), kCount));
  for (std::int64_t q = 0; q < n; ++q) {  // rank q's first kCount elements, in rank order
    for (std::int64_t i = 0; i < kCount; ++i)
      CHECK(out[static_cast<std::size_t>(q * kCount + i)] == static_cast<float>(10 * q + i));
  }
  const int root = n - 1;
  fill();
  comm->wait(comm->broadcast(in.data(), kCount, root));
  for (std::int64_t i = 0; i < kCount; ++i)
    CHECK(in[static_cast<std::size_t>(i)] == static_cast<float>(10 * root + i));
  fill();
  comm->wait(comm->reduce(in.data(), kCount, root));
  for (std::int64_t i = 0; i < kCount; ++i) {  // others keep their own values
    CHECK(in[static_cast<std::size_t>(i)] ==
          (r == root ? sum_at(i) : static_cast<float>(10 * r + i)));
  }
  const auto& rec = comm->records();
  REQUIRE(rec.size() == 5);
  CHECK(rec[1].bytes == n * kCount * 4);  // reduce-scatter: the whole unscattered buffer
  CHECK(rec[4].bytes == kCount * 4);
}

TEST_CASE("CPU point to point: a pipeline's exchanges, by hand") {
  const auto world = MpiGroup::world();
  auto comm = world.make_communicator();
  const int n = world.size(), r = world.rank();
  // Forward: rank r sends 100 r + i to r + 1 and receives from r - 1 (the ends skip a half).
  std::vector<float> act{100.0f * static_cast<float>(r), 100.0f * static_cast<float>(r) + 1},
      got(2, -1.0f);
  const int next = r + 1 < n ? r + 1 : -1, prev = r > 0 ? r - 1 : -1;
  comm->wait(comm->send_recv(act.data(), 2, next, got.data(), 2, prev));
  CHECK(got[0] == (prev < 0 ? -1.0f : 100.0f * static_cast<float>(prev)));
  CHECK(got[1] == (prev < 0 ? -1.0f : 100.0f * static_cast<float>(prev) + 1));
  // Backward at once the other way, 3 elements: what each rank gets is its next rank's.
  std::vector<float> grad(3, static_cast<float>(r)), back(3, -1.0f);
  comm->wait(comm->send_recv(grad.data(), 3, prev, back.data(), 3, next));
  CHECK(back[2] == (next < 0 ? -1.0f : static_cast<float>(next)));
  const auto& rec = comm->records();
  REQUIRE(rec.size() == 2);
  CHECK(rec[0].kind == Collective::send_recv);
  CHECK(rec[1].bytes == (n == 1 ? 0 : 12));  // the larger half that moved
  CHECK_THROWS_WITH(comm->send_recv(act.data(), 2, r, got.data(), 2, -1),
                    Catch::Contains("not another rank"));
}

TEST_CASE("CPU collectives: a record is the collective's duration, not the compute after it") {
  // The old CPU backend timed a collective from issue to the wait that noticed its end, so
  // compute between the two was counted as communication (16.7 ms for a 66 KB bucket).
  const auto world = MpiGroup::world();
  auto comm = world.make_communicator();
  std::vector<float> grads(256, 1.0f), work(1 << 20, 0.5f);
  comm->set_phase("backward");
  const auto t0 = std::chrono::steady_clock::now();
  const auto h = comm->all_reduce(grads.data(), 256);
  const std::chrono::duration<double> issue_s = std::chrono::steady_clock::now() - t0;
  // Compute between issue and wait, as backward does between a bucket and the optimizer.
  double checksum = 0;
  for (int pass = 0; pass < 20; ++pass) {
    for (auto& w : work)
      checksum += (w = w * 0.999f + 0.001f);
  }
  comm->wait(h);
  const auto& rec = comm->records();
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].phase == "backward");
  CHECK(rec[0].time_s > 0);
  CHECK(rec[0].time_s <= issue_s.count());  // inside the call that ran it
  CHECK(grads[0] == static_cast<float>(world.size()));
  CHECK(checksum > 0);
}

TEST_CASE("CPU collectives: waiting on a handle never issued names it") {
  auto comm = MpiGroup::world().make_communicator();
  CHECK_THROWS_WITH(comm->wait(7), Catch::Contains("collective handle 7") &&
                                       Catch::Contains("only 0 collectives were issued"));
}
