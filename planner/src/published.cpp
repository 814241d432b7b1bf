// Reading data/published/*.json (published.hpp).
#include "dtplan/planner/published.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <sstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/named_value.hpp"

namespace dtplan::planner {

namespace {

constexpr std::array<NamedValue<Family>, 3> kFamilies{{
    {Family::step, "step", "throughput, step time, MFU or TFLOP/s per GPU of a training run"},
    {Family::comm, "comm", "a collective's time or bandwidth"},
    {Family::memory, "memory", "peak memory of a training run"},
}};

constexpr std::array<NamedValue<FlopsConvention>, 3> kConventions{{
    {FlopsConvention::model, "model", "the model's FLOPs, no recomputation"},
    {FlopsConvention::narayanan2021, "narayanan2021",
     "Narayanan et al. 2021 eq. (3), full recomputation counted"},
    {FlopsConvention::megatron_causal, "megatron_causal",
     "the model's FLOPs, causal attention counted for half the keys (Megatron-LM since 2025-03)"},
}};

// The metrics of each family, and which way is more.
struct Metric {
  std::string_view name;
  Family family;
  bool larger_is_more;
};
constexpr std::array<Metric, 12> kMetrics{{
    {"tflops_per_gpu", Family::step, true},
    {"mfu", Family::step, true},
    {"tokens_per_s", Family::step, true},
    {"tokens_per_s_per_gpu", Family::step, true},
    {"samples_per_s", Family::step, true},
    {"step_s", Family::step, false},
    {"busbw_GBps", Family::comm, true},
    {"algbw_GBps", Family::comm, true},
    {"time_us", Family::comm, false},
    {"peak_allocated_GiB", Family::memory, true},
    {"peak_reserved_GiB", Family::memory, true},
    {"peak_used_GiB", Family::memory, true},
}};

const Metric* find_metric(std::string_view name) {
  for (const auto& m : kMetrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

// The flags a row's configuration may hold (estimate, memory and comm, without dashes).
const std::set<std::string>& config_keys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k;
    std::istringstream names(
        "model seq-len global-batch micro-batch grad-accum gpus nodes gpus-per-node gpu topology "
        "precision "
        "strategy tp pp cp ep etp capacity-factor overlap-ep-comm deepep recompute-modules "
        "overlap-grad-reduce overlap-param-gather ddp-bucket-size grad-reduce-in-bf16 "
        "fp8-param-gather tp-comm-overlap "
        "fp8-recipe interleave sp "
        "sharding dp-shard "
        "schedule "
        "checkpointing checkpoint-every attention "
        "attention-kernel optimizer optimizer-impl layer-kernels zero-grad cp-comm pp-layers "
        "offload "
        "collective size "
        "algorithm "
        "framework deepspeed-version");
    for (std::string name; names >> name;)
      k.insert(name);
    return k;
  }();
  return keys;
}

PublishedSource read_source(const ObjectReader& root, const std::string& file) {
  PublishedSource s;
  s.file = file;
  const auto src = root.object("source");
  s.id = src.string("id");
  s.title = src.string("title");
  s.authors = src.optional_string("authors").value_or("");
  s.year = src.optional_integer("year").value_or(0);
  s.url = src.string("url");
  s.kind = src.optional_string("kind").value_or("");
  src.reject_unknown_keys();
  s.fitted_on = root.optional_boolean("fitted_on").value_or(false);
  if (const auto c = root.optional_string("flops_convention")) {
    try {
      s.flops = value_in(kConventions, *c, "flops convention");
    } catch (const Error& e) {
      root.fail("flops_convention", e.what());
    }
  }
  if (root.has("models")) {
    for (const auto& [name, config] : root.value("models").items()) {
      if (!config.is_object()) root.fail("models", "'" + name + "' is not an object");
      s.models[name] = config;
    }
  }
  return s;
}

void read_config(const ObjectReader& row, PublishedRow& r) {
  r.config = row.value("config");
  if (!r.config.is_object()) row.fail("config", "must be an object of dtplan flags");
  for (const auto& [key, value] : r.config.items()) {
    if (config_keys().count(key) == 0) {
      row.fail("config", "unknown flag '" + key + "' (the flags of dtplan estimate, memory " +
                             "or comm, without dashes)");
    }
    if (value.is_null() || value.is_object()) {
      row.fail("config", "flag '" + key + "' must be a number, a string, a list or a boolean");
    }
  }
}

PublishedRow read_row(const ObjectReader& row, std::size_t source) {
  PublishedRow r;
  r.source = source;
  r.location = row.location("id");
  r.id = row.string("id");
  try {
    r.family = value_in(kFamilies, row.string("family"), "family");
  } catch (const Error& e) {
    row.fail("family", e.what());
  }
  r.where = row.string("where");
  const auto hw = row.object("hardware");
  r.gpu = hw.string("gpu");
  r.gpus = hw.positive_integer("gpus");
  for (const auto* key : {"gpus_per_node", "topology", "network", "nodes", "notes"}) {
    if (hw.has(key)) (void)hw.value(key);
  }
  hw.reject_unknown_keys();
  read_config(row, r);
  const auto measured = row.object("measured");
  r.metric = measured.string("metric");
  const auto* metric = find_metric(r.metric);
  if (!metric) measured.fail("metric", "unknown metric '" + r.metric + "'");
  if (metric->family != r.family) {
    measured.fail("metric", r.metric + " is not a " + std::string(name_of(r.family)) + " metric");
  }
  r.measured = measured.number("value");
  if (!(r.measured > 0)) measured.fail("value", "must be positive");
  r.unit = measured.optional_string("unit").value_or("");
  measured.reject_unknown_keys();
  r.expressible = row.optional_boolean("expressible").value_or(true);
  if (row.has("needs")) r.needs = row.strings("needs");
  if (!r.expressible && r.needs.empty()) {
    row.fail("needs", "a row dtplan cannot express says what it needs");
  }
  r.notes = row.optional_string("notes").value_or("");
  row.reject_unknown_keys();
  return r;
}

}  // namespace

std::string_view name_of(Family f) {
  return name_in(kFamilies, f);
}

Family parse_family(std::string_view text) {
  return value_in(kFamilies, text, "family");
}

bool larger_is_more(std::string_view metric) {
  const auto* m = find_metric(metric);
  return m == nullptr || m->larger_is_more;
}

PublishedSet load_published(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) {
    throw Error(dir.string() + ": no such folder of published measurements");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  PublishedSet set;
  std::set<std::string> ids;
  for (const auto& f : files) {
    const auto root = ObjectReader::root(read_json_file(f));
    root.check_schema_version(1);
    set.sources.push_back(read_source(root, f.filename().string()));
    if (!ids.insert(set.sources.back().id).second) {
      root.fail("source", "source id '" + set.sources.back().id + "' is used by another file");
    }
    std::set<std::string> row_ids;
    for (const auto& row : root.objects("rows")) {
      set.rows.push_back(read_row(row, set.sources.size() - 1));
      if (!row_ids.insert(set.rows.back().id).second) {
        row.fail("id", "row id '" + set.rows.back().id + "' appears twice in this source");
      }
    }
    root.reject_unknown_keys();
  }
  return set;
}

}  // namespace dtplan::planner
