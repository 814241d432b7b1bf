// Loading and looking up the GPU catalogue.
#include "dtplan/model/gpu_spec.hpp"

#include <set>

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

double non_negative(const ObjectReader& r, const char* key) {
  const double v = r.number(key);
  if (v < 0) r.fail(key, "must not be negative");
  return v;
}

PeakFlops read_flops(const ObjectReader& r) {
  PeakFlops f;
  f.fp32 = non_negative(r, "fp32");
  f.tf32 = non_negative(r, "tf32");
  f.fp16 = non_negative(r, "fp16");
  f.bf16 = non_negative(r, "bf16");
  f.fp8 = non_negative(r, "fp8");
  f.int8 = non_negative(r, "int8");
  r.reject_unknown_keys();
  return f;
}

GpuSpec read_gpu(const ObjectReader& r) {
  GpuSpec g;
  g.name = r.string("name");
  g.aliases = r.strings("aliases");
  g.memory = Bytes{r.positive_integer("memory_bytes")};
  g.memory_bandwidth_bytes_per_s = non_negative(r, "hbm_bandwidth_bytes_per_s");
  g.peak_flops = read_flops(r.object("peak_flops"));
  g.nvlink_links = r.integer("nvlink_links");
  g.nvlink_bytes_per_s_per_direction = non_negative(r, "nvlink_bytes_per_s_per_direction");
  g.pcie_generation = r.positive_integer("pcie_generation");
  g.pcie_lanes = r.positive_integer("pcie_lanes");
  g.tdp_watts = non_negative(r, "tdp_watts");
  r.reject_unknown_keys();
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
