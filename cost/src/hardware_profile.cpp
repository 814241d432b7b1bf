// Hardware profiles: relative least-squares fits, time functions, JSON (see the header).
#include "dtplan/cost/hardware_profile.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan::cost {

LinearFit fit_relative(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  const auto rows = static_cast<Eigen::Index>(y.size());
  const auto cols = x.empty() ? 0 : static_cast<Eigen::Index>(x.front().size());
  if (rows < cols || cols == 0 || x.size() != y.size()) {
    throw Error("fit: " + std::to_string(rows) + " samples for " + std::to_string(cols) +
                " unknowns");
  }
  Eigen::MatrixXd a(rows, cols);
  Eigen::VectorXd b(rows);
  for (Eigen::Index r = 0; r < rows; ++r) {
    const double w = 1.0 / y[static_cast<std::size_t>(r)];  // relative error
    for (Eigen::Index c = 0; c < cols; ++c) {
      a(r, c) = x[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] * w;
    }
    b(r) = 1.0;
  }
  const Eigen::VectorXd c = a.colPivHouseholderQr().solve(b);
  LinearFit fit;
  fit.coefficients.assign(c.data(), c.data() + cols);
  fit.rms_relative_error = std::sqrt((a * c - b).squaredNorm() / static_cast<double>(rows));
  fit.samples = rows;
  return fit;
}

double RateCurve::s_per_unit(double size, const char* what) const {
  if (points.empty()) throw Error(std::string("hardware profile: no measured rate for ") + what);
  if (size <= points.front().size) return points.front().s_per_unit;
  if (size >= points.back().size) return points.back().s_per_unit;
  std::size_t i = 1;
  while (points[i].size < size)
    ++i;
  const auto& a = points[i - 1];
  const auto& b = points[i];
  const double f = std::log(size / a.size) / std::log(b.size / a.size);
  return a.s_per_unit + f * (b.s_per_unit - a.s_per_unit);
}

double HardwareProfile::gemm_linear_s(std::int64_t mi, std::int64_t ni, std::int64_t ki) const {
  const double m = static_cast<double>(mi), n = static_cast<double>(ni),
               k = static_cast<double>(ki);
  return gemm_s_per_flop * 2 * m * n * k + gemm_s_per_byte * 4 * (m * k + k * n + m * n) +
         gemm_s_per_call;
}

namespace {

double attention_time(const std::vector<double>& c, std::int64_t seq, std::int64_t head_dim) {
  const double squares = static_cast<double>(seq) * static_cast<double>(seq);
  return c.at(0) + c.at(1) * squares + c.at(2) * squares * static_cast<double>(head_dim);
}

}  // namespace

double AttentionFit::forward_s(std::int64_t seq, std::int64_t head_dim) const {
  return attention_time(forward, seq, head_dim);
}

double AttentionFit::backward_s(std::int64_t seq, std::int64_t head_dim) const {
  return attention_time(backward, seq, head_dim);
}

double HardwareProfile::gemm_ratio(std::int64_t m, std::int64_t n, std::int64_t k,
                                   bool leave_out_shape) const {
  // (distance in log2 space, log of measured / fitted) of every sample but `skip`.
  std::vector<std::pair<double, double>> near;
  for (const auto& s : gemm_samples) {
    if (leave_out_shape && s.m == m && s.n == n && s.k == k) continue;
    const double dm = std::log2(double(m) / double(s.m)), dn = std::log2(double(n) / double(s.n)),
                 dk = std::log2(double(k) / double(s.k));
    near.push_back({std::sqrt(dm * dm + dn * dn + dk * dk),
                    std::log(s.time_s / gemm_linear_s(s.m, s.n, s.k))});
  }
  if (near.empty()) return 1;
  const std::size_t take = std::min<std::size_t>(4, near.size());
  std::partial_sort(near.begin(), near.begin() + static_cast<std::ptrdiff_t>(take), near.end());
  double wsum = 0, lsum = 0;
  for (std::size_t i = 0; i < take; ++i) {
    // Shapes timed exactly (in several forms) are averaged; otherwise 1 / d^2 weights.
    const double w = near[i].first < 1e-9 ? 1e18 : 1.0 / (near[i].first * near[i].first);
    wsum += w;
    lsum += w * near[i].second;
  }
  return std::exp(lsum / wsum);
}

double HardwareProfile::gemm_time_s(const Gemm& g) const {
  double one = gemm_linear_s(g.m, g.n, g.k);
  if (gemm_interpolate) one *= gemm_ratio(g.m, g.n, g.k);
  return one * static_cast<double>(g.count);
}

double HardwareProfile::collective_time_s(const std::string& kind, std::int64_t ranks,
                                          std::int64_t bytes) const {
  for (const auto& c : collectives) {
    if (c.kind == kind && c.ranks == ranks) {
      return c.latency_s + c.s_per_byte * static_cast<double>(bytes);
    }
  }
  // A profile of more ranks has no one-rank fit (one-rank profiles measure one). Over one rank
  // nothing crosses a link: an in-place call returns at once (Open MPI's all-reduce on one rank:
  // 30-40 ns in dtplan-run's records of a data-parallel group of one beside 2 tensor-parallel
  // ranks), a reduce-scatter copies its input to its output (27 us for 328,752 B in the same
  // records), priced as an element-wise pass reading and writing the buffer.
  if (ranks == 1) {
    const auto b = static_cast<double>(bytes);
    return kind == "reduce_scatter" ? elementwise_s_per_byte.time_s(2 * b, "element-wise") : 0;
  }
  throw Error("hardware profile (" + hardware + "): no measured " + kind + " over " +
              std::to_string(ranks) + " ranks; calibrate a profile over them ({np} " +
              std::to_string(ranks) + ")");
}

const std::vector<std::string>& known_backends() {
  static const std::vector<std::string> kBackends{"cpu", "cuda"};
  return kBackends;
}

std::optional<std::string> backend_problem(const std::string& backend) {
  const auto& known = known_backends();
  if (std::find(known.begin(), known.end(), backend) != known.end()) return std::nullopt;
  return unknown_name_message("backend", backend, known);
}

std::filesystem::path bundled_profile(const std::filesystem::path& data_dir,
                                      const std::string& backend, std::int64_t ranks) {
  if (const auto problem = backend_problem(backend)) throw Error(*problem);
  const auto n = std::to_string(ranks);
  auto p = data_dir / "profiles" / (backend + "-" + n + "ranks.json");
  if (!std::filesystem::exists(p)) {
    throw Error("no bundled hardware profile " + p.string() + " for " + backend + " with " + n +
                " ranks; calibrate one (dtplan calibrate {backend} " + backend + " {np} " + n +
                " {out} profile.json) and pass it as {profile}");
  }
  return p;
}

namespace {

nlohmann::json curve_json(const RateCurve& c) {
  auto a = nlohmann::json::array();
  for (const auto& p : c.points)
    a.push_back({{"size", p.size}, {"s_per_unit", p.s_per_unit}});
  return a;
}

nlohmann::json samples_json(const HardwareProfile& p) {
  auto gemm = nlohmann::json::array();
  for (const auto& g : p.gemm_samples) {
    // The model in use, this shape left out when it interpolates (an honest residual).
    const double fitted = p.gemm_linear_s(g.m, g.n, g.k) *
                          (p.gemm_interpolate ? p.gemm_ratio(g.m, g.n, g.k, true) : 1.0);
    gemm.push_back({{"m", g.m},
                    {"n", g.n},
                    {"k", g.k},
                    {"form", g.form},
                    {"measured_s", g.time_s},
                    {"fitted_s", fitted}});
  }
  auto coll = nlohmann::json::array();
  for (const auto& c : p.collective_samples) {
    coll.push_back({{"kind", c.kind},
                    {"ranks", c.ranks},
                    {"bytes", c.bytes},
                    {"measured_s", c.time_s},
                    {"fitted_s", p.collective_time_s(c.kind, c.ranks, c.bytes)}});
  }
  auto steps = nlohmann::json::array();
  const auto& k = p.correction;
  for (const auto& t : p.step_samples) {
    const double fitted = k.compute_scale * t.compute_s +
                          k.collective_scale * (t.collectives_s + t.optimizer_collectives_s) +
                          k.optimizer_scale * t.optimizer_s;
    steps.push_back({{"label", t.label},
                     {"compute_s", t.compute_s},
                     {"collectives_s", t.collectives_s},
                     {"optimizer_s", t.optimizer_s},
                     {"optimizer_collectives_s", t.optimizer_collectives_s},
                     {"measured_compute_s", t.measured_compute_s},
                     {"measured_optimizer_s", t.measured_optimizer_s},
                     {"fitted_step_s", fitted}});
  }
  return {{"gemm", gemm}, {"collectives", coll}, {"steps", steps}};
}

}  // namespace

// Everything but the quality section.
static nlohmann::json fitted_json(const HardwareProfile& p) {
  auto coll = nlohmann::json::array();
  for (const auto& c : p.collectives) {
    coll.push_back({{"kind", c.kind},
                    {"ranks", c.ranks},
                    {"latency_s", c.latency_s},
                    {"s_per_byte", c.s_per_byte},
                    {"rms_relative_error", c.rms_relative_error}});
  }
  const auto& k = p.correction;
  return {{"schema_version", 2},
          {"backend", p.backend},
          {"hardware", p.hardware},
          {"created", p.created},
          {"versions", p.versions},
          {"gemm",
           {{"dtype", p.gemm_dtype},
            {"s_per_flop", p.gemm_s_per_flop},
            {"s_per_byte", p.gemm_s_per_byte},
            {"s_per_call", p.gemm_s_per_call},
            {"rms_relative_error", p.gemm_rms_relative_error},
            {"interpolate", p.gemm_interpolate},
            {"loo_relative_error", p.gemm_loo_relative_error}}},
          {"elementwise_s_per_byte", curve_json(p.elementwise_s_per_byte)},
          {"softmax_s_per_element", curve_json(p.softmax_s_per_element)},
          {"activation_s_per_element", curve_json(p.activation_s_per_element)},
          {"activation_grad_s_per_element", curve_json(p.activation_grad_s_per_element)},
          {"adam_s_per_param", curve_json(p.adam_s_per_param)},
          {"sgd_s_per_param", curve_json(p.sgd_s_per_param)},
          {"collectives", coll},
          {"step_correction",
           {{"compute_scale", k.compute_scale},
            {"collective_scale", k.collective_scale},
            {"optimizer_scale", k.optimizer_scale},
            {"samples", k.samples},
            {"rms_relative_error", k.rms_relative_error}}},
          {"residuals", samples_json(p)}};
}

nlohmann::json to_json(const HardwareProfile& p) {
  auto j = fitted_json(p);
  if (p.dropout_draw_s_per_element) {
    j["dropout_draw_s_per_element"] = curve_json(*p.dropout_draw_s_per_element);
  }
  if (p.attention) {
    const auto& a = *p.attention;
    auto samples = nlohmann::json::array();
    for (const auto& s : a.samples) {
      samples.push_back({{"seq", s.seq},
                         {"head_dim", s.head_dim},
                         {"forward_s", s.forward_s},
                         {"backward_s", s.backward_s}});
    }
    j["attention"] = {{"forward", a.forward},
                      {"backward", a.backward},
                      {"rms_relative_error", a.rms_relative_error},
                      {"samples", samples}};
  }
  if (p.quality) {
    const auto& q = *p.quality;
    j["quality"] = {{"benchmarks", q.benchmarks},
                    {"median_spread", q.median_spread},
                    {"max_spread", q.max_spread},
                    {"cores", q.cores},
                    {"load_before", q.load_before},
                    {"load_after", q.load_after},
                    {"noisy", q.noisy},
                    {"reasons", q.reasons}};
  }
  return j;
}

namespace {

// A measured rate (bytes or elements per second) and a fit's relative error.
constexpr NumberRange kRate = NumberRange::positive(1e18);
constexpr NumberRange kRelativeError = NumberRange::non_negative(1e3);

// Version 2: [{size, s_per_unit}...] ascending. Version 1: one number under `v1_key`, seconds
// per unit (or units per second when `v1_inverse`).
RateCurve read_curve(const ObjectReader& r, const char* key, const char* v1_key, bool v1_inverse) {
  RateCurve c;
  const bool v1 = r.has(v1_key) && r.value(v1_key).is_number();
  if (v1) {
    const double v = r.number(v1_key, v1_inverse ? kRate : kSecondsPerUnit);
    c.points.push_back({1, v1_inverse ? 1.0 / v : v});
    return c;
  }
  for (const auto& p : r.objects(key)) {
    RatePoint pt{p.number("size", NumberRange::positive(1e18)),
                 p.number("s_per_unit", kSecondsPerUnit)};
    if (!c.points.empty() && pt.size <= c.points.back().size) p.fail("size", "sizes must ascend");
    p.reject_unknown_keys();
    c.points.push_back(pt);
  }
  if (c.points.empty()) r.fail(key, "needs at least one point");
  return c;
}

void read_collectives(const ObjectReader& r, HardwareProfile& p) {
  for (const auto& c : r.objects("collectives")) {
    CollectiveConstants k;
    k.kind = c.string("kind");
    k.ranks = c.positive_integer("ranks");
    k.latency_s = c.number("latency_s", kSeconds);
    k.s_per_byte = c.number("s_per_byte", NumberRange::non_negative(1.0));
    k.rms_relative_error = c.number("rms_relative_error", kRelativeError);
    c.reject_unknown_keys();
    p.collectives.push_back(k);
  }
}

void read_correction(const ObjectReader& r, HardwareProfile& p) {
  const auto c = r.optional_object("step_correction");
  if (!c) return;
  auto& k = p.correction;
  k.compute_scale = c->number("compute_scale", kFactor);
  k.collective_scale = c->number("collective_scale", kFactor);
  k.optimizer_scale = c->number("optimizer_scale", kFactor);
  k.samples = c->integer("samples", 0, 1'000'000);
  k.rms_relative_error = c->number("rms_relative_error", kRelativeError);
  c->reject_unknown_keys();
}

void read_residuals(const ObjectReader& r, HardwareProfile& p) {
  const auto res = r.optional_object("residuals");
  if (!res) return;
  for (const auto& g : res->objects("gemm")) {
    p.gemm_samples.push_back({g.positive_integer("m"), g.positive_integer("n"),
                              g.positive_integer("k"), g.string("form"),
                              g.number("measured_s", kPositiveSeconds)});
    (void)g.number("fitted_s");
    g.reject_unknown_keys();
  }
  for (const auto& c : res->objects("collectives")) {
    p.collective_samples.push_back({c.string("kind"), c.positive_integer("ranks"),
                                    c.positive_integer("bytes"),
                                    c.number("measured_s", kPositiveSeconds)});
    (void)c.number("fitted_s");
    c.reject_unknown_keys();
  }
  for (const auto& t : res->objects("steps")) {
    p.step_samples.push_back(
        {t.string("label"), t.number("compute_s", kSeconds), t.number("collectives_s", kSeconds),
         t.number("optimizer_s", kSeconds), t.number("optimizer_collectives_s", kSeconds),
         t.number("measured_compute_s", kPositiveSeconds),
         t.number("measured_optimizer_s", kSeconds)});
    (void)t.number("fitted_step_s");
    t.reject_unknown_keys();
  }
  res->reject_unknown_keys();
}

std::vector<double> read_coefficients(const ObjectReader& a, const char* key) {
  const auto& v = a.value(key);
  if (!v.is_array() || v.size() != 3) a.fail(key, "must be three coefficients (c0, c1, c2)");
  std::vector<double> out;
  for (const auto& c : v) {
    if (!c.is_number() || !(c.get<double>() >= 0) || !std::isfinite(c.get<double>())) {
      a.fail(key, "coefficients must be finite and not negative");
    }
    out.push_back(c.get<double>());
  }
  return out;
}

void read_attention(const ObjectReader& r, HardwareProfile& p) {
  const auto a = r.optional_object("attention");
  if (!a) return;  // calibrated before the runtime executed attention
  AttentionFit f;
  f.forward = read_coefficients(*a, "forward");
  f.backward = read_coefficients(*a, "backward");
  f.rms_relative_error = a->number("rms_relative_error", kRelativeError);
  for (const auto& s : a->objects("samples")) {
    f.samples.push_back({s.positive_integer("seq"), s.positive_integer("head_dim"),
                         s.number("forward_s", kPositiveSeconds),
                         s.number("backward_s", kPositiveSeconds)});
    s.reject_unknown_keys();
  }
  a->reject_unknown_keys();
  p.attention = f;
}

void read_quality(const ObjectReader& r, HardwareProfile& p) {
  const auto q = r.optional_object("quality");
  if (!q) return;  // written before calibration judged its noise
  ProfileQuality out;
  out.benchmarks = q->integer("benchmarks");
  if (out.benchmarks < 0) q->fail("benchmarks", "must not be negative");
  // Spreads are relative (0.1 = 10%); load averages are runnable processes.
  constexpr NumberRange kLoad = NumberRange::non_negative(1e6);
  out.median_spread = q->number("median_spread", kRelativeError);
  out.max_spread = q->number("max_spread", kRelativeError);
  out.cores = static_cast<int>(q->positive_integer("cores"));
  out.load_before = q->number("load_before", kLoad);
  out.load_after = q->number("load_after", kLoad);
  out.noisy = q->boolean("noisy");
  out.reasons = q->strings("reasons");
  q->reject_unknown_keys();
  p.quality = out;
}

}  // namespace

HardwareProfile load_profile(const std::filesystem::path& path) {
  const auto r = ObjectReader::root(read_json_file(path));
  r.check_schema_version(2);
  HardwareProfile p;
  p.backend = r.string("backend");
  if (const auto problem = backend_problem(p.backend)) r.fail("backend", *problem);
  p.hardware = r.string("hardware");
  p.created = r.string("created");
  const auto v = r.object("versions");
  for (const auto& [key, value] : r.value("versions").items())
    p.versions[key] = v.string(key);
  v.reject_unknown_keys();
  const auto g = r.object("gemm");
  if (g.has("dtype")) p.gemm_dtype = g.string("dtype");
  p.gemm_s_per_flop = g.number("s_per_flop", kSecondsPerUnit);
  p.gemm_s_per_byte = g.number("s_per_byte", NumberRange::non_negative(1.0));
  p.gemm_s_per_call = g.number("s_per_call", kSeconds);
  p.gemm_rms_relative_error = g.number("rms_relative_error", kRelativeError);
  if (g.has("interpolate")) p.gemm_interpolate = g.boolean("interpolate");
  if (g.has("loo_relative_error")) {
    p.gemm_loo_relative_error = g.number("loo_relative_error", kRelativeError);
  }
  g.reject_unknown_keys();
  p.elementwise_s_per_byte =
      read_curve(r, "elementwise_s_per_byte", "elementwise_bytes_per_s", true);
  p.softmax_s_per_element = read_curve(r, "softmax_s_per_element", "s_per_softmax_element", false);
  p.activation_s_per_element =
      read_curve(r, "activation_s_per_element", "s_per_activation_element", false);
  p.activation_grad_s_per_element =
      read_curve(r, "activation_grad_s_per_element", "s_per_activation_grad_element", false);
  p.adam_s_per_param = read_curve(r, "adam_s_per_param", "adam_s_per_param", false);
  p.sgd_s_per_param = read_curve(r, "sgd_s_per_param", "sgd_s_per_param", false);
  if (r.has("dropout_draw_s_per_element")) {  // calibrated since the runtime executes dropout
    p.dropout_draw_s_per_element = read_curve(r, "dropout_draw_s_per_element", "", false);
  }
  read_collectives(r, p);
  read_correction(r, p);
  read_residuals(r, p);
  read_quality(r, p);
  read_attention(r, p);
  r.reject_unknown_keys();
  return p;
}

}  // namespace dtplan::cost
