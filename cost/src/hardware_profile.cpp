// Hardware profiles: relative least-squares fits, time functions, JSON (see the header).
#include "dtplan/cost/hardware_profile.hpp"

#include <Eigen/Dense>
#include <cmath>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"

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

double HardwareProfile::gemm_time_s(const Gemm& g) const {
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n),
               k = static_cast<double>(g.k);
  const double one = gemm_s_per_flop * 2 * m * n * k +
                     gemm_s_per_byte * 4 * (m * k + k * n + m * n) + gemm_s_per_call;
  return one * static_cast<double>(g.count);
}

double HardwareProfile::collective_time_s(const std::string& kind, std::int64_t ranks,
                                          std::int64_t bytes) const {
  for (const auto& c : collectives) {
    if (c.kind == kind && c.ranks == ranks) {
      return c.latency_s + c.s_per_byte * static_cast<double>(bytes);
    }
  }
  throw Error("hardware profile (" + hardware + "): no measured " + kind + " over " +
              std::to_string(ranks) + " ranks; measure one with mpirun -np " +
              std::to_string(ranks) + " dtplan-run --measure-profile");
}

nlohmann::json to_json(const HardwareProfile& p) {
  auto coll = nlohmann::json::array();
  for (const auto& c : p.collectives) {
    coll.push_back({{"kind", c.kind},
                    {"ranks", c.ranks},
                    {"latency_s", c.latency_s},
                    {"s_per_byte", c.s_per_byte},
                    {"rms_relative_error", c.rms_relative_error}});
  }
  return {{"schema_version", 1},
          {"backend", p.backend},
          {"hardware", p.hardware},
          {"created", p.created},
          {"versions", p.versions},
          {"gemm",
           {{"s_per_flop", p.gemm_s_per_flop},
            {"s_per_byte", p.gemm_s_per_byte},
            {"s_per_call", p.gemm_s_per_call},
            {"rms_relative_error", p.gemm_rms_relative_error}}},
          {"elementwise_bytes_per_s", p.elementwise_bytes_per_s},
          {"s_per_softmax_element", p.s_per_softmax_element},
          {"s_per_activation_element", p.s_per_activation_element},
          {"s_per_activation_grad_element", p.s_per_activation_grad_element},
          {"adam_s_per_param", p.adam_s_per_param},
          {"sgd_s_per_param", p.sgd_s_per_param},
          {"collectives", coll}};
}

namespace {

double positive(const ObjectReader& r, const char* key) {
  const double v = r.number(key);
  if (!(v > 0)) r.fail(key, "must be positive");
  return v;
}

double non_negative(const ObjectReader& r, const char* key) {
  const double v = r.number(key);
  if (!(v >= 0)) r.fail(key, "must not be negative");
  return v;
}

}  // namespace

HardwareProfile load_profile(const std::filesystem::path& path) {
  const auto r = ObjectReader::root(read_json_file(path));
  r.check_schema_version(1);
  HardwareProfile p;
  p.backend = r.string("backend");
  p.hardware = r.string("hardware");
  p.created = r.string("created");
  const auto v = r.object("versions");
  for (const auto& [key, value] : r.value("versions").items())
    p.versions[key] = v.string(key);
  v.reject_unknown_keys();
  const auto g = r.object("gemm");
  p.gemm_s_per_flop = positive(g, "s_per_flop");
  p.gemm_s_per_byte = non_negative(g, "s_per_byte");
  p.gemm_s_per_call = non_negative(g, "s_per_call");
  p.gemm_rms_relative_error = g.number("rms_relative_error");
  g.reject_unknown_keys();
  p.elementwise_bytes_per_s = positive(r, "elementwise_bytes_per_s");
  p.s_per_softmax_element = positive(r, "s_per_softmax_element");
  p.s_per_activation_element = positive(r, "s_per_activation_element");
  p.s_per_activation_grad_element = positive(r, "s_per_activation_grad_element");
  p.adam_s_per_param = positive(r, "adam_s_per_param");
  p.sgd_s_per_param = positive(r, "sgd_s_per_param");
  for (const auto& c : r.objects("collectives")) {
    CollectiveConstants k;
    k.kind = c.string("kind");
    k.ranks = c.positive_integer("ranks");
    k.latency_s = non_negative(c, "latency_s");
    k.s_per_byte = non_negative(c, "s_per_byte");
    k.rms_relative_error = c.number("rms_relative_error");
    c.reject_unknown_keys();
    p.collectives.push_back(k);
  }
  r.reject_unknown_keys();
  return p;
}

}  // namespace dtplan::cost
