// Calibration: turning measured samples into a hardware profile's constants, by least squares
// (Eigen, relative error). Pure functions of the samples, so they are tested on synthetic data
// with known constants; the runtime's microbenchmarks (runtime/measure_profile.hpp) and
// whole-step runs (`dtplan calibrate`, `dtplan autotune`) supply the samples.
//
//   GEMM         time = s_per_flop x 2mnk + s_per_byte x 4(mk + kn + mn) + s_per_call
//   collective   time = latency_s + s_per_byte x bytes, one fit per (kind, communicator size)
//   rate curve   seconds per unit at each measured size
//   step         measured forward+backward = a x compute + b x collectives
//                measured sync+optimizer   = c x optimizer + b x its collectives
//                (a, b, c) = the step correction; a part too small to be seen in any sample
//                keeps its scale at 1.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dtplan/cost/hardware_profile.hpp"
#include "dtplan/cost/profile_step.hpp"

namespace dtplan::cost {

// Sets gemm_s_per_flop/byte/call and the fit's error from `samples` (kept in the profile).
// Negative byte or call coefficients (noise) are refitted without that term.
void fit_gemm(const std::vector<GemmSample>& samples, HardwareProfile& p);

// The attention fit (hardware_profile.hpp) over at least three samples; throws when there are
// fewer or the times are not positive.
AttentionFit fit_attention(const std::vector<AttentionSample>& samples);

// One CollectiveConstants per (kind, ranks) present, each from at least two sizes.
std::vector<CollectiveConstants> fit_collectives(const std::vector<CollectiveSample>& samples);

// (size, seconds per call) pairs -> seconds per unit at each size, ascending; repeated sizes
// keep the fastest. Throws naming `what` on empty input or non-positive values.
RateCurve rate_curve(std::vector<std::pair<double, double>> size_and_time, const char* what);

// The step sample of one measured step against its prediction's uncorrected parts.
StepSample step_sample(const std::string& label, const StepParts& predicted,
                       double measured_forward_backward_s, double measured_sync_optimizer_s);

// The least-squares step correction over `samples`; throws when there are none.
StepCorrection fit_step_correction(const std::vector<StepSample>& samples);

}  // namespace dtplan::cost
