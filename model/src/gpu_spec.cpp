// Loading and looking up the GPU catalogue.
#include "dtplan/model/gpu_spec.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

double GpuSpec::peak_flops_for(Precision p) const {
  switch (p) {
    case Precision::fp32:
      return peak_flops.fp32;
    case Precision::fp16:
    case Precision::amp_fp16:
      return peak_flops.fp16;
    case Precision::bf16:
    case Precision::amp_bf16:
      return peak_flops.bf16;
  }
  return 0.0;
}

namespace {

// Peak flop/s, bandwidths in bytes/s and watts: zero where absent, 1e18 at most.
constexpr NumberRange kSpec = NumberRange::non_negative(1e18);

PeakFlops read_flops(const ObjectReader& r) {
  PeakFlops f;
  f.fp32 = r.number("fp32", kSpec);
  f.tf32 = r.number("tf32", kSpec);
  f.fp16 = r.number("fp16", kSpec);
  f.bf16 = r.number("bf16", kSpec);
  f.fp8 = r.number("fp8", kSpec);
  f.fp6 = r.number("fp6", kSpec);
  f.fp4 = r.number("fp4", kSpec);
  f.int8 = r.number("int8", kSpec);
  r.reject_unknown_keys();
  return f;
}

// A measured maximum is a fraction of the dense peak: above it, or under 5% of it (TFLOP/s
// written as FLOP/s), it is a unit or column mistake.
void check_mamf(const ObjectReader& r, double mamf, double peak, const char* precision) {
  if (mamf == 0.0) return;
  const double fraction = peak > 0 ? mamf / peak : 2.0;
  if (fraction < 0.05 || fraction > 1.0) {
    r.fail("max_achievable_matmul_flops",
           std::string(precision) + " " + std::to_string(mamf) + " FLOP/s is " +
               (peak > 0 ? std::to_string(fraction) + " of" : "given without") +
               " the GPU's dense peak: a measured maximum lies between 5% and 100% of it "
               "(the unit is FLOP/s)");
  }
}

GpuSpec read_gpu(const ObjectReader& r) {
  GpuSpec g;
  g.name = r.string("name");
  g.aliases = r.strings("aliases");
  g.memory = Bytes{r.positive_integer("memory_bytes")};
  g.memory_bandwidth_bytes_per_s = r.number("hbm_bandwidth_bytes_per_s", kSpec);
  g.peak_flops = read_flops(r.object("peak_flops"));
  g.nvlink_links = r.integer("nvlink_links");
  g.nvlink_bytes_per_s_per_direction = r.number("nvlink_bytes_per_s_per_direction", kSpec);
  g.xgmi_links = r.has("xgmi_links") ? r.integer("xgmi_links", 0, 64) : 0;
  g.xgmi_bytes_per_s_per_direction =
      r.optional_number("xgmi_bytes_per_s_per_direction", kSpec).value_or(0.0);
  if ((g.xgmi_links > 0) != (g.xgmi_bytes_per_s_per_direction > 0)) {
    r.fail("xgmi_links",
           "xgmi_links and xgmi_bytes_per_s_per_direction go together: both "
           "zero (no xGMI) or both positive");
  }
  g.host_link_bytes_per_s_per_direction =
      r.optional_number("host_link_bytes_per_s_per_direction", kSpec).value_or(0.0);
  if (const auto mamf = r.optional_object("max_achievable_matmul_flops")) {
    g.mamf_bf16_flops = mamf->optional_number("bf16", kSpec).value_or(0.0);
    g.mamf_fp8_flops = mamf->optional_number("fp8", kSpec).value_or(0.0);
    mamf->optional_string("source");
    mamf->reject_unknown_keys();
  }
  g.pcie_generation = r.integer("pcie_generation", 1, 7);
  g.pcie_lanes = r.positive_integer("pcie_lanes");
  g.tdp_watts = r.number("tdp_watts", kSpec);
  g.streaming_multiprocessors =
      r.has("streaming_multiprocessors") ? r.integer("streaming_multiprocessors", 1, 1024) : 0;
  g.architecture = r.string("architecture");
  static const std::vector<std::string> kArchitectures{"volta",  "turing",    "ampere", "ada",
                                                       "hopper", "blackwell", "cdna3",  "cdna4"};
  if (std::find(kArchitectures.begin(), kArchitectures.end(), g.architecture) ==
      kArchitectures.end()) {
    r.fail("architecture", unknown_name_message("architecture", g.architecture, kArchitectures));
  }
  r.reject_unknown_keys();
  check_mamf(r, g.mamf_bf16_flops, g.peak_flops.bf16, "bf16");
  check_mamf(r, g.mamf_fp8_flops, g.peak_flops.fp8, "fp8");
  return g;
}

}  // namespace

GpuCatalog GpuCatalog::load(const std::filesystem::path& path) {
  const auto root = ObjectReader::root(read_json_file(path));
  root.check_schema_version(1);
  GpuCatalog catalog;
  std::set<std::string> seen;
  for (const auto& entry : root.objects("gpus")) {
    GpuSpec g = read_gpu(entry);
    std::vector<std::string> keys = g.aliases;
    keys.push_back(g.name);
    for (const auto& key : keys) {
      if (!seen.insert(to_lower(key)).second) {
        entry.fail("name", "'" + key + "' names more than one GPU");
      }
    }
    catalog.gpus_.push_back(std::move(g));
  }
  root.reject_unknown_keys();
  return catalog;
}

const GpuSpec& GpuCatalog::find(std::string_view name) const {
  const std::string wanted = to_lower(name);
  for (const auto& g : gpus_) {
    if (to_lower(g.name) == wanted) return g;
    for (const auto& alias : g.aliases) {
      if (to_lower(alias) == wanted) return g;
    }
  }
  throw Error(unknown_name_message("GPU", name, names()));
}

std::vector<std::string> GpuCatalog::names() const {
  std::vector<std::string> out;
  for (const auto& g : gpus_)
    out.push_back(g.name);
  return out;
}

}  // namespace dtplan
