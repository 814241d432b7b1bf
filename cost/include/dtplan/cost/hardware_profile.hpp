// A hardware profile: constants measured on one machine for one runtime backend, from which the
// cost model predicts what dtplan-run will measure there. `dtplan-run --measure-profile`
// writes one (microbenchmarks through the runtime, least-squares fits); `dtplan validate
// --profile` and the calibration issue read it. The CPU profile bundled in data/profiles/ was
// measured on the project's development machine.
//
//   GEMM time        = s_per_flop x 2mnk + s_per_byte x 4(mk + kn + mn) + s_per_call
//   element-wise     = bytes / elementwise_bytes_per_s
//   softmax + loss   = s_per_softmax_element x tokens x vocab
//   MLP activation   = s_per_activation(_grad)_element x tokens x MLP width x layers
//   optimizer        = s_per_param_update x parameters updated (per optimizer kind)
//   collective       = latency_s + s_per_byte x bytes   (per kind and number of ranks)
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"

namespace dtplan::cost {

struct LinearFit {
  std::vector<double> coefficients;
  double rms_relative_error = 0;  // of the fit over its own samples
  std::int64_t samples = 0;
};

// Least squares (Eigen, column-pivoting QR) of y ~ X c, with each row weighted by 1 / y so
// that the fit minimises relative error. Throws if there are fewer rows than columns.
LinearFit fit_relative(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

struct CollectiveConstants {
  std::string kind;  // all_reduce, reduce_scatter, all_gather, broadcast, reduce
  std::int64_t ranks = 0;
  double latency_s = 0;
  double s_per_byte = 0;
  double rms_relative_error = 0;
};

struct HardwareProfile {
  std::string backend;  // cpu | cuda
  std::string hardware;
  std::string created;
  std::map<std::string, std::string> versions;
  double gemm_s_per_flop = 0;
  double gemm_s_per_byte = 0;
  double gemm_s_per_call = 0;
  double gemm_rms_relative_error = 0;
  double elementwise_bytes_per_s = 0;
  double s_per_softmax_element = 0;
  // MLP activations are bound by tanh / exp, not by memory: their own rates.
  double s_per_activation_element = 0;       // gelu, or swiglu when gated
  double s_per_activation_grad_element = 0;  // its backward
  double adam_s_per_param = 0;
  double sgd_s_per_param = 0;
  std::vector<CollectiveConstants> collectives;

  double gemm_time_s(const Gemm& g) const;
  // Throws naming the kind and ranks when the profile has no fit for them.
  double collective_time_s(const std::string& kind, std::int64_t ranks, std::int64_t bytes) const;
};

nlohmann::json to_json(const HardwareProfile& p);
HardwareProfile load_profile(const std::filesystem::path& path);

}  // namespace dtplan::cost
