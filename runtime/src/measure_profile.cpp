// Profile microbenchmarks and their fits (see measure_profile.hpp).
#include "dtplan/runtime/measure_profile.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "dtplan/runtime/host_info.hpp"

namespace dtplan::runtime {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of one call of `fn` (repeated until 30 ms or 50 calls), slowest rank's.
template <class Fn>
double time_of(Device& dev, const MpiGroup& world, Fn fn) {
  fn();  // warm-up
  dev.synchronize();
  std::vector<double> t;
  const double start = now_s();
  while (t.size() < 3 || (now_s() - start < 0.03 && t.size() < 50)) {
    const double a = now_s();
    fn();
    dev.synchronize();
    t.push_back(now_s() - a);
  }
  std::sort(t.begin(), t.end());
  return world.max(t[t.size() / 2]);
}

void fit_gemm(Device& dev, const MpiGroup& world, cost::HardwareProfile& p) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  const std::int64_t ms[] = {256, 1024, 4096};
  const std::pair<std::int64_t, std::int64_t> nks[] = {
      {32, 32}, {32, 128}, {128, 32}, {128, 128}, {512, 128}, {128, 512}, {512, 512}, {2048, 64}};
  for (auto m : ms) {
    for (auto [n, k] : nks) {
      auto a = dev.allocate_floats(m * k, MemoryComponent::buffers);
      auto b = dev.allocate_floats(k * n, MemoryComponent::buffers);
      auto c = dev.allocate_floats(std::max(m * n, k * n), MemoryComponent::buffers);
      // The three forms a Linear uses: forward (NT), input gradient (NN), weight gradient (TN).
      const double t_nt =
          time_of(dev, world, [&] { dev.gemm(false, true, m, n, k, 1, a.f(), b.f(), 0, c.f()); });
      const double t_nn =
          time_of(dev, world, [&] { dev.gemm(false, false, m, n, k, 1, a.f(), b.f(), 0, c.f()); });
      const double t_tn =
          time_of(dev, world, [&] { dev.gemm(true, false, k, n, m, 1, a.f(), c.f(), 1, b.f()); });
      const auto row = [](double mm, double nn, double kk) {
        return std::vector<double>{2 * mm * nn * kk, 4 * (mm * kk + kk * nn + mm * nn), 1};
      };
      const double md = static_cast<double>(m), nd = static_cast<double>(n),
                   kd = static_cast<double>(k);
      x.push_back(row(md, nd, kd));
      y.push_back(t_nt);
      x.push_back(row(md, nd, kd));
      y.push_back(t_nn);
      x.push_back(row(kd, nd, md));
      y.push_back(t_tn);
    }
  }
  const auto fit = cost::fit_relative(x, y);
  p.gemm_s_per_flop = fit.coefficients[0];
  p.gemm_s_per_byte = std::max(0.0, fit.coefficients[1]);
  p.gemm_s_per_call = std::max(0.0, fit.coefficients[2]);
  p.gemm_rms_relative_error = fit.rms_relative_error;
}

void fit_collective(Communicator& comm, Device& dev, const MpiGroup& world, const std::string& kind,
                    cost::HardwareProfile& p) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  const std::int64_t n = comm.size();
  for (std::int64_t bytes = 4096; bytes <= (16 << 20); bytes *= 4) {
    const std::int64_t count = bytes / 4 / n * n;  // divisible by the ranks
    auto in = dev.allocate_floats(count, MemoryComponent::buffers);
    auto out = dev.allocate_floats(count, MemoryComponent::buffers);
    auto op = [&] {
      CommHandle h = 0;
      if (kind == "all_reduce") h = comm.all_reduce(in.f(), count);
      if (kind == "reduce_scatter") h = comm.reduce_scatter(in.f(), out.f(), count / n);
      if (kind == "all_gather") h = comm.all_gather(in.f(), out.f(), count / n);
      if (kind == "broadcast") h = comm.broadcast(in.f(), count, 0);
      if (kind == "reduce") h = comm.reduce(in.f(), count, 0);
      comm.wait(h);
      (void)comm.records();
      comm.clear_records();
    };
    x.push_back({1, static_cast<double>(count * 4)});
    y.push_back(time_of(dev, world, op));
  }
  const auto fit = cost::fit_relative(x, y);
  p.collectives.push_back({kind, n, std::max(0.0, fit.coefficients[0]),
                           std::max(0.0, fit.coefficients[1]), fit.rms_relative_error});
}

}  // namespace

cost::HardwareProfile measure_profile(Device& dev, Communicator& comm, const MpiGroup& world,
                                      const ProgressFn& progress) {
  cost::HardwareProfile p;
  p.backend = dev.kind();
  p.hardware = dev.description();
  p.created = utc_timestamp();
  p.versions = {{"communicator", comm.description()}};
  progress("GEMMs (72 shapes and forms)");
  fit_gemm(dev, world, p);
  progress("element-wise bandwidth, softmax, optimizer updates");
  const std::int64_t big = 8 << 20;
  auto x = dev.allocate_floats(big, MemoryComponent::buffers);
  auto y = dev.allocate_floats(big, MemoryComponent::buffers);
  auto m = dev.allocate_floats(big, MemoryComponent::buffers);
  auto v = dev.allocate_floats(big, MemoryComponent::buffers);
  p.elementwise_bytes_per_s = 12.0 * static_cast<double>(big) /
                              time_of(dev, world, [&] { dev.axpy(0.5f, x.f(), y.f(), big); });
  p.adam_s_per_param =
      time_of(dev, world,
              [&] {
                dev.adam(x.f(), y.f(), m.f(), v.f(), big, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
              }) /
      static_cast<double>(big);
  p.sgd_s_per_param = time_of(dev, world, [&] { dev.sgd(x.f(), y.f(), m.f(), big, 1e-3f, 0.9f); }) /
                      static_cast<double>(big);
  p.s_per_activation_element =
      time_of(dev, world, [&] { dev.gelu(x.f(), y.f(), big); }) / static_cast<double>(big);
  p.s_per_activation_grad_element =
      time_of(dev, world, [&] { dev.gelu_backward(x.f(), y.f(), m.f(), big); }) /
      static_cast<double>(big);
  const std::int64_t tokens = 512, vocab = 4096;
  auto targets = dev.allocate(tokens * 4, MemoryComponent::data);
  p.s_per_softmax_element =
      time_of(dev, world,
              [&] { dev.softmax_cross_entropy(x.f(), targets.i(), tokens, vocab, 1.0f); }) /
      static_cast<double>(tokens * vocab);
  for (const char* kind : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"}) {
    progress(std::string(kind) + " over " + std::to_string(comm.size()) + " ranks, 4 KiB..16 MiB");
    fit_collective(comm, dev, world, kind, p);
  }
  return p;
}

}  // namespace dtplan::runtime
