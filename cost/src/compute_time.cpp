// FLOPs and bytes of forward, backward and recomputation, turned into time on one GPU.
//
// A GEMM of (M x K) by (K x N): 2MKN FLOPs, e(MK + KN + MN) bytes, and
//     time = max(FLOPs / (peak x gemm_efficiency), bytes / (HBM x memory_efficiency))
//            + kernel_overhead.
// Its backward is two GEMMs of the same size (input and weight gradients). Attention's core
// (QK^T and AV: 4 b s^2 q FLOPs, halved by causal masking in FlashAttention) runs, fused, at
// its kernel's measured curve by sequence length and head dimension (AttentionCurve), eager at
// attention_efficiency; FlashAttention's backward does 2.5x the forward work (it recomputes the
// scores), eager attention's 2x. Element-wise kernels (norms, residual adds, activations,
// rotary embedding, dropout, softmax of eager attention, the loss) move bytes at HBM speed.
#include "dtplan/cost/compute_time.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/cost/numeric_recipe.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/model/units.hpp"
#include "per_op_policy.hpp"

namespace dtplan::cost {

namespace {

struct ConstantField {
  const char* key;
  double ComputeConstants::*field;
  double min;
  double max;
};

constexpr ConstantField kFields[] = {
    {"gemm_efficiency", &ComputeConstants::gemm_efficiency, 1e-3, 1.0},
    {"hopper_gemm_efficiency", &ComputeConstants::hopper_gemm_efficiency, 0.0, 1.0},
    {"fp8_gemm_efficiency", &ComputeConstants::fp8_gemm_efficiency, 1e-3, 1.0},
    {"fp8_blockwise_gemm_efficiency", &ComputeConstants::fp8_blockwise_gemm_efficiency, 1e-3, 1.0},
    {"mxfp8_gemm_efficiency", &ComputeConstants::mxfp8_gemm_efficiency, 1e-3, 1.0},
    {"hopper_odd_gemm_forward_efficiency", &ComputeConstants::hopper_odd_gemm_forward_efficiency,
     0.0, 1.0},
    {"hopper_odd_gemm_gradient_efficiency", &ComputeConstants::hopper_odd_gemm_gradient_efficiency,
     0.0, 1.0},
    {"hopper_even_unaligned_gemm_efficiency",
     &ComputeConstants::hopper_even_unaligned_gemm_efficiency, 0.0, 1.0},
    {"gemm_reference_mamf_fraction", &ComputeConstants::gemm_reference_mamf_fraction, 0.0, 1.0},
    {"hopper_gemm_reference_mamf_fraction", &ComputeConstants::hopper_gemm_reference_mamf_fraction,
     0.0, 1.0},
    {"attention_efficiency", &ComputeConstants::attention_efficiency, 1e-3, 1.0},
    {"memory_efficiency", &ComputeConstants::memory_efficiency, 1e-3, 1.0},
    {"widening_copy_memory_efficiency", &ComputeConstants::widening_copy_memory_efficiency, 0.0,
     1.0},
    {"mixed_type_memory_efficiency", &ComputeConstants::mixed_type_memory_efficiency, 0.0, 1.0},
    {"fp32_attention_forward_efficiency", &ComputeConstants::fp32_attention_forward_efficiency, 0.0,
     1.0},
    {"fp32_attention_backward_efficiency", &ComputeConstants::fp32_attention_backward_efficiency,
     0.0, 1.0},
    {"kernel_overhead_s", &ComputeConstants::kernel_overhead_s, 0.0, 1.0},
    {"elementwise_kernels_per_layer", &ComputeConstants::elementwise_kernels_per_layer, 0.0, 1e4},
    {"eager_forward_host_s_per_kernel", &ComputeConstants::eager_forward_host_s_per_kernel, 0.0,
     1e-2},
    {"autograd_backward_host_s_per_kernel", &ComputeConstants::autograd_backward_host_s_per_kernel,
     0.0, 1e-2},
    {"fsdp_forward_host_s_per_module", &ComputeConstants::fsdp_forward_host_s_per_module, 0.0, 1.0},
    {"fsdp_backward_host_s_per_module", &ComputeConstants::fsdp_backward_host_s_per_module, 0.0,
     1.0},
    {"fsdp_optimizer_host_s_per_tensor", &ComputeConstants::fsdp_optimizer_host_s_per_tensor, 0.0,
     1e-1},
    {"overlap_compute_slowdown", &ComputeConstants::overlap_compute_slowdown, 0.0, 1.0},
    {"cpu_optimizer_bytes_per_s", &ComputeConstants::cpu_optimizer_bytes_per_s, 1e6, 1e15},
    {"host_transfer_efficiency", &ComputeConstants::host_transfer_efficiency, 1e-3, 1.0},
};

void set_field(ComputeConstants& k, std::string_view key, double value, const std::string& where) {
  for (const auto& f : kFields) {
    if (key != f.key) continue;
    if (!(value >= f.min && value <= f.max)) {
      throw Error(where + ": " + std::string(key) + " must be in [" + std::to_string(f.min) + ", " +
                  std::to_string(f.max) + "]");
    }
    k.*f.field = value;
    return;
  }
  throw Error(where + ": " +
              unknown_name_message("compute constant", key, compute_constant_keys()));
}

// Keys of data/compute.json that later versions replaced, with what replaced them.
void reject_retired_keys(const ObjectReader& root) {
  for (const char* key :
       {"hopper_flash_attention_efficiency", "hopper_fused_attention_efficiency"}) {
    if (root.has(key)) {
      root.fail(key,
                "was replaced by attention_kernels: measured curves by kernel, GPU architecture "
                "and head dimension (docs/step-time-model.md)");
    }
  }
}

AttentionCurve read_curve(const ObjectReader& r) {
  AttentionCurve c;
  const auto kernel = r.string("kernel");
  try {
    c.kernel = parse_attention_kernel(kernel);
  } catch (const Error& e) {
    r.fail("kernel", e.what());
  }
  if (c.kernel == AttentionKernel::framework) {
    r.fail("kernel", "a curve belongs to one kernel, not to 'framework'");
  }
  c.architecture = r.string("architecture");
  if (c.architecture.empty()) r.fail("architecture", "must name a GPU architecture");
  c.head_dim = r.number("head_dim", {1.0, 1024.0});
  c.plateau_efficiency = r.number("plateau_efficiency", {1e-3, 1.0});
  c.half_efficiency_tokens = r.number("half_efficiency_tokens", {0.0, 1e7});
  if (r.has("forward_plateau_efficiency")) {
    c.forward_plateau_efficiency = r.number("forward_plateau_efficiency", {1e-3, 1.0});
    c.forward_half_efficiency_tokens = r.number("forward_half_efficiency_tokens", {0.0, 1e7});
  }
  c.source = r.string("source");
  r.reject_unknown_keys();
  return c;
}

std::vector<AttentionCurve> read_curves(const ObjectReader& root) {
  std::vector<AttentionCurve> curves;
  if (!root.has("attention_kernels")) return curves;
  for (const auto& r : root.objects("attention_kernels")) {
    auto c = read_curve(r);
    for (const auto& other : curves) {
      if (other.kernel == c.kernel && other.architecture == c.architecture &&
          other.head_dim == c.head_dim) {
        r.fail_here("a second curve for " + std::string(name_of(c.kernel)) + " on " +
                    c.architecture + " at head dimension " + std::to_string(c.head_dim));
      }
    }
    curves.push_back(std::move(c));
  }
  return curves;
}

nlohmann::json curve_json(const AttentionCurve& c) {
  nlohmann::json j{{"kernel", name_of(c.kernel)},
                   {"architecture", c.architecture},
                   {"head_dim", c.head_dim},
                   {"plateau_efficiency", c.plateau_efficiency},
                   {"half_efficiency_tokens", c.half_efficiency_tokens},
                   {"source", c.source}};
  if (c.forward_plateau_efficiency > 0) {
    j["forward_plateau_efficiency"] = c.forward_plateau_efficiency;
    j["forward_half_efficiency_tokens"] = c.forward_half_efficiency_tokens;
  }
  return j;
}

}  // namespace

std::vector<std::string> compute_constant_keys() {
  std::vector<std::string> keys;
  for (const auto& f : kFields)
    keys.emplace_back(f.key);
  return keys;
}

nlohmann::json to_json(const ComputeConstants& k) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : kFields)
    j[f.key] = k.*f.field;
  j["attention_kernels"] = nlohmann::json::array();
  for (const auto& c : k.attention_kernels)
    j["attention_kernels"].push_back(curve_json(c));
  return j;
}

ComputeConstants load_compute_constants(const std::filesystem::path& path) {
  const auto root = ObjectReader::root(read_json_file(path));
  root.check_schema_version(1);
  reject_retired_keys(root);
  ComputeConstants k;
  for (const auto& f : kFields)
    set_field(k, f.key, root.number(f.key), root.location(f.key));
  k.attention_kernels = read_curves(root);
  root.reject_unknown_keys();
  return k;
}

void apply_compute_override(ComputeConstants& k, std::string_view assignment) {
  const std::string where = "{compute} '" + std::string(assignment) + "'";
  const auto a = parse_assignment(assignment, where);
  set_field(k, a.key, a.value, where);
}

double compute_slowdown(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                        const GpuSpec& slow, const ComputeConstants& k) {
  const auto ours = estimate_compute(m, c, gpu, k);
  const auto theirs = estimate_compute(m, c, slow, k);
  return (theirs.forward_s + theirs.backward_s) / (ours.forward_s + ours.backward_s);
}

AttentionKernel kernel_of(AttentionKernel requested, AttentionLibrary lib) {
  if (requested != AttentionKernel::framework) return requested;
  return lib == AttentionLibrary::transformer_engine ? AttentionKernel::cudnn
                                                     : AttentionKernel::flash_attn_2;
}

namespace {

// One curve's plateau and half-efficiency tokens, of the forward + backward or the forward.
struct CurvePoint {
  double plateau = 0;
  double half_tokens = 0;
};

CurvePoint point_of(const AttentionCurve& c, bool forward) {
  if (forward && c.forward_plateau_efficiency > 0) {
    return {c.forward_plateau_efficiency, c.forward_half_efficiency_tokens};
  }
  return {c.plateau_efficiency, c.half_efficiency_tokens};
}

double curve_efficiency(const CurvePoint& p, double seq_tokens) {
  return p.plateau * seq_tokens / (seq_tokens + p.half_tokens);
}

// `fitted` x (this GPU's MAMF fraction / the reference GPU's), or `fitted` where either is
// unknown.
double scaled_by_mamf(double fitted, double mamf_flops, double peak_flops, double reference) {
  if (!(mamf_flops > 0 && peak_flops > 0 && reference > 0)) return fitted;
  return fitted * (mamf_flops / peak_flops) / reference;
}

// attention_efficiency (eager attention's batched GEMMs; fused attention where no curve was
// measured) was set on the A100: a GPU whose matmuls reach less of its peak gets less of it.
double attention_fallback(const GpuSpec& gpu, const ComputeConstants& k) {
  return scaled_by_mamf(k.attention_efficiency, gpu.mamf_bf16_flops, gpu.peak_flops.bf16,
                        k.gemm_reference_mamf_fraction);
}

double kernel_efficiency(const GpuSpec& gpu, const ComputeConstants& k, AttentionKernel requested,
                         AttentionLibrary lib, double seq_tokens, double head_dim, bool forward) {
  const auto kernel = kernel_of(requested, lib);
  const AttentionCurve* below = nullptr;  // the nearest curve at or below head_dim
  const AttentionCurve* above = nullptr;  // ... above it
  for (const auto& c : k.attention_kernels) {
    if (c.kernel != kernel || c.architecture != gpu.architecture) continue;
    if (c.head_dim <= head_dim && (!below || c.head_dim > below->head_dim)) below = &c;
    if (c.head_dim > head_dim && (!above || c.head_dim < above->head_dim)) above = &c;
  }
  if (!below && !above) {
    if (requested == AttentionKernel::framework) return attention_fallback(gpu, k);
    throw Error("attention kernel " + std::string(name_of(kernel)) + " has no measured curve for " +
                gpu.name + " (architecture '" + gpu.architecture +
                "') in attention_kernels of compute.json: choose another {attention-kernel} "
                "or add its curve");
  }
  if (!below || !above)
    return curve_efficiency(point_of(below ? *below : *above, forward), seq_tokens);
  const auto lo = point_of(*below, forward);
  const auto hi = point_of(*above, forward);
  const double w = (head_dim - below->head_dim) / (above->head_dim - below->head_dim);
  return curve_efficiency({lo.plateau + w * (hi.plateau - lo.plateau),
                           lo.half_tokens + w * (hi.half_tokens - lo.half_tokens)},
                          seq_tokens);
}

}  // namespace

double gemm_efficiency_of(const GpuSpec& gpu, const ComputeConstants& k, Precision p,
                          Fp8Recipe fp8) {
  // The FP8 fits were made on Hopper: they scale by the GPU's bf16 MAMF over the H100's, as
  // a GPU whose bf16 GEMMs fall short of its peak (MI300X: half) does not run FP8 ones at the
  // Hopper fraction either. Transformer Engine's B300 benchmark: 0.652 measured, 0.636 so.
  const auto hopper_scaled = [&](double fitted) {
    return scaled_by_mamf(fitted, gpu.mamf_bf16_flops, gpu.peak_flops.bf16,
                          k.hopper_gemm_reference_mamf_fraction);
  };
  switch (fp8) {
    case Fp8Recipe::none:
      break;
    case Fp8Recipe::blockwise:
      return hopper_scaled(k.fp8_blockwise_gemm_efficiency);
    case Fp8Recipe::mxfp8:
      return hopper_scaled(k.mxfp8_gemm_efficiency);
    case Fp8Recipe::delayed:
    case Fp8Recipe::tensorwise:
    case Fp8Recipe::rowwise:
      return hopper_scaled(k.fp8_gemm_efficiency);
  }
  const bool hopper = gpu.architecture == "hopper" && k.hopper_gemm_efficiency > 0;
  if (p == Precision::fp32) return hopper ? k.hopper_gemm_efficiency : k.gemm_efficiency;
  return scaled_by_mamf(
      hopper ? k.hopper_gemm_efficiency : k.gemm_efficiency, gpu.mamf_bf16_flops,
      gpu.peak_flops.bf16,
      hopper ? k.hopper_gemm_reference_mamf_fraction : k.gemm_reference_mamf_fraction);
}

double pcie_lane_Bps(std::int64_t generation) {
  // Generations 1-2: 2.5 and 5 GT/s with 8b/10b coding; 3-5: 8, 16, 32 GT/s with 128b/130b;
  // 6 and later: 64 GT/s (doubling) in 256-byte FLITs carrying 242 bytes of data (PCI-SIG,
  // PCIe 6.0 base specification).
  if (generation <= 2) return 2.5e9 * static_cast<double>(generation) / 8.0 * 8.0 / 10.0;
  const double gts = 8e9 * std::pow(2.0, static_cast<double>(generation - 3));
  return gts / 8.0 * (generation >= 6 ? 242.0 / 256.0 : 128.0 / 130.0);
}

double attention_efficiency(const GpuSpec& gpu, const ComputeConstants& k,
                            AttentionKernel requested, AttentionLibrary lib, double seq_tokens,
                            double head_dim) {
  return kernel_efficiency(gpu, k, requested, lib, seq_tokens, head_dim, false);
}

double attention_forward_efficiency(const GpuSpec& gpu, const ComputeConstants& k,
                                    AttentionKernel requested, AttentionLibrary lib,
                                    double seq_tokens, double head_dim) {
  return kernel_efficiency(gpu, k, requested, lib, seq_tokens, head_dim, true);
}

double host_link_Bps(const GpuSpec& gpu, const ComputeConstants& k) {
  // NVLink-C2C (GB200, GB300) where the catalogue states a host link other than PCIe.
  if (gpu.host_link_bytes_per_s_per_direction > 0) {
    return gpu.host_link_bytes_per_s_per_direction * k.host_transfer_efficiency;
  }
  return pcie_lane_Bps(gpu.pcie_generation) * static_cast<double>(gpu.pcie_lanes) *
         k.host_transfer_efficiency;
}

namespace {

class Timer {
 public:
  Timer(const GpuSpec& gpu, const ComputeConstants& k, Precision p, AttentionKernel kernel,
        AttentionLibrary lib, Fp8Recipe fp8 = Fp8Recipe::none)
      : fp8_(fp8 != Fp8Recipe::none),
        fp8_peak_(gpu.peak_flops.fp8),
        fp8_efficiency_(fp8 != Fp8Recipe::none ? gemm_efficiency_of(gpu, k, p, fp8) : 0.0),
        // Current scaling (per tensor, torchao's per row) reads the input once for its amax,
        // then casts; delayed scaling takes the amax in the cast, block scales per block.
        cast_bytes_(fp8 == Fp8Recipe::tensorwise || fp8 == Fp8Recipe::rowwise ? 6.0 : 4.0),
        gpu_(gpu),
        peak_(gpu.peak_flops_for(p)),
        hbm_(gpu.memory_bandwidth_bytes_per_s),
        k_(k),
        e_(static_cast<double>(bytes_per_element(compute_element(p)))),
        kernel_(kernel),
        lib_(lib),
        gemm_efficiency_(gemm_efficiency_of(gpu, k, p)),
        alignment_measured_(gpu.architecture == "hopper" && e_ == 2.0) {
    if (!(peak_ > 0)) {
      throw Error(gpu.name + " has no " + std::string(compute_type(p)) +
                  " tensor-core peak: choose another {precision}");
    }
    if (fp8_ && !(fp8_peak_ > 0)) {
      throw Error(gpu.name + " has no FP8 tensor cores: {fp8_recipe} " + std::string(name_of(fp8)) +
                  " needs Hopper, Ada or newer");
    }
    if (fp8 == Fp8Recipe::mxfp8 && gpu.architecture != "blackwell" && gpu.architecture != "cdna4") {
      throw Error(
          "{fp8_recipe} mxfp8 needs tensor cores with MX block scaling (Blackwell, AMD "
          "CDNA4); " +
          gpu.name + " is " + gpu.architecture +
          (gpu.architecture == "hopper" ? ": use blockwise for 1x128 block scales" : ""));
    }
    if (fp8_ && !is_mixed(p)) {
      throw Error("{fp8_recipe} " + std::string(name_of(fp8)) +
                  " quantizes the GEMMs of bf16 or fp16 mixed precision, not " +
                  std::string(name_of(p)));
    }
  }
  // One of a transformer block's Linear GEMMs (M x K) x (K x N): in FP8 under an FP8 recipe
  // (1-byte inputs, a 16-bit output, the FP8 peak at its own efficiency), else as gemm().
  double linear(double m, double k, double n) const {
    if (!fp8_) return gemm(m, k, n);
    return fp8_gemm(2.0 * m * k * n, m * k + k * n, e_ * m * n);
  }
  double grouped_linear(double rows, double k, double n, double groups) const {
    if (!fp8_) return grouped_gemm(rows, k, n, groups);
    return fp8_gemm(2.0 * rows * k * n, rows * k + groups * k * n, e_ * rows * n);
  }
  // The quantization of a Linear's input of `elements` under the FP8 recipe: read 16 bits,
  // write the FP8 copy and its transpose (the weight-gradient GEMM's operand on Hopper; MXFP8's
  // column-wise copy), 4 B per element; current scaling (tensorwise, rowwise) reads the tensor
  // once more for its amax first (6 B). 0 without FP8.
  double cast_bytes(double elements) const { return fp8_ ? cast_bytes_ * elements : 0.0; }
  double cast_kernels(double linears) const { return fp8_ ? linears : 0.0; }
  double element_bytes() const { return e_; }
  // One GEMM (M x K) x (K x N), forward.
  double gemm(double m, double k, double n) const {
    return gemm_at(m, k, n, efficiency_for(k, n, false));
  }
  // Its two backward products (the input's and the weight's gradients).
  double gemm_gradients(double m, double k, double n) const {
    return 2.0 * gemm_at(m, k, n, efficiency_for(k, n, true));
  }
  // A grouped GEMM (one kernel for all experts, as Megatron-LM's TEGroupedMLP and torchtitan's
  // grouped_mm run them): `rows` routed token rows spread over `groups` weight matrices of
  // K x N, all of them read once.
  double grouped_gemm(double rows, double k, double n, double groups) const {
    const double flops = 2.0 * rows * k * n;
    const double bytes = e_ * (rows * k + groups * k * n + rows * n);
    return std::max(flops / (peak_ * gemm_efficiency_), bytes / (hbm_ * k_.memory_efficiency)) +
           k_.kernel_overhead_s;
  }
  // The fused kernel's forward and backward on query and key blocks of s tokens, `flops` the
  // forward's: together 3.5 x the forward's work at the forward + backward curve (the backward
  // recomputes the scores), the forward at its own curve, the backward the rest.
  struct FusedTimes {
    double forward_s = 0;
    double backward_s = 0;
  };
  FusedTimes fused_attention(double flops, double s, double head_dim) const {
    const double both = attention_efficiency(gpu_, k_, kernel_, lib_, s, head_dim);
    const double fwd = attention_forward_efficiency(gpu_, k_, kernel_, lib_, s, head_dim);
    const double total_s = 3.5 * (flops / (peak_ * both) + k_.kernel_overhead_s);
    const double forward_s = flops / (peak_ * fwd) + k_.kernel_overhead_s;
    return {forward_s, std::max(total_s - forward_s, k_.kernel_overhead_s)};
  }
  // PyTorch's memory-efficient attention kernel in fp32 (FlashAttention has no fp32 kernel), on
  // `flops` of forward work: its measured fractions of the fp32 peak, the backward doing 2.5 x
  // the forward's work. None when the precision is not fp32 or the fractions are not set.
  std::optional<FusedTimes> fp32_attention(double flops) const {
    const double fwd = k_.fp32_attention_forward_efficiency;
    const double bwd = k_.fp32_attention_backward_efficiency;
    if (e_ != 4.0 || !(fwd > 0 && bwd > 0)) return std::nullopt;
    return FusedTimes{flops / (peak_ * fwd) + k_.kernel_overhead_s,
                      2.5 * flops / (peak_ * bwd) + k_.kernel_overhead_s};
  }
  // Eager attention's two batched GEMMs.
  double eager_attention(double flops) const {
    return flops / (peak_ * attention_fallback(gpu_, k_)) + k_.kernel_overhead_s;
  }
  double bytes(double b, double kernels) const {
    return b / (hbm_ * k_.memory_efficiency) + kernels * k_.kernel_overhead_s;
  }
  // Eager element-wise kernels at the rate of each class.
  double eager(const EagerTraffic& t) const {
    const auto rate = [&](double efficiency) {
      return hbm_ * (efficiency > 0 ? efficiency : k_.memory_efficiency);
    };
    return t.same_type_bytes / rate(k_.memory_efficiency) +
           t.widening_bytes / rate(k_.widening_copy_memory_efficiency) +
           t.mixed_type_bytes / rate(k_.mixed_type_memory_efficiency) +
           t.kernels * k_.kernel_overhead_s;
  }

 private:
  double gemm_at(double m, double k, double n, double efficiency) const {
    const double flops = 2.0 * m * k * n;
    const double bytes = e_ * (m * k + k * n + m * n);
    return std::max(flops / (peak_ * efficiency), bytes / (hbm_ * k_.memory_efficiency)) +
           k_.kernel_overhead_s;
  }
  // The GEMM efficiency for leading dimensions K and N: a 16-bit GEMM on Hopper with either not
  // a multiple of 8 elements runs at the measured rate of its alignment class (odd, or even but
  // not a multiple of 8), never faster than an aligned one. Other GPUs and element types: no
  // measurement, the aligned rate.
  double efficiency_for(double k, double n, bool gradient) const {
    const auto multiple = [](double x, double q) { return std::fmod(x, q) == 0.0; };
    if (!alignment_measured_ || (multiple(k, 8) && multiple(n, 8))) return gemm_efficiency_;
    const double measured = multiple(k, 2) && multiple(n, 2)
                                ? k_.hopper_even_unaligned_gemm_efficiency
                            : gradient ? k_.hopper_odd_gemm_gradient_efficiency
                                       : k_.hopper_odd_gemm_forward_efficiency;
    return measured > 0 ? std::min(measured, gemm_efficiency_) : gemm_efficiency_;
  }
  double fp8_gemm(double flops, double fp8_elements, double out_bytes) const {
    const double bytes = fp8_elements + out_bytes;
    return std::max(flops / (fp8_peak_ * fp8_efficiency_), bytes / (hbm_ * k_.memory_efficiency)) +
           k_.kernel_overhead_s;
  }
  bool fp8_;
  double fp8_peak_;
  double fp8_efficiency_;
  double cast_bytes_;
  const GpuSpec& gpu_;
  double peak_;
  double hbm_;
  const ComputeConstants& k_;
  double e_;
  AttentionKernel kernel_;
  AttentionLibrary lib_;
  double gemm_efficiency_;
  bool alignment_measured_;  // a 16-bit GEMM on Hopper: unaligned K or N is slower
};

struct Phase {
  double gemm = 0;
  double attention = 0;
  double elementwise = 0;
  double attention_backward = 0;    // of a forward phase: its attention's backward
  double elementwise_backward = 0;  // of a forward phase: its element-wise work's backward
  double total() const { return gemm + attention + elementwise; }
};

// One dense MLP of intermediate size f on m tokens: its GEMMs, and the bytes of its activation
// (and gating).
void dense_mlp(const TransformerSpec& t, double m, double f, const Timer& time, Phase& p,
               double& bytes) {
  const double h = static_cast<double>(t.hidden_size);
  const double e = time.element_bytes();
  const bool gated = is_gated(t.mlp);
  p.gemm += (gated ? 2 : 1) * time.linear(m, h, f) + time.linear(m, f, h);
  bytes += (gated ? 3.0 : 2.0) * e * m * f;
  bytes += time.cast_bytes(m * h + m * f);  // the two Linears' inputs, under FP8
}

// The structural kernels of one mixture-of-experts layer's routing, forward: the router's
// softmax and top-k, the permutation (sort by expert, gather) and the un-permutation
// (scatter, weighted sum of the k outputs).
constexpr double kMoeRoutingKernels = 5;

// A mixture-of-experts MLP on m tokens: the router GEMM, the routed experts as grouped GEMMs
// over the m k routed rows (a shard's share of them over its local experts, MoeSpec), the shared
// expert as a dense MLP; element-wise, the router's fp32 scores (read, softmax written, read by
// top-k), the gather of the k copies of every token and the weighted sum back.
void moe_mlp(const TransformerSpec& t, double m, const Timer& time, Phase& p, double& bytes) {
  const auto& moe = t.moe;
  const double h = static_cast<double>(t.hidden_size);
  const double e = time.element_bytes();
  const double experts = static_cast<double>(moe.experts);
  const double local = static_cast<double>(moe.experts_on_gpu());
  const double rows = m * static_cast<double>(moe.experts_per_token) * moe.routed_rows_share;
  const double fe = static_cast<double>(moe.expert_ffn_size);
  const bool gated = is_gated(t.mlp);
  p.gemm += time.gemm(m, h, experts);
  p.gemm += (gated ? 2 : 1) * time.grouped_linear(rows, h, fe, local) +
            time.grouped_linear(rows, fe, h, local);
  bytes += (gated ? 3.0 : 2.0) * e * rows * fe;
  bytes += time.cast_bytes(rows * h + rows * fe);
  if (moe.shared_ffn_size > 0)
    dense_mlp(t, m, static_cast<double>(moe.shared_ffn_size), time, p, bytes);
  bytes += 3.0 * 4.0 * m * experts;   // router scores, softmax, top-k
  bytes += 2.0 * e * rows * h;        // permutation: read and write k copies
  bytes += e * rows * h + e * m * h;  // un-permutation and weighted sum
  p.elementwise += time.bytes(0, kMoeRoutingKernels);
}

}  // namespace

double attended_fraction(const TransformerSpec& t, double s) {
  if (t.head != HeadKind::causal_lm) return 1.0;
  const double w = static_cast<double>(t.sliding_window);
  if (w <= 0 || w >= s) return 0.5;
  const double windowed = (w * (w + 1) / 2 + (s - w) * w) / (s * s);
  const double share = t.windowed_share();  // the rest attend causally to all earlier tokens
  return share * windowed + (1 - share) * 0.5;
}

double checkpointed_share(std::int64_t layers, std::int64_t every) {
  if (every < 1) throw FieldError("checkpoint_every", "must be a positive integer");
  if (layers <= 0) return 0.0;
  const std::int64_t wrapped = layers / every;  // whole blocks: the floor is the point
  return static_cast<double>(wrapped) / static_cast<double>(layers);
}

double attended_keys(const TransformerSpec& t, double s) {
  if (t.sliding_window <= 0) return s;
  const double share = t.windowed_share();
  return share * std::min(s, static_cast<double>(t.sliding_window)) + (1 - share) * s;
}

namespace {

// Latent attention's projections on m tokens (DeepSeek-V3): the query bottleneck (down,
// RMSNorm, up) or one query projection, the key/value latent and shared rotary key (down), its
// RMSNorm and the up-projection to every head's key and value, the output projection; the
// element-wise work of the two norms and of assembling each head's query and key from the
// non-rotary and rotary parts, and the casts of the Linears' inputs under FP8.
void latent_projections(const TransformerSpec& t, double m, const Timer& time, Phase& p,
                        double& bytes) {
  const double h = static_cast<double>(t.hidden_size);
  const double q = static_cast<double>(t.q_size());
  const double o = static_cast<double>(t.o_size());
  const double ql = static_cast<double>(t.mla.q_lora_rank);
  const double kvl = static_cast<double>(t.mla.kv_lora_rank);
  const double rope = static_cast<double>(t.mla.qk_rope_head_dim);
  const double heads = static_cast<double>(t.num_heads);
  const double up =
      heads * (static_cast<double>(t.head_dim) - rope + static_cast<double>(t.v_dim()));
  const double e = time.element_bytes();
  p.gemm += ql > 0 ? time.linear(m, h, ql) + time.linear(m, ql, q) : time.linear(m, h, q);
  p.gemm += time.linear(m, h, kvl + rope) + time.linear(m, kvl, up) + time.linear(m, o, h);
  bytes += 2 * e * m * (ql + kvl);                              // the latents' RMSNorms
  bytes += 2 * e * m * (q + static_cast<double>(t.kv_size()));  // assembling Q and K per head
  bytes += time.cast_bytes(m * (h + ql + kvl + o));
}

// Forward of one transformer block for M = b s tokens.
Phase block_forward(const TransformerSpec& t, double b, double s, Attention attn, const Timer& time,
                    const ComputeConstants& k, const std::optional<EagerFlow>& eager) {
  const double m = b * s;
  const double h = static_cast<double>(t.hidden_size);
  const double q = static_cast<double>(t.q_size());
  const double kv = static_cast<double>(t.kv_size());
  const double o = static_cast<double>(t.o_size());
  const double e = time.element_bytes();
  Phase p;
  double bytes = 0;
  if (t.mla.active()) {
    latent_projections(t, m, time, p, bytes);
  } else {
    p.gemm = time.linear(m, h, q + kv + static_cast<double>(t.v_size())) + time.linear(m, o, h);
    bytes += time.cast_bytes(m * h + m * o);  // QKV and output projection inputs
  }
  if (t.moe.active()) {
    moe_mlp(t, m, time, p, bytes);
  } else {
    dense_mlp(t, m, static_cast<double>(t.ffn_size), time, p, bytes);
  }
  // Q K^T over q-wide query/key heads, the probabilities times the o-wide value heads.
  const double core_flops = 2.0 * b * s * s * (q + o);
  if (attn == Attention::flash) {
    // The fused kernel skips the key blocks a causal mask or a sliding window leaves out.
    const double flops = core_flops * attended_fraction(t, s);
    const auto fp32 = time.fp32_attention(flops);
    const auto fused =
        fp32 ? *fp32 : time.fused_attention(flops, s, static_cast<double>(t.head_dim));
    p.attention = fused.forward_s;
    p.attention_backward = fused.backward_s;
  } else {
    // Two batched GEMMs and a softmax over the a x s x s scores; the backward twice that.
    // Soft-capping adds its division, tanh and multiplication, each reading and writing the
    // scores.
    const double scores = e * static_cast<double>(t.num_heads) * s * s * b;
    const bool capped = t.attn_logit_softcap > 0;
    p.attention = time.eager_attention(core_flops) +
                  time.bytes((capped ? 10.0 : 4.0) * scores, capped ? 6 : 3);
    p.attention_backward = 2.0 * p.attention;
  }
  const double norms = static_cast<double>(t.norms_per_layer);
  bytes += norms * (2 * e * m * h) + 2 * (3 * e * m * h);  // the norms, two residual adds
  if (t.qk_norm) bytes += 2 * e * m * (q + kv);            // RMSNorm of every query and key head
  if (t.mla.active()) {  // rotary on each query head's rotary part and on the shared key
    bytes += 2 * e * m * static_cast<double>(t.mla.qk_rope_head_dim) *
             (static_cast<double>(t.num_heads) + 1);
  } else if (t.positions == PositionKind::rotary) {
    bytes += 2 * e * m * (q + kv);
  }
  if (t.hidden_dropout > 0) bytes += 2 * (2 * e * m * h + m * h);
  // The casts of the four Linears' inputs (QKV, output projection, up, down) under FP8, and
  // one kernel for each norm beyond the two the per-layer count assumes; latent attention's
  // two norms, two assemblies and two more casts.
  const double latent = t.mla.active() ? 4 + time.cast_kernels(2) : 0;
  if (eager && eager_inventory_covers(t)) {
    // Eager PyTorch: the block's kernels op by op, the backward's as autograd runs them.
    const auto ops = eager_block(t, m, *eager);
    p.elementwise += time.eager(ops.forward);
    p.elementwise_backward = time.eager(ops.backward);
    return p;
  }
  p.elementwise += time.bytes(
      bytes, k.elementwise_kernels_per_layer + (norms - 2) + latent + time.cast_kernels(4));
  p.elementwise_backward = 2 * p.elementwise;
  return p;
}

// The forward work that selective recomputation's modules repeat in one block of `t` on m
// tokens, the attention core apart (core_attn repeats the attention's forward): the separate
// norms' kernels (layernorm: latent attention's input norm, a mixture's pre-MLP norm), the
// latent up-projections and the assembly of Q and K (mla_up_proj), a dense block's MLP (mlp),
// the whole mixture-of-experts layer (moe) or its activation function over the routed rows
// (moe_act) and its shared expert (shared_experts). FLOPs are the GEMMs'.
struct Rebuilt {
  double gemm_s = 0;
  double elementwise_s = 0;
  double flops = 0;
  double total() const { return gemm_s + elementwise_s; }
};

Rebuilt rebuilt_modules(const TransformerSpec& t, double m, RecomputeModules modules,
                        const Timer& time) {
  const double h = static_cast<double>(t.hidden_size);
  const double e = time.element_bytes();
  const bool sparse = t.moe.active(), latent = t.mla.active();
  const double gated = is_gated(t.mlp) ? 3 : 2;  // the MLP's GEMMs
  Rebuilt r;
  double bytes = 0, kernels = 0;
  if (modules.has(RecomputeModule::layernorm)) {
    const double norms = (latent ? 1 : 0) + (sparse ? 1 : 0);
    bytes += norms * 2 * e * m * h;
    kernels += norms;
  }
  if (latent && modules.has(RecomputeModule::mla_up_proj)) {
    const double ql = static_cast<double>(t.mla.q_lora_rank);
    const double kvl = static_cast<double>(t.mla.kv_lora_rank);
    const double q = static_cast<double>(t.q_size());
    const double up = static_cast<double>(t.num_heads) *
                      static_cast<double>(t.head_dim - t.mla.qk_rope_head_dim + t.v_dim());
    if (ql > 0) r.gemm_s += time.linear(m, ql, q);
    r.gemm_s += time.linear(m, kvl, up);
    r.flops += 2 * m * ((ql > 0 ? ql * q : 0) + kvl * up);
    bytes += 2 * e * m * (q + static_cast<double>(t.kv_size()));  // assembling Q and K
    kernels += 2;
  }
  const auto mlp = [&](double f) {
    Phase p;
    dense_mlp(t, m, f, time, p, bytes);
    r.gemm_s += p.gemm;
    r.flops += gated * 2 * m * h * f;
    kernels += 2;
  };
  if (!sparse && modules.has(RecomputeModule::mlp)) mlp(static_cast<double>(t.ffn_size));
  const auto& moe = t.moe;
  const double rows = m * static_cast<double>(moe.experts_per_token) * moe.routed_rows_share;
  const double fe = static_cast<double>(moe.expert_ffn_size);
  if (sparse && modules.has(RecomputeModule::moe)) {
    Phase p;
    moe_mlp(t, m, time, p, bytes);
    r.gemm_s += p.gemm;
    r.elementwise_s += p.elementwise;
    r.flops += 2 * m * h * static_cast<double>(moe.experts) + gated * 2 * rows * h * fe +
               gated * 2 * m * h * static_cast<double>(moe.shared_ffn_size);
    kernels += 2;
  } else if (sparse) {
    if (modules.has(RecomputeModule::moe_act)) {  // reads the up-projection, writes the product
      bytes += gated * e * rows * fe;
      kernels += 1;
    }
    if (modules.has(RecomputeModule::shared_experts) && moe.shared_ffn_size > 0)
      mlp(static_cast<double>(moe.shared_ffn_size));
  }
  if (bytes > 0 || kernels > 0) r.elementwise_s += time.bytes(bytes, kernels);
  return r;
}

// What torchtitan's per-op policy (SelectivePolicy::per_op) reruns of one block of `t` on b x s
// tokens: every element-wise op of its forward, the matrix multiplies it does not save (every
// second aten.mm in call order; none under FP8, whose torch._scaled_mm it saves), and a
// mixture's router and routed experts (the grouped GEMMs are not in its saved list). The
// attention core, unless fused, is the caller's (it saves the fused kernel's output alone).
Rebuilt per_op_rebuilt(const TransformerSpec& t, double b, double s, Attention attn,
                       const Timer& time, const ComputeConstants& k,
                       const std::optional<EagerFlow>& eager, bool fp8) {
  const double m = b * s;
  Rebuilt r;
  r.elementwise_s = block_forward(t, b, s, attn, time, k, eager).elementwise;
  if (!fp8) {
    for (const auto& mm : per_op_block_mms(t, 1)) {
      if (!mm.recomputed) continue;
      const double in = static_cast<double>(mm.in), out = static_cast<double>(mm.out);
      r.gemm_s += time.linear(m, in, out);
      r.flops += 2 * m * in * out;
    }
  }
  const auto& moe = t.moe;
  if (moe.active()) {
    const double h = static_cast<double>(t.hidden_size);
    const double experts = static_cast<double>(moe.experts);
    const double rows = m * static_cast<double>(moe.experts_per_token) * moe.routed_rows_share;
    const double fe = static_cast<double>(moe.expert_ffn_size);
    const double local = static_cast<double>(moe.experts_on_gpu());
    const double gated = is_gated(t.mlp) ? 2 : 1;
    r.gemm_s += time.gemm(m, h, experts) + gated * time.grouped_linear(rows, h, fe, local) +
                time.grouped_linear(rows, fe, h, local);
    r.flops += 2 * m * h * experts + (gated + 1) * 2 * rows * h * fe;
  }
  return r;
}

// The kernels an eager step launches outside the blocks, forward and backward: the token (and
// learned position) embeddings and their sum, the final norm, the LM head's GEMM and the loss's
// three kernels (one each way, two gradient GEMMs), and the embeddings' scatter-adds.
EagerLaunches eager_edge_launches(const TransformerSpec& t, bool lm) {
  const bool learned = t.positions == PositionKind::learned;
  const bool layernorm = t.norm == NormKind::layernorm;
  EagerLaunches n{learned ? 3.0 : 1.0, learned ? 2.0 : 1.0};
  n.forward += layernorm ? 1 : 6;
  n.backward += layernorm ? 2 : 12;
  if (lm) {
    n.forward += 1 + 3;
    n.backward += 2 + 3;
  }
  return n;
}

// The host's pace of an eager step: the GPU cannot run a kernel before Python launches it, so
// each phase takes the longer of its kernels' time and its launches' host time (forward: the
// modules' Python; backward: autograd's engine, plus the Python of the blocks full
// checkpointing runs again), and under FSDP its hooks around each wrapped module (once each
// way: FSDP2's pre-forward hook (torch/distributed/fsdp/_fully_shard/_fsdp_state.py) returns
// at once when checkpointing reruns a block in
// backward, whose pre-backward hook has gathered it). The GPU's wait is host_wait_s.
void pace_by_host(const TransformerSpec& t, const EagerFlow& flow, bool lm, double recomputed_share,
                  bool fsdp, const ComputeConstants& k, ComputeTime& out) {
  const auto block = eager_block_launches(t, flow);
  const auto edge = eager_edge_launches(t, lm);
  const double layers = static_cast<double>(t.num_layers);
  const double modules = fsdp ? layers + 1 : 0.0;  // the blocks and the root
  const double rerun = recomputed_share * layers;
  const double fwd_host =
      (layers * block.forward + edge.forward) * k.eager_forward_host_s_per_kernel +
      modules * k.fsdp_forward_host_s_per_module;
  const double bwd_host =
      (layers * block.backward + edge.backward) * k.autograd_backward_host_s_per_kernel +
      rerun * block.forward * k.eager_forward_host_s_per_kernel +
      modules * k.fsdp_backward_host_s_per_module;
  out.eager_forward_launches = layers * block.forward + edge.forward;
  out.eager_backward_launches = layers * block.backward + edge.backward + rerun * block.forward;
  out.fsdp_hooks_host_s =
      modules * (k.fsdp_forward_host_s_per_module + k.fsdp_backward_host_s_per_module);
  out.host_wait_s =
      std::max(0.0, fwd_host - out.forward_s) + std::max(0.0, bwd_host - out.backward_s);
  out.forward_s = std::max(out.forward_s, fwd_host);
  out.backward_s = std::max(out.backward_s, bwd_host);
}

ComputeTime transformer_compute(const TransformerSpec& t, const TrainingConfig& c,
                                const Timer& time, const ComputeConstants& k) {
  const double b = static_cast<double>(c.micro_batch);
  const double s = static_cast<double>(c.seq_len > 0 ? c.seq_len : t.max_positions);
  const double L = static_cast<double>(t.num_layers);
  const double h = static_cast<double>(t.hidden_size);
  const double v = static_cast<double>(t.vocab_size);
  const double e = time.element_bytes();
  const double m = b * s;
  const auto eager = eager_layers(c);
  // Every block, by kind (a mixture's dense first layers apart), and the multi-token
  // prediction modules: a sparse block each, the 2h -> h projection of the concatenated
  // normed hidden state and embedding, its three norms and the concatenation.
  Phase blocks;
  const auto add_blocks = [&](const TransformerSpec& kind, double layers) {
    const auto one = block_forward(kind, b, s, attention_as_run(kind, c), time, k, eager);
    blocks.gemm += one.gemm * layers;
    blocks.attention += one.attention * layers;
    blocks.elementwise += one.elementwise * layers;
    blocks.attention_backward += one.attention_backward * layers;
    blocks.elementwise_backward += one.elementwise_backward * layers;
  };
  for (const auto& run : block_runs(t))
    add_blocks(run.block, static_cast<double>(run.layers));
  const double mtp = static_cast<double>(t.mtp_layers);
  if (t.mtp_layers > 0) {
    add_blocks(t, mtp);
    blocks.gemm += mtp * time.linear(m, 2 * h, h);
    const double joins = mtp * time.bytes(3 * 2 * e * m * h + 2 * e * m * 2 * h, 4);
    blocks.elementwise += joins;
    blocks.elementwise_backward += 2 * joins;
  }
  Phase fwd{blocks.gemm, blocks.attention, blocks.elementwise};
  Phase bwd{2 * fwd.gemm, blocks.attention_backward, blocks.elementwise_backward};
  // Embedding lookup, and its scatter-add in backward.
  fwd.elementwise += time.bytes(2 * e * m * h, 1);
  bwd.elementwise += time.bytes(2 * e * m * h, 1);
  const bool lm = t.head == HeadKind::causal_lm || t.head == HeadKind::masked_lm ||
                  t.head == HeadKind::pretraining;
  if (lm) {
    // The LM head and loss, once more for each multi-token prediction module (its own
    // hidden states through the shared head).
    const double heads = 1 + mtp;
    fwd.gemm += heads * time.gemm(m, h, v);
    bwd.gemm += heads * time.gemm_gradients(m, h, v);
    // Logits cast to fp32, log-softmax, loss; and their gradients.
    fwd.elementwise += heads * time.bytes(m * v * (e + 4 + 4 + 4), 3);
    bwd.elementwise += heads * time.bytes(m * v * (4 + 4 + e), 3);
    if (t.final_logit_softcap > 0) {  // c tanh(x / c): three passes each way over the logits
      fwd.elementwise += time.bytes(3 * 2 * e * m * v, 3);
      bwd.elementwise += time.bytes(3 * 2 * e * m * v + e * m * v, 3);
    }
  }
  // Full recomputation repeats every block's forward; selective its modules' (the attention
  // core's under core_attn), or what torchtitan's per-op policy does not save (the attention
  // core unless fused).
  const bool selective = c.checkpointing == Checkpointing::selective;
  const bool per_op = selective && c.selective_policy == SelectivePolicy::per_op;
  const bool attention_again =
      c.checkpointing == Checkpointing::full ||
      (per_op ? attention_as_run(t, c) != Attention::flash
              : selective && c.recompute_modules.has(RecomputeModule::core_attn));
  Rebuilt rebuilt;
  if (selective) {
    for (const auto& run : block_runs(t)) {
      const auto one = per_op ? per_op_rebuilt(run.block, b, s, attention_as_run(run.block, c),
                                               time, k, eager, c.fp8 != Fp8Recipe::none)
                              : rebuilt_modules(run.block, m, c.recompute_modules, time);
      const double layers = static_cast<double>(run.layers);
      rebuilt.gemm_s += one.gemm_s * layers;
      rebuilt.elementwise_s += one.elementwise_s * layers;
      rebuilt.flops += one.flops * layers;
    }
  }
  // Full checkpointing of every Nth block only repeats that share of the blocks' forward.
  const bool full = c.checkpointing == Checkpointing::full;
  const double share = full ? checkpointed_share(t.num_layers, c.checkpoint_every) : 1.0;
  const double attention_again_s = attention_again ? share * blocks.attention : 0.0;
  double recompute = rebuilt.total() + attention_again_s;
  if (full) recompute = share * blocks.total();
  ComputeTime out;
  out.forward_s = fwd.total();
  out.backward_s = bwd.total() + recompute;
  out.recompute_s = recompute;
  out.gemm_s = fwd.gemm + bwd.gemm + (full ? share * blocks.gemm : rebuilt.gemm_s);
  out.attention_s = fwd.attention + bwd.attention + attention_again_s;
  out.attention_forward_s = fwd.attention;
  out.attention_recompute_s = attention_again_s;
  out.elementwise_s = out.forward_s + out.backward_s - out.gemm_s - out.attention_s;
  out.layers = t.num_layers;
  out.parameter_tensors = parameter_tensor_count(t);
  if (eager && eager_inventory_covers(t) && t.mtp_layers == 0)
    pace_by_host(t, *eager, lm, full ? share : 0.0, traits_of(c.strategy).fsdp, k, out);
  // PaLM's model FLOPs: 6 N per token over the matmul parameters a token runs through (the
  // active experts of a mixture), 12 L q s for attention (s capped by a sliding window).
  const auto p = count_parameters(t);
  double block_matmul = static_cast<double>(p.attention);
  for (const auto& run : block_runs(t))
    block_matmul +=
        static_cast<double>(run.layers) * static_cast<double>(mlp_active_params(run.block));
  // A multi-token prediction module: its block (attention and active MLP), the projection
  // and, below, its pass through the LM head.
  block_matmul += mtp * (static_cast<double>(p.attention) / L +
                         static_cast<double>(mlp_active_params(t)) + 2 * h * h);
  const double matmul = block_matmul + (lm ? (1 + mtp) * v * h : 0.0);
  const double keys = attended_keys(t, s);
  const double attention_fwd =
      2.0 * (L + mtp) * keys * static_cast<double>(t.q_size() + t.o_size()) * m;
  out.model_flops = 6.0 * matmul * m + 3.0 * attention_fwd;
  const double block_fwd = 2.0 * block_matmul * m + attention_fwd;
  out.hardware_flops = out.model_flops;
  if (full) out.hardware_flops += share * block_fwd;
  if (selective) out.hardware_flops += rebuilt.flops + (attention_again ? attention_fwd : 0.0);
  return out;
}

ComputeTime layer_list_compute(const LayerListModel& layers, const TrainingConfig& c,
                               const Timer& time, const ComputeConstants& k) {
  const double b = static_cast<double>(c.micro_batch);
  const double e = time.element_bytes();
  Phase fwd;
  double flops = 0;
  for (const auto& l : layers.layers) {
    const double in = static_cast<double>(element_count(l.input_shape));
    const double out = static_cast<double>(element_count(l.output_shape));
    if (l.type == "Conv2d" || l.type == "Linear") {
      // As an implicit GEMM: M = b x output positions, N = outputs per position, K from the
      // parameter count (weights per output, bias excluded).
      const double outputs =
          static_cast<double>(l.type == "Conv2d" ? l.output_shape.front() : l.output_shape.back());
      const double positions = out / outputs;
      const double kdim = static_cast<double>(l.gemm_k);
      fwd.gemm += time.gemm(b * positions, kdim, outputs);
      flops += 2.0 * b * positions * kdim * outputs;
    } else if (l.type != "Flatten") {
      fwd.elementwise += time.bytes(e * b * (in + out), 1);
    }
  }
  ComputeTime outt;
  outt.forward_s = fwd.total();
  outt.backward_s = 2 * fwd.total();
  outt.gemm_s = 3 * fwd.gemm;
  outt.elementwise_s = 3 * fwd.elementwise;
  outt.model_flops = 3.0 * flops;
  outt.hardware_flops = outt.model_flops;
  outt.layers = static_cast<std::int64_t>(layers.layers.size());
  (void)k;
  return outt;
}

}  // namespace

ComputeTime estimate_compute(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                             const ComputeConstants& k, AttentionLibrary lib) {
  const Timer time(gpu, k, c.precision, c.attention_kernel, lib, c.fp8);
  if (m.transformer) return transformer_compute(*m.transformer, c, time, k);
  if (m.layers) return layer_list_compute(*m.layers, c, time, k);
  throw Error("model '" + m.name +
              "': compute time needs layer shapes (give {model}, not "
              "{params})");
}

BlockLinearTimes block_linear_times(const TransformerSpec& t, const TrainingConfig& c,
                                    const GpuSpec& gpu, const ComputeConstants& k) {
  const Timer time(gpu, k, c.precision, c.attention_kernel, AttentionLibrary::transformer_engine,
                   c.fp8);
  const double m = static_cast<double>(c.micro_batch) *
                   static_cast<double>(c.seq_len > 0 ? c.seq_len : t.max_positions);
  const double h = static_cast<double>(t.hidden_size);
  const double q = static_cast<double>(t.q_size()), kv = static_cast<double>(t.kv_size());
  const double v = static_cast<double>(t.v_size()), o = static_cast<double>(t.o_size());
  BlockLinearTimes out;
  out.qkv_s = fuses_qkv(t) ? time.linear(m, h, q + kv + v)
                           : time.linear(m, h, q) + time.linear(m, h, kv) + time.linear(m, h, v);
  out.proj_s = time.linear(m, o, h);
  if (!t.moe.active()) {
    const double f = static_cast<double>(t.ffn_size);
    out.fc1_s = (is_gated(t.mlp) ? 2 : 1) * time.linear(m, h, f);
    out.fc2_s = time.linear(m, f, h);
  }
  return out;
}

double optimizer_time(std::int64_t elements, const NumericRecipe& r, Offload offload,
                      const GpuSpec& gpu, const ComputeConstants& k, std::int64_t ranks_on_host,
                      ForeachStep foreach_step) {
  const double bytes = static_cast<double>(elements) * optimizer_bytes_per_param(r, foreach_step);
  if (offload != Offload::none) {
    return bytes * static_cast<double>(std::max<std::int64_t>(ranks_on_host, 1)) /
           k.cpu_optimizer_bytes_per_s;
  }
  return bytes / (gpu.memory_bandwidth_bytes_per_s * k.memory_efficiency) + k.kernel_overhead_s;
}

double optimizer_bytes_per_param(const NumericRecipe& r, ForeachStep foreach_step) {
  const double fp32 = static_cast<double>(bytes_per_element(ElementType::fp32));
  const double grad = static_cast<double>(r.gradient_bytes());
  const double states = static_cast<double>(r.optimizer.bytes_per_param());
  const double copy = r.main_weight ? static_cast<double>(r.parameter_bytes()) : 0.0;
  const Optimizer o = foreach_step.optimizer;
  if (!foreach_step.on || (o != Optimizer::adam && o != Optimizer::adamw)) {
    // A fused step: the fp32 weights it updates (read, write), the gradient, each state (read,
    // write), and the 16-bit copy written back when the recipe keeps one beside a master copy.
    return 2 * fp32 + grad + 2 * states + copy;
  }
  // torch.optim's multi-tensor Adam(W) (_multi_tensor_adam), one pass per op, each reading and
  // writing whole tensors (the moments m, v and the temporary d are fp32, half of `states`
  // each): AdamW's decay of the weights w (read, write), lerp_ of m toward the gradient g (m
  // twice, g), mul_ and addcmul_ of v (v four times, g), sqrt of v into d (v, d), div_ and add_
  // on d (d four times), addcdiv_ into the weights (w twice, m, d): 4w + 3m + 5v + 6d + 2g,
  // 80 bytes with fp32 gradients; Adam (no decay) 72.
  const double moment = states / 2;
  const double decay = o == Optimizer::adamw ? 2 * fp32 : 0.0;
  return decay + 2 * fp32 + 3 * moment + 5 * moment + 6 * moment + 2 * grad + copy;
}

bool foreach_optimizer(const TrainingConfig& c) {
  // Only Adam and AdamW are priced pass by pass (bitsandbytes' 8-bit Adam has no foreach path).
  if (c.optimizer != Optimizer::adam && c.optimizer != Optimizer::adamw) return false;
  // DeepSpeed steps ZeRO's partitions with its FusedAdam, and an offloaded optimizer with its
  // CPU Adam whatever the flag says; the PyTorch strategies with torch.optim's default.
  const bool deepspeed = c.strategy == Strategy::zero1 || c.strategy == Strategy::zero2 ||
                         c.strategy == Strategy::zero3;
  if (deepspeed && c.offload != Offload::none) return false;
  if (c.optimizer_impl != OptimizerImpl::framework)
    return c.optimizer_impl == OptimizerImpl::foreach ||
           c.optimizer_impl == OptimizerImpl::for_loop;
  return !deepspeed;
}

double fsdp_optimizer_host_s(const ModelDesc& m, const TrainingConfig& c,
                             const ComputeConstants& k) {
  if (!m.transformer || !eager_layers(c) || !traits_of(c.strategy).fsdp ||
      c.offload != Offload::none || !foreach_optimizer(c)) {
    return 0;
  }
  return parameter_tensor_count(*m.transformer) * k.fsdp_optimizer_host_s_per_tensor;
}

double parameter_tensor_count(const TransformerSpec& t) {
  double tensors = static_cast<double>(root_parameter_tensors(t).size());
  for (const auto& run : block_runs(t)) {
    tensors += static_cast<double>(run.layers) *
               static_cast<double>(layer_parameter_tensors(run.block).size());
  }
  return tensors;
}

std::optional<OptimizerImpl> priced_optimizer_impl(const TrainingConfig& c) {
  if (c.optimizer != Optimizer::adam && c.optimizer != Optimizer::adamw) return std::nullopt;
  if (!foreach_optimizer(c)) return OptimizerImpl::fused;
  return c.optimizer_impl == OptimizerImpl::for_loop ? OptimizerImpl::for_loop
                                                     : OptimizerImpl::foreach;
}

double optimizer_time(std::int64_t elements, const TrainingConfig& c, const GpuSpec& gpu,
                      const ComputeConstants& k) {
  const auto& t = traits_of(c.strategy);
  const auto r =
      numeric_recipe(c.precision, c.optimizer, t.fsdp, t.single_process, c.fp32_grad_accumulation);
  const std::int64_t host =
      c.gpus_per_host > 0 ? std::min(c.gpus_per_host, c.gpus_per_node) : c.gpus_per_node;
  const std::int64_t ranks = t.single_process ? 1 : std::min(c.dp_size, host);
  return optimizer_time(elements, r, c.offload, gpu, k, ranks,
                        ForeachStep{foreach_optimizer(c), c.optimizer});
}

}  // namespace dtplan::cost
