// A hardware profile: constants measured on one machine for one runtime backend, from which the
// cost model predicts what dtplan-run will measure there. `dtplan calibrate` (or `dtplan-run
// --measure-profile`) writes one from microbenchmarks through the runtime and least-squares
// fits (cost/calibration.hpp); every command that predicts runtime steps reads it. The CPU
// profile bundled in data/profiles/ was measured on the project's development machine.
//
//   GEMM time        = s_per_flop x 2mnk + s_per_byte x 4(mk + kn + mn) + s_per_call
//                      (x the interpolated residual of the timed shapes, where that helps)
//   element-wise     = bytes x s_per_byte(bytes)            (rate curves: by working-set size,
//   softmax + loss   = elements x s_per_element(elements)    so that cache-resident and
//   MLP activation   = elements x s_per_element(elements)    DRAM-sized calls both hold)
//   optimizer        = parameters x s_per_param(parameters)
//   collective       = latency_s + s_per_byte x bytes       (per kind and communicator size)
//   step correction  = measured / predicted per part of the step (compute, collectives,
//                      optimizer), fitted over whole training steps (calibration runs and
//                      autotuning trials); 1 when no step was fitted.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
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

// Seconds per unit (byte, element, parameter) as a function of the call's size: measured at a
// few sizes, interpolated linearly in log(size), flat beyond the ends.
struct RatePoint {
  double size = 0;
  double s_per_unit = 0;
};
struct RateCurve {
  std::vector<RatePoint> points;  // ascending size
  // Throws naming `what` when the curve is empty.
  double s_per_unit(double size, const char* what) const;
  double time_s(double size, const char* what) const { return size * s_per_unit(size, what); }
};

struct CollectiveConstants {
  std::string kind;  // all_reduce, reduce_scatter, all_gather, broadcast, reduce
  std::int64_t ranks = 0;
  double latency_s = 0;
  double s_per_byte = 0;
  double rms_relative_error = 0;
};

// The samples behind the fits, kept in the profile with their residuals.
struct GemmSample {
  std::int64_t m = 0, n = 0, k = 0;  // C[m x n] = op(A)[m x k] op(B)[k x n]
  std::string form;                  // nt (forward), nn (input gradient), tn (weight gradient)
  double time_s = 0;
};
struct CollectiveSample {
  std::string kind;
  std::int64_t ranks = 0;
  std::int64_t bytes = 0;
  double time_s = 0;
};

// One measured training step against the uncorrected prediction of its parts.
struct StepSample {
  std::string label;
  double compute_s = 0;                // predicted forward + backward compute
  double collectives_s = 0;            // predicted collectives inside forward and backward
  double optimizer_s = 0;              // predicted optimizer compute
  double optimizer_collectives_s = 0;  // predicted collectives of the sync and optimizer phases
  double measured_compute_s = 0;       // measured forward + backward (with their collectives)
  double measured_optimizer_s = 0;     // measured gradient sync + optimizer
};

struct StepCorrection {
  double compute_scale = 1, collective_scale = 1, optimizer_scale = 1;
  std::int64_t samples = 0;
  double rms_relative_error = 0;  // of the corrected step times over the samples
};

// How far the measurements behind a profile can be trusted: the noise calibration measured
// on itself (profile_quality.hpp judges it). Profiles written before it have none.
struct ProfileQuality {
  std::int64_t benchmarks = 0;  // microbenchmarks timed by repeated calls
  // Coefficient of variation (standard deviation / mean) of one benchmark's repeated calls,
  // the slowest rank's: the median and the largest over the benchmarks.
  double median_spread = 0;
  double max_spread = 0;
  int cores = 0;                     // online logical CPUs of the machine
  double load_before = 0;            // /proc/loadavg, 1-minute average, before the first benchmark
  double load_after = 0;             // ... and after the last (the ranks' own work included)
  bool noisy = false;                // judged: true when any reason below applies
  std::vector<std::string> reasons;  // one sentence each, with the numbers
};

// Causal attention of one (sequence, head) through the runtime's own kernels (Device::attention
// and attention_backward), timed at a few sequence lengths and head widths and fitted as
//   seconds = c0 + c1 x seq^2 + c2 x seq^2 x head_dim
// (the calls, the softmax and masking over the seq x seq square, the products over it).
struct AttentionSample {
  std::int64_t seq = 0, head_dim = 0;
  double forward_s = 0, backward_s = 0;  // per (sequence, head)
};
struct AttentionFit {
  std::vector<double> forward, backward;  // c0 (s), c1 (s per score), c2 (s per score x width)
  double rms_relative_error = 0;          // the larger of the two fits' errors on their samples
  std::vector<AttentionSample> samples;
  double forward_s(std::int64_t seq, std::int64_t head_dim) const;
  double backward_s(std::int64_t seq, std::int64_t head_dim) const;
};

struct HardwareProfile {
  std::string backend;  // cpu | cuda
  std::string hardware;
  std::string created;
  std::map<std::string, std::string> versions;
  std::string gemm_dtype = "fp32";  // what the runtime computes in
  double gemm_s_per_flop = 0;
  double gemm_s_per_byte = 0;
  double gemm_s_per_call = 0;
  double gemm_rms_relative_error = 0;
  // When set, GEMM time is the linear fit times the measured/fitted ratio interpolated from
  // the timed shapes nearest in log(m, n, k) (inverse-distance weights over the 4 nearest).
  // Calibration sets it when that predicts held-out shapes better (leave-one-out) than the
  // fit alone: GPUs have tile and wave effects a 3-term fit cannot follow.
  bool gemm_interpolate = false;
  double gemm_loo_relative_error = 0;  // leave-one-out rms error of the model chosen
  RateCurve elementwise_s_per_byte;    // by bytes one call touches
  RateCurve softmax_s_per_element;     // softmax cross-entropy, by tokens x vocab
  // MLP activations are bound by tanh / exp, not by memory: their own rates.
  RateCurve activation_s_per_element;       // gelu, or swiglu when gated
  RateCurve activation_grad_s_per_element;  // its backward
  RateCurve adam_s_per_param;
  RateCurve sgd_s_per_param;
  // Dropout mask draws (Device::dropout_mask: one hash an element), by elements a call draws.
  // Absent in profiles calibrated before the runtime executed dropout: a draw is then priced
  // as a 9-byte element-wise pass.
  std::optional<RateCurve> dropout_draw_s_per_element;
  std::vector<CollectiveConstants> collectives;
  // Absent in profiles calibrated before the runtime executed attention: attention is then
  // priced from its GEMMs and the softmax and element-wise rates.
  std::optional<AttentionFit> attention;
  StepCorrection correction;
  std::vector<GemmSample> gemm_samples;
  std::vector<CollectiveSample> collective_samples;
  std::vector<StepSample> step_samples;
  std::optional<ProfileQuality> quality;  // absent in profiles written before it

  double gemm_time_s(const Gemm& g) const;
  double gemm_linear_s(std::int64_t m, std::int64_t n, std::int64_t k) const;
  // The interpolated measured/fitted ratio at (m, n, k); `leave_out_shape` ignores the
  // samples of exactly that shape (every form), for leave-one-out checks.
  double gemm_ratio(std::int64_t m, std::int64_t n, std::int64_t k,
                    bool leave_out_shape = false) const;
  // Throws naming the kind and ranks when the profile has no fit for them (over one rank
  // without a fit: nothing, or a reduce-scatter's copy of its buffer).
  double collective_time_s(const std::string& kind, std::int64_t ranks, std::int64_t bytes) const;
};

// The backends dtplan-run measures on; a profile or measurement names one of them.
const std::vector<std::string>& known_backends();
// "unknown backend 'tpu' (known: cpu, cuda)" for any other name; nullopt for a known one.
std::optional<std::string> backend_problem(const std::string& backend);

// The bundled profile of a backend and rank count, data/profiles/<backend>-<ranks>ranks.json;
// throws naming it and how to make one (dtplan calibrate) when there is none.
std::filesystem::path bundled_profile(const std::filesystem::path& data_dir,
                                      const std::string& backend, std::int64_t ranks);

nlohmann::json to_json(const HardwareProfile& p);
// Reads schema versions 1 (single rates) and 2 (with or without `quality`); throws naming the file
// and key on errors.
HardwareProfile load_profile(const std::filesystem::path& path);

}  // namespace dtplan::cost
