// Profile microbenchmarks (see measure_profile.hpp); the fits live in cost/calibration.
#include "dtplan/runtime/measure_profile.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>
#include <vector>

#include "dtplan/cost/calibration.hpp"
#include "dtplan/cost/profile_quality.hpp"
#include "dtplan/runtime/host_info.hpp"

namespace dtplan::runtime {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Standard-normal values, so that kernels whose speed depends on their input (libm's tanh and
// exp are ten times faster on zeros) are timed on data like the workload's.
void randomize(Device& dev, Buffer& b) {
  std::mt19937 gen(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> host(static_cast<std::size_t>(b.bytes() / 4));
  for (auto& v : host)
    v = normal(gen);
  dev.upload(host.data(), b.f(), b.bytes());
}

// Times calls and keeps each benchmark's spread -- the coefficient of variation of its
// repeats, the slowest rank's -- for the profile's quality (cost/profile_quality.hpp).
class Timer {
 public:
  Timer(Device& dev, const MpiGroup& world) : dev_(dev), world_(world) {}

  // Median seconds of one call of `fn` (repeated until 30 ms or 50 calls), slowest rank's.
  template <class Fn>
  double median(Fn fn) {
    fn();  // warm-up
    dev_.synchronize();
    std::vector<double> t;
    const double start = now_s();
    while (t.size() < 3 || (now_s() - start < 0.03 && t.size() < 50)) {
      const double a = now_s();
      fn();
      dev_.synchronize();
      t.push_back(now_s() - a);
    }
    return kept(t, true);
  }

  // For collectives: every rank of the world makes the same number of calls (a rank that
  // stopped early would leave the others waiting), sized from the slowest first call. Ranks
  // with nothing to time (`timed` false) add no spread.
  template <class Fn>
  double agreed(Fn fn, bool timed) {
    fn();  // warm-up
    dev_.synchronize();
    double a = now_s();
    fn();
    dev_.synchronize();
    const double first = world_.max(now_s() - a);
    const int reps = std::clamp(static_cast<int>(0.03 / std::max(first, 1e-9)), 3, 50);
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      a = now_s();
      fn();
      dev_.synchronize();
      t.push_back(now_s() - a);
    }
    return kept(t, timed);
  }

  // The spreads so far; the load and the judgement are the caller's.
  cost::ProfileQuality spreads() const {
    cost::ProfileQuality q;
    auto s = spreads_;
    std::sort(s.begin(), s.end());
    q.benchmarks = static_cast<std::int64_t>(s.size());
    if (!s.empty()) {
      q.median_spread = s[s.size() / 2];
      q.max_spread = s.back();
    }
    return q;
  }

 private:
  double kept(std::vector<double>& t, bool timed) {
    spreads_.push_back(world_.max(timed ? cost::coefficient_of_variation(t) : 0.0));
    std::sort(t.begin(), t.end());
    return world_.max(t[t.size() / 2]);
  }

  Device& dev_;
  const MpiGroup& world_;
  std::vector<double> spreads_;
};

std::vector<cost::GemmSample> time_gemms(Device& dev, Timer& timer, bool quick) {
  std::vector<std::int64_t> ms{256, 1024, 4096};
  std::vector<std::pair<std::int64_t, std::int64_t>> nks{{32, 32},   {32, 128},  {128, 32},
                                                         {128, 128}, {512, 128}, {128, 512},
                                                         {512, 512}, {2048, 64}, {1024, 1024}};
  if (dev.kind() == "cuda") {
    // GPUs reach their rate only on large GEMMs: add transformer-sized ones (hidden 768..4096,
    // MLP 4x) so the fit is not extrapolated to the workload.
    ms.push_back(8192);
    nks.insert(nks.end(), {{768, 768}, {3072, 768}, {768, 3072}, {4096, 4096}, {11008, 4096}});
  }
  if (quick) {
    ms = {256, 1024};
    nks = {{32, 32}, {128, 128}, {512, 128}, {2048, 64}};
  }
  std::vector<cost::GemmSample> out;
  for (auto m : ms) {
    for (const auto& nk : nks) {
      // Plain copies: clang 14 (the sanitizer build) cannot capture structured bindings.
      const std::int64_t n = nk.first;
      const std::int64_t k = nk.second;
      auto a = dev.allocate_floats(m * k, MemoryComponent::buffers);
      auto b = dev.allocate_floats(k * n, MemoryComponent::buffers);
      auto c = dev.allocate_floats(std::max(m * n, k * n), MemoryComponent::buffers);
      // The three forms a Linear uses: forward (NT), input gradient (NN), weight gradient (TN).
      out.push_back({m, n, k, "nt", timer.median([&] {
                       dev.gemm(false, true, m, n, k, 1, a.f(), b.f(), 0, c.f());
                     })});
      out.push_back({m, n, k, "nn", timer.median([&] {
                       dev.gemm(false, false, m, n, k, 1, a.f(), b.f(), 0, c.f());
                     })});
      out.push_back({k, n, m, "tn", timer.median([&] {
                       dev.gemm(true, false, k, n, m, 1, a.f(), c.f(), 1, b.f());
                     })});
    }
  }
  return out;
}

struct Curves {
  std::vector<std::pair<double, double>> ew, act, act_grad, adam, sgd, softmax, dropout_draw;
};

void time_rates(Device& dev, Timer& timer, bool quick, Curves& c) {
  const std::vector<std::int64_t> sizes =
      quick ? std::vector<std::int64_t>{1 << 14, 1 << 20}
            : std::vector<std::int64_t>{1 << 14, 1 << 17, 1 << 20, 1 << 23};
  for (auto n : sizes) {
    auto x = dev.allocate_floats(n, MemoryComponent::buffers);
    auto y = dev.allocate_floats(n, MemoryComponent::buffers);
    auto m = dev.allocate_floats(n, MemoryComponent::buffers);
    auto v = dev.allocate_floats(n, MemoryComponent::buffers);
    for (auto* b : {&x, &y, &m})
      randomize(dev, *b);
    const auto d = static_cast<double>(n);
    c.ew.push_back({12 * d, timer.median([&] { dev.axpy(0.5f, x.f(), y.f(), n); })});
    c.act.push_back({d, timer.median([&] { dev.gelu(x.f(), y.f(), n); })});
    c.act_grad.push_back({d, timer.median([&] { dev.gelu_backward(x.f(), y.f(), m.f(), n); })});
    c.adam.push_back({d, timer.median([&] {
                        dev.adam(x.f(), y.f(), m.f(), v.f(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                                 1);
                      })});
    c.sgd.push_back({d, timer.median([&] { dev.sgd(x.f(), y.f(), m.f(), n, 1e-3f, 0.9f); })});
    DropoutDraw draw;  // one sample of n elements, p = 0.1
    draw.samples = 1;
    draw.per_sample = n;
    draw.p = 0.1;
    c.dropout_draw.push_back({d, timer.median([&] { dev.dropout_mask(m.bytes_ptr(), draw); })});
  }
  const std::int64_t vocab = 4096;
  for (std::int64_t tokens :
       quick ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{16, 128, 1024}) {
    auto logits = dev.allocate_floats(tokens * vocab, MemoryComponent::buffers);
    auto targets = dev.allocate(tokens * 4, MemoryComponent::data);
    randomize(dev, logits);
    c.softmax.push_back({static_cast<double>(tokens * vocab), timer.median([&] {
                           dev.softmax_cross_entropy(logits.f(), targets.i(), tokens, vocab, 1.0f);
                         })});
  }
}

// Attention forward, and forward + backward (backward consumes the probabilities forward
// leaves), of 2 sequences x 4 heads over 2 key/value groups, per (sequence, head).
std::vector<cost::AttentionSample> time_attention(Device& dev, Timer& timer, bool quick) {
  const std::vector<std::int64_t> seqs =
      quick ? std::vector<std::int64_t>{64, 256} : std::vector<std::int64_t>{64, 128, 256, 512};
  const std::vector<std::int64_t> widths =
      quick ? std::vector<std::int64_t>{4, 64} : std::vector<std::int64_t>{4, 16, 64, 128};
  std::vector<cost::AttentionSample> out;
  for (auto seq : seqs) {
    for (auto d : widths) {
      const AttentionShape a{2, seq, 4, 2, d};
      auto qkv = dev.allocate_floats(a.tokens() * a.row(), MemoryComponent::buffers);
      auto probs = dev.allocate_floats(a.batch * a.heads * seq * seq, MemoryComponent::buffers);
      auto o = dev.allocate_floats(a.tokens() * a.heads * d, MemoryComponent::buffers);
      auto d_o = dev.allocate_floats(a.tokens() * a.heads * d, MemoryComponent::buffers);
      auto dqkv = dev.allocate_floats(a.tokens() * a.row(), MemoryComponent::buffers);
      auto scratch = dev.allocate_floats(seq * seq, MemoryComponent::buffers);
      for (auto* b : {&qkv, &d_o})
        randomize(dev, *b);
      auto forward = [&] { dev.attention(qkv.f(), probs.f(), o.f(), a, {}, scratch.f()); };
      const double f = timer.median(forward);
      const double fb = timer.median([&] {
        forward();
        dev.attention_backward(qkv.f(), o.f(), d_o.f(), probs.f(), dqkv.f(), a, {}, scratch.f());
      });
      const auto per_head = static_cast<double>(a.batch * a.heads);
      out.push_back({seq, d, f / per_head, std::max(fb - f, 1e-9) / per_head});
    }
  }
  return out;
}

std::vector<int> communicator_sizes(int world) {
  if (world == 1) return {1};  // a job of one rank still calls its communicator
  std::vector<int> sizes;
  for (int g = 2; g < world; g *= 2)
    sizes.push_back(g);
  if (world >= 2) sizes.push_back(world);
  return sizes;
}

// send_recv: every rank sends `bytes` to the next and receives as much from the previous (a
// ring shift; two ranks exchange), the traffic of neighbouring pipeline stages.
constexpr const char* kKinds[] = {"all_reduce", "reduce_scatter", "all_gather",
                                  "broadcast",  "reduce",         "send_recv"};

// The group of `ranks` with a communicator sweeps its collectives; the slowest rank's times.
// Ranks without one (comm null) make the same timing calls with nothing to time.
void time_collectives(Communicator* comm, std::int64_t n, Device& dev, Timer& timer, bool quick,
                      std::vector<cost::CollectiveSample>& out) {
  for (const char* kind : kKinds) {
    if (n < 2 && std::string_view(kind) == "send_recv") continue;  // no neighbour
    for (std::int64_t bytes = 4096; bytes <= (quick ? (1 << 20) : (16 << 20)); bytes *= 4) {
      const std::int64_t count = bytes / 4 / n * n;  // divisible by the ranks
      auto in = dev.allocate_floats(count, MemoryComponent::buffers);
      auto res = dev.allocate_floats(count, MemoryComponent::buffers);
      const std::string k = kind;
      auto op = [&] {
        if (comm == nullptr) return;
        CommHandle h = 0;
        if (k == "all_reduce") h = comm->all_reduce(in.f(), count);
        if (k == "reduce_scatter") h = comm->reduce_scatter(in.f(), res.f(), count / n);
        if (k == "all_gather") h = comm->all_gather(in.f(), res.f(), count / n);
        if (k == "broadcast") h = comm->broadcast(in.f(), count, 0);
        if (k == "reduce") h = comm->reduce(in.f(), count, 0);
        if (k == "send_recv") {
          const int r = comm->rank(), size = static_cast<int>(n);
          h = comm->send_recv(in.f(), count, (r + 1) % size, res.f(), count, (r + size - 1) % size);
        }
        comm->wait(h);
        (void)comm->records();
        comm->clear_records();
      };
      const double t = timer.agreed(op, comm != nullptr);
      if (comm != nullptr) out.push_back({k, n, count * 4, t});
    }
  }
}

}  // namespace

cost::HardwareProfile measure_profile(Device& dev, const CommFactory& make_comm,
                                      const MpiGroup& world, const ProfileOptions& o,
                                      const ProgressFn& progress) {
  cost::HardwareProfile p;
  p.backend = dev.kind();
  p.hardware = dev.description();
  p.created = utc_timestamp();
  const auto sizes = communicator_sizes(world.size());
  const int stages = 2 + static_cast<int>(sizes.size());
  const double load_before = load_average_1min();
  Timer timer(dev, world);
  progress(1, stages, "GEMMs (shapes x forward, input- and weight-gradient forms)");
  cost::fit_gemm(time_gemms(dev, timer, o.quick), p);
  progress(2, stages,
           "element-wise, activations, softmax, attention and optimizer updates by size");
  Curves c;
  time_rates(dev, timer, o.quick, c);
  p.elementwise_s_per_byte = cost::rate_curve(c.ew, "element-wise");
  p.activation_s_per_element = cost::rate_curve(c.act, "MLP activation");
  p.activation_grad_s_per_element = cost::rate_curve(c.act_grad, "MLP activation backward");
  p.adam_s_per_param = cost::rate_curve(c.adam, "adam");
  p.sgd_s_per_param = cost::rate_curve(c.sgd, "sgd");
  p.softmax_s_per_element = cost::rate_curve(c.softmax, "softmax");
  p.dropout_draw_s_per_element = cost::rate_curve(c.dropout_draw, "dropout draw");
  p.attention = cost::fit_attention(time_attention(dev, timer, o.quick));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    progress(3 + static_cast<int>(i), stages,
             "collectives over " + std::to_string(sizes[i]) + " ranks, 4 KiB.." +
                 (o.quick ? "1 MiB" : "16 MiB"));
    dev.release_cached();  // the sweeps' blocks, before NCCL allocates its buffers
    const auto group = world.split_consecutive(sizes[i]);
    // Only the first group times (a job of that size runs alone on its links); the other
    // ranks make the same timing calls with nothing to time.
    std::unique_ptr<Communicator> comm;
    if (group && world.rank() < sizes[i]) comm = make_comm(*group);
    if (comm && p.versions.empty()) p.versions["communicator"] = comm->description();
    time_collectives(comm.get(), sizes[i], dev, timer, o.quick, p.collective_samples);
  }
  p.collectives = cost::fit_collectives(p.collective_samples);
  auto q = timer.spreads();
  q.cores = cpu_cores();
  q.load_before = load_before;
  q.load_after = load_average_1min();
  p.quality = cost::judge_quality(q, p);  // dtplan calibrate judges again after the steps
  return p;
}

}  // namespace dtplan::runtime
