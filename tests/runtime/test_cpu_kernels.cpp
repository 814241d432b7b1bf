// The CPU device's kernels, every build the host runs (AVX-512, AVX2, baseline), against
// double-precision references written from the formulas; and the choice among the builds.
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dtplan/runtime/cpu_kernels.hpp"
#include "dtplan/runtime/dropout.hpp"
#include "gemm_reference.hpp"

using dtplan::runtime::CpuKernels;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(gen);
  return v;
}

// Worst |got - want| relative to max(|want|, floor).
template <class Got>
double worst_error(const Got& got, const std::vector<double>& want, double floor) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), floor));
  return worst;
}

void check_gemm(const CpuKernels& kern, int m, int n, int k) {
  const auto a = random_floats(static_cast<std::size_t>(m * k), 1);
  const auto b = random_floats(static_cast<std::size_t>(k * n), 2);
  const auto c0 = random_floats(static_cast<std::size_t>(m * n), 3);
  for (int t = 0; t < 4; ++t) {
    const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
    for (const float beta : {0.0f, 1.0f, 0.25f}) {
      auto c = c0;
      kern.gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), beta, c.data());
      const auto want = dtplan::test::gemm_reference(ta, tb, m, n, k, 0.5, a, b, beta, c0);
      INFO(kern.name << " kernels: gemm " << m << "x" << n << "x" << k << " ta " << ta << " tb "
                     << tb << " beta " << beta);
      // fp32 sums of k products of magnitude < 1: error ~ k x 6e-8 of the scale of the sum.
      CHECK(worst_error(c, want, 1.0) < 1e-5);
    }
  }
}

double gelu_ref(double x) {
  const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
  return 0.5 * x * (1 + std::tanh(c * (x + a * x * x * x)));
}
double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

void check_elementwise(const CpuKernels& kern) {
  constexpr std::size_t n = 1003;  // not a multiple of any vector width: the tail is checked
  const auto x = random_floats(n, 4, -6, 6), u = random_floats(n, 5, -2, 2);
  const auto dy = random_floats(n, 6);
  std::vector<float> y(n), dx(n), du(n);
  std::vector<double> want(n), want_dx(n), want_du(n);
  INFO(kern.name << " kernels");
  // GELU's 1 + tanh cancels in fp32 where x is far below 0, so its error is absolute there: a
  // floor of 1 allows 1e-5 absolute (about 20 ulp of 1) and 1e-5 relative above it. A wrong
  // constant or sign is off by more than 1e-3.
  kern.gelu(x.data(), y.data(), n);
  for (std::size_t i = 0; i < n; ++i)
    want[i] = gelu_ref(x[i]);
  CHECK(worst_error(y, want, 1.0) < 1e-5);
  kern.gelu_backward(x.data(), dy.data(), dx.data(), n);
  for (std::size_t i = 0; i < n; ++i) {  // central difference of the double reference
    const double h = 1e-5;
    want_dx[i] = dy[i] * (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
  }
  CHECK(worst_error(dx, want_dx, 1.0) < 1e-5);
  kern.swiglu(x.data(), u.data(), y.data(), n);
  for (std::size_t i = 0; i < n; ++i)
    want[i] = x[i] * sigmoid(x[i]) * u[i];
  CHECK(worst_error(y, want, 1e-2) < 1e-5);
  kern.swiglu_backward(x.data(), u.data(), dy.data(), dx.data(), du.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const double s = sigmoid(x[i]);
    want_du[i] = dy[i] * x[i] * s;
    want_dx[i] = dy[i] * u[i] * (s + x[i] * s * (1 - s));  // d/dg of g sigmoid(g) u
  }
  CHECK(worst_error(du, want_du, 1e-2) < 1e-5);
  CHECK(worst_error(dx, want_dx, 1e-2) < 1e-5);
}

void check_softmax_cross_entropy(const CpuKernels& kern) {
  constexpr int tokens = 3, vocab = 1001;
  auto logits = random_floats(tokens * vocab, 7, -8, 8);
  const std::vector<std::int32_t> targets{0, 500, 1000};
  std::vector<double> want_grad(logits.size());
  double want_loss = 0;
  for (int t = 0; t < tokens; ++t) {
    double z = 0;
    for (int v = 0; v < vocab; ++v)
      z += std::exp(double{logits[t * vocab + v]});
    want_loss += std::log(z) - logits[t * vocab + targets[t]];
    for (int v = 0; v < vocab; ++v) {
      want_grad[t * vocab + v] =
          2.0 * (std::exp(double{logits[t * vocab + v]}) / z - (v == targets[t] ? 1 : 0));
    }
  }
  const double loss = kern.softmax_cross_entropy(logits.data(), targets.data(), tokens, vocab, 2);
  INFO(kern.name << " kernels");
  CHECK(loss == Approx(want_loss).epsilon(1e-6));
  CHECK(worst_error(logits, want_grad, 1e-3) < 1e-4);
}

// Rounding to bf16 and fp16 against Eigen's own conversions (Eigen::bfloat16 and Eigen::half,
// round to nearest even), over magnitudes from fp16's subnormals to past its overflow, the
// tail of a vector, and the special values; and the dropout product.
void check_rounding(const CpuKernels& kern) {
  std::vector<float> x;
  for (const float scale : {1e-7f, 3e-5f, 1.0f, 300.0f, 7e4f}) {
    const auto v = random_floats(1003, 8, -scale, scale);
    x.insert(x.end(), v.begin(), v.end());
  }
  for (const float special : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f,
                              std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 1.00390625f})
    x.push_back(special);
  auto bf = x, half = x;
  kern.round_bf16(bf.data(), static_cast<std::int64_t>(bf.size()));
  kern.round_fp16(half.data(), static_cast<std::int64_t>(half.size()));
  INFO(kern.name << " kernels");
  int wrong_bf16 = 0, wrong_fp16 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto want_bf = static_cast<float>(Eigen::bfloat16(x[i]));
    const auto want_half = static_cast<float>(Eigen::half(x[i]));
    const bool nan = std::isnan(x[i]);
    wrong_bf16 += nan ? !std::isnan(bf[i]) : bf[i] != want_bf;
    wrong_fp16 += nan ? !std::isnan(half[i]) : half[i] != want_half;
  }
  CHECK(wrong_bf16 == 0);
  CHECK(wrong_fp16 == 0);
  std::vector<float> y = {1, -2, 3, 4};
  const std::vector<std::uint8_t> mask = {1, 0, 0, 1};
  kern.drop(y.data(), mask.data(), 4, 2.5f);
  CHECK(y == std::vector<float>{2.5f, 0, 0, 10});
  // Mask draws: the vectorised loop keeps what the scalar dropout_keep keeps.
  const std::uint64_t stream =
      dtplan::runtime::dropout_stream(7, 2, 5, 3, dtplan::runtime::DropoutSite::attention);
  std::vector<std::uint8_t> drawn(1003, 9);
  kern.dropout_draw(drawn.data(), stream, 17, 1003, 1677722);  // p = 0.1
  int differ = 0, kept = 0;
  for (std::size_t j = 0; j < drawn.size(); ++j) {
    differ += drawn[j] != (dtplan::runtime::dropout_keep(stream, 17 + j, 1677722) ? 1 : 0);
    kept += drawn[j];
  }
  CHECK(differ == 0);
  CHECK(kept > 850);  // about 903 of 1003 kept
  CHECK(kept < 950);
}

// The host's flags as the kernel reports them (Linux), independent of the dispatcher's
// compiler builtins.
std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line + " ";
  }
  return "";
}

bool has_flags(const std::string& flags, std::initializer_list<const char*> want) {
  for (const char* f : want) {
    if (flags.find(" " + std::string(f) + " ") == std::string::npos) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("CPU kernels: every build this host runs matches a double-precision reference") {
  const auto builds = dtplan::runtime::cpu_kernels_runnable();
  REQUIRE(!builds.empty());
  CHECK(std::string(builds.back()->name) == "baseline");
  for (const auto* k : builds) {
    check_gemm(*k, 37, 29, 53);    // odd sizes: every edge path of the blocked kernel
    check_gemm(*k, 130, 70, 300);  // more than one block along each side
    check_elementwise(*k);
    check_softmax_cross_entropy(*k);
    check_rounding(*k);
  }
}

TEST_CASE("CPU kernels: the widest build the host runs is chosen unless one is named") {
  using dtplan::runtime::choose_cpu_kernels;
  const auto builds = dtplan::runtime::cpu_kernels_runnable();
  CHECK(&choose_cpu_kernels(nullptr) == builds.front());
  CHECK(&choose_cpu_kernels("") == builds.front());
  CHECK(std::string(choose_cpu_kernels("baseline").name) == "baseline");
  CHECK_THROWS_WITH(choose_cpu_kernels("sse9"),
                    Catch::Contains("DTPLAN_CPU_KERNELS=sse9: not a kernel build") &&
                        Catch::Contains("baseline"));
#if defined(__x86_64__) && defined(__linux__)
  // On x86-64 Linux with GCC or Clang, CMake builds all three: the host's /proc/cpuinfo flags
  // decide which must come first.
  const std::string flags = cpu_flags();
  REQUIRE(!flags.empty());
  std::string widest = "baseline";
  if (has_flags(flags, {"avx2", "fma", "bmi1", "bmi2"})) widest = "avx2";
  if (widest == "avx2" &&
      has_flags(flags, {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"})) {
    widest = "avx512";
  }
  CHECK(std::string(builds.front()->name) == widest);
  if (widest != "avx512") {
    CHECK_THROWS_WITH(choose_cpu_kernels("avx512"), Catch::Contains("this CPU lacks"));
  }
#endif
}
