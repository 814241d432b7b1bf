// Published measured runs against dtplan's predictions (published_accuracy.hpp).
#include "dtplan/planner/published_accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/memory.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/gpu_topology.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/node_subset.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/model/units.hpp"
#include "dtplan/planner/layout_spec.hpp"

namespace dtplan::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A row's configuration, read with its flag names in errors.
class Config {
 public:
  explicit Config(const nlohmann::json& j) : j_(j) {}
  bool has(const char* key) const { return j_.contains(key); }
  std::string text(const char* key, std::string fallback = "") const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) throw FieldError(key, "expected a name");
    return j_[key].get<std::string>();
  }
  std::int64_t integer(const char* key, std::int64_t fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number_integer() || j_[key].get<std::int64_t>() < 1) {
      throw FieldError(key, "expected a positive integer");
    }
    return j_[key].get<std::int64_t>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number()) throw FieldError(key, "expected a number");
    return j_[key].get<double>();
  }
  bool flag(const char* key) const {
    if (!has(key)) return false;
    if (!j_[key].is_boolean()) throw FieldError(key, "expected true or false");
    return j_[key].get<bool>();
  }
  std::vector<std::int64_t> integers(const char* key) const {
    std::vector<std::int64_t> out;
    if (!has(key)) return out;
    for (const auto& v : j_[key]) {
      if (!v.is_number_integer()) throw FieldError(key, "expected a list of integers");
      out.push_back(v.get<std::int64_t>());
    }
    return out;
  }

 private:
  const nlohmann::json& j_;
};

// What every row is predicted with, loaded once; topologies and models by name.
class Inputs {
 public:
  explicit Inputs(const std::filesystem::path& data)
      : data_(data),
        table_(InterconnectTable::load(data / "interconnect.json")),
        gpus_(GpuCatalog::load(data / "gpus.json")),
        compute_(cost::load_compute_constants(data / "compute.json")),
        overheads_(cost::load_overheads(data / "overheads.json")) {}

  const GpuSpec& gpu(const std::string& name) const { return gpus_.find(name); }
  const InterconnectTable& table() const { return table_; }
  const cost::ComputeConstants& compute() const { return compute_; }
  const cost::OverheadConstants& overheads() const { return overheads_; }

  // `gpus` GPUs of `preset` nodes: `nodes` of them, or as many as the GPUs need; of each node
  // its first `per_node` GPUs (0: all; node_subset.hpp).
  const Topology& topology(const std::string& preset, std::int64_t nodes, std::int64_t gpus,
                           std::int64_t per_node) {
    auto node = load_node_template(preset, data_ / "topologies");
    if (per_node > 0) node = first_hosts(node, per_node);
    if (nodes == 0) {
      const auto one = Topology::build(node, 1, table_);
      nodes = (gpus + one.gpus_per_node() - 1) / one.gpus_per_node();
    }
    const auto key = preset + "/" + std::to_string(nodes) + "/" + std::to_string(per_node);
    auto it = topologies_.find(key);
    if (it == topologies_.end()) {
      it =
          topologies_.emplace(key, std::make_unique<Topology>(Topology::build(node, nodes, table_)))
              .first;
    }
    if (it->second->gpu_count() < gpus) {
      throw FieldError("gpus", std::to_string(gpus) + " GPUs on " + std::to_string(nodes) +
                                   " nodes of " + preset + " (" +
                                   std::to_string(it->second->gpu_count()) + " GPUs)");
    }
    return *it->second;
  }

  ModelDesc model(const std::string& name, const PublishedSource& source) const {
    const auto found = source.models.find(name);
    if (found == source.models.end()) return load_model(name, data_ / "models");
    const auto origin = source.file + " /models/" + name;
    const auto spec =
        spec_from_hf_config(ObjectReader::root(parse_json(found->second.dump(), origin)));
    return model_from_transformer(spec, name, origin);
  }

 private:
  std::filesystem::path data_;
  InterconnectTable table_;
  GpuCatalog gpus_;
  cost::ComputeConstants compute_;
  cost::OverheadConstants overheads_;
  std::map<std::string, std::unique_ptr<Topology>> topologies_;
};

// One predicted training step: its time and the throughput figures of every step metric.
struct StepPrediction {
  double step_s = 0, mfu = 0;
  std::vector<std::pair<std::string, double>> parts;  // seconds per step
  std::int64_t global_batch = 0, seq_len = 0, gpus = 0;
  Precision precision = Precision::bf16;
  // The GPU's peak: all of it (nvidia-smi), and what PyTorch reports as reserved and allocated.
  Bytes memory, memory_reserved, memory_allocated;
  ModelDesc model;
};

// The memory figure a row measured, as its metric names it.
double memory_metric(const std::string& metric, const StepPrediction& p) {
  const auto bytes = metric == "peak_allocated_GiB"  ? p.memory_allocated
                     : metric == "peak_reserved_GiB" ? p.memory_reserved
                                                     : p.memory;
  return static_cast<double>(bytes.value) / kGiB;
}

TrainingConfig training_of(const Config& c, const ModelDesc& m, const Topology& t,
                           std::int64_t gpus) {
  TrainingConfig tc;
  tc.precision = parse_precision(c.text("precision", "bf16"));
  tc.optimizer = parse_optimizer(c.text("optimizer", "adamw"));
  tc.optimizer_impl = parse_optimizer_impl(c.text("optimizer-impl", "framework"));
  tc.layer_kernels = parse_layer_kernels(c.text("layer-kernels", "framework"));
  tc.zero_grad = parse_zero_grad(c.text("zero-grad", "set-to-none"));
  tc.dp_size = gpus;
  tc.gpus_per_node = std::min(gpus, t.gpus_per_node());
  tc.gpus_per_host = t.node().gpus_per_host;
  tc.micro_batch = c.integer("micro-batch", 1);
  tc.seq_len = c.integer("seq-len", 0);
  if (m.transformer) tc.seq_len = sequence_length(*m.transformer, tc.seq_len);
  tc.checkpointing = parse_checkpointing(c.text("checkpointing", "none"));
  tc.checkpoint_every = c.integer("checkpoint-every", 1);
  tc.attention = parse_attention(c.text("attention", "flash"));
  tc.attention_kernel = parse_attention_kernel(c.text("attention-kernel", "framework"));
  check_attention_kernel(tc.attention, tc.attention_kernel);
  tc.fp8 = parse_fp8_recipe(c.text("fp8-recipe", "none"));
  tc.offload = parse_offload(c.text("offload", "none"));
  if (c.has("deepspeed-version")) {
    tc.zero3_gathers = zero3_gathers_of_deepspeed(c.text("deepspeed-version"));
  }
  return tc;
}

LayoutSpec layout_spec_of(const Config& c) {
  LayoutSpec s;
  s.tp = c.integer("tp", 1);
  s.pp = c.integer("pp", 1);
  s.cp = c.integer("cp", 1);
  s.ep = c.integer("ep", 1);
  s.etp = c.has("etp") ? c.integer("etp", 0) : 0;
  s.capacity_factor = c.has("capacity-factor") ? c.number("capacity-factor", 0) : 0;
  s.overlap_ep_comm = c.flag("overlap-ep-comm");
  s.deepep = c.flag("deepep");
  s.overlap_grad_reduce = c.flag("overlap-grad-reduce");
  s.overlap_param_gather = c.flag("overlap-param-gather");
  s.ddp_bucket_size = c.integer("ddp-bucket-size", 0);
  s.grad_reduce_in_bf16 = c.flag("grad-reduce-in-bf16");
  s.fp8_param_gather = c.flag("fp8-param-gather");
  s.tp_comm_overlap = c.flag("tp-comm-overlap");
  s.recompute_modules = c.text("recompute-modules");
  s.interleave = c.integer("interleave", 1);
  s.cp_comm = c.text("cp-comm", "p2p");
  s.framework = c.text("framework");
  s.sharding = c.text("sharding");
  s.dp_shard = c.has("dp-shard") ? c.integer("dp-shard", 0) : 0;
  s.schedule = c.text("schedule");
  s.pp_layers = c.integers("pp-layers");
  s.sequence_parallel = c.flag("sp");
  return s;
}

// Micro-steps (or micro-batches per pipeline) that reach the row's global batch.
std::int64_t accumulation(const Config& c, std::int64_t per_step) {
  if (c.has("grad-accum") && !c.has("global-batch")) return c.integer("grad-accum", 1);
  const auto batch = c.integer("global-batch", per_step);
  if (batch % per_step != 0) {
    throw FieldError("global-batch", std::to_string(batch) +
                                         " is not a multiple of micro-batch x " +
                                         "data-parallel size = " + std::to_string(per_step));
  }
  return batch / per_step;
}

StepPrediction predict_step(const PublishedRow& row, const PublishedSource& source, Inputs& in) {
  const Config c(row.config);
  StepPrediction p;
  p.model = in.model(c.text("model"), source);
  const auto& gpu = in.gpu(row.gpu);
  p.gpus = row.gpus;
  const auto& t = in.topology(c.text("topology", "dgx-a100"), c.integer("nodes", 0), p.gpus,
                              c.integer("gpus-per-node", 0));
  if (p.gpus > 1) check_gpu_on_topology(gpu, t);  // one GPU uses no link
  auto tc = training_of(c, p.model, t, p.gpus);
  p.precision = tc.precision;
  p.seq_len = tc.seq_len;
  const auto strategy = c.text("strategy", "ddp");
  const auto spec = layout_spec_of(c);
  if (wants_layout(spec, strategy)) {
    const auto dp = layout_dp(spec, p.gpus);
    const auto m = accumulation(c, tc.micro_batch * dp);
    const auto l = layout_of(spec, strategy, p.model, tc, m);
    cost::Model3D model(p.model, t, in.table(), gpu, in.compute());
    const auto time = model.time(l);
    const auto m_batches = static_cast<double>(l.micro_batches);
    p.parts = {{"compute", m_batches * time.compute_s},
               {"tensor-parallel collectives", m_batches * time.tp_comm_s},
               {"context-parallel exchange", m_batches * time.cp_comm_s},
               {"expert dispatch and combine", m_batches * time.ep_comm_s},
               {"pipeline sends", m_batches * time.p2p_s},
               {"FSDP gathers and reductions not hidden", m_batches * time.fsdp_comm_s},
               {"pipeline bubble", time.bubble_s},
               {l.overlap_grad_reduce || l.overlap_param_gather
                    ? "overlapped data-parallel buckets not hidden"
                    : "data-parallel gradients",
                time.dp_sync_s},
               {"optimizer", time.optimizer_s},
               {"host copies", time.host_transfer_s}};
    p.step_s = time.step_s;
    p.mfu = time.mfu;
    p.global_batch = l.global_batch();
    const auto memory = cost::memory_3d(p.model, l, in.overheads(), false);
    p.memory = memory.total();
    p.memory_reserved = memory.torch_reserved();
    p.memory_allocated = memory.torch_allocated();
    return p;
  }
  tc.strategy = parse_strategy(strategy);
  tc.grad_accum = accumulation(c, tc.micro_batch * p.gpus);
  auto comm = std::make_shared<cost::CommContext>(t);
  cost::CommModel all(t, in.table(), p.gpus, comm);
  cost::CommModel node(t, in.table(), std::min(p.gpus, t.gpus_per_node()), comm);
  const auto e = cost::estimate_step(p.model, tc, {tc.grad_accum, true, 1.0}, gpu, in.compute(),
                                     in.overheads(), {all, node});
  const double compute = e.compute.forward_s + e.compute.backward_s;
  const double scale = compute > 0 ? e.times.compute_s / compute : 0;  // micro-steps, straggler
  p.parts = {{"GEMMs", scale * e.compute.gemm_s},
             {"attention", scale * e.compute.attention_s},
             {"element-wise kernels", scale * e.compute.elementwise_s},
             {"GPU waiting on the host", scale * e.compute.host_wait_s},
             {"communication not hidden", e.times.exposed_comm_s},
             {"optimizer", e.times.optimizer_s},
             {"host copies", e.times.host_transfer_s}};
  p.step_s = e.times.step_s;
  p.mfu = e.mfu;
  p.global_batch = e.global_batch;
  p.memory = e.memory.gpu.total();
  p.memory_reserved = e.memory.gpu.torch_reserved();
  p.memory_allocated = e.memory.gpu.torch_allocated();
  return p;
}

// The prediction in the row's step metric.
double step_metric(const PublishedRow& row, const PublishedSource& source, const StepPrediction& p,
                   const GpuSpec& gpu) {
  const double tokens = static_cast<double>(p.global_batch * p.seq_len);
  const double gpus = static_cast<double>(p.gpus);
  if (row.metric == "step_s") return p.step_s;
  if (row.metric == "tokens_per_s") return tokens / p.step_s;
  if (row.metric == "tokens_per_s_per_gpu") return tokens / p.step_s / gpus;
  if (row.metric == "samples_per_s") return static_cast<double>(p.global_batch) / p.step_s;
  if (row.metric == "mfu") return p.mfu;
  // tflops_per_gpu: the source's FLOPs of the step over the predicted step time.
  if (source.flops == FlopsConvention::narayanan2021) {
    if (!p.model.transformer) throw Error("the narayanan2021 FLOP count needs layer shapes");
    return narayanan_flops(*p.model.transformer, p.global_batch, p.seq_len) / p.step_s / gpus /
           1e12;
  }
  const double model_flops_per_gpu_s = p.mfu * gpu.peak_flops_for(p.precision);
  if (source.flops == FlopsConvention::megatron_causal) {
    if (!p.model.transformer) throw Error("the megatron_causal FLOP count needs layer shapes");
    // The model count's attention is 3 x 2 L keys (q + o) per token (forward and backward, keys
    // capped by a sliding window); Megatron-LM counts s/2 keys whatever the window.
    const auto& t = *p.model.transformer;
    const double seq = static_cast<double>(p.seq_len);
    const double keys = cost::attended_keys(t, seq);
    const double per_key = 6.0 * static_cast<double>(t.num_layers + t.mtp_layers) *
                           static_cast<double>(t.q_size() + t.o_size()) * tokens;
    const double difference = per_key * (keys - seq / 2);
    return (model_flops_per_gpu_s - difference / p.step_s / gpus) / 1e12;
  }
  return model_flops_per_gpu_s / 1e12;
}

double predict_comm(const PublishedRow& row, Inputs& in) {
  const Config c(row.config);
  const auto& t = in.topology(c.text("topology", "dgx-a100"), c.integer("nodes", 0), row.gpus,
                              c.integer("gpus-per-node", 0));
  const auto collective = cost::parse_collective(c.text("collective", "all_reduce"));
  const auto algorithm = cost::parse_algorithm(c.text("algorithm", "auto"));
  Bytes size;
  const auto& s = row.config.at("size");
  size = s.is_number_integer() ? Bytes{s.get<std::int64_t>()}
                               : parse_size(s.get<std::string>(), "size");
  cost::CommModel model(t, in.table(), row.gpus);
  const auto e = model.estimate(collective, size, algorithm);
  if (row.metric == "time_us") return e.time_s * 1e6;
  if (row.metric == "algbw_GBps") return e.algbw_Bps / 1e9;
  return e.busbw_Bps / 1e9;
}

double error_of(const PublishedRow& row, double predicted) {
  return larger_is_more(row.metric) ? predicted / row.measured - 1.0
                                    : row.measured / predicted - 1.0;
}

// A row's workloads from what it says: experts in its layout (ep) or its needs ("moe",
// "moe:...", a mixture-of-experts model type), FP8 in its precision or needs.
std::vector<std::string> stated_workloads(const PublishedRow& row) {
  const Config c(row.config);
  bool moe = c.has("ep") && c.integer("ep", 1) > 1;
  bool fp8 = c.text("fp8-recipe", "none") != "none";
  for (const auto& n : row.needs) {
    moe |= n.rfind("moe", 0) == 0;
    fp8 |= n.rfind("fp8", 0) == 0 || n.rfind("mxfp8", 0) == 0 || n.rfind("nvfp4", 0) == 0;
  }
  std::vector<std::string> out;
  if (moe) out.emplace_back("moe");
  if (fp8) out.emplace_back("fp8");
  return out;
}

RowPrediction predict(const PublishedSet& set, std::size_t i, Inputs& in) {
  const auto& row = set.rows[i];
  RowPrediction out;
  out.row = i;
  out.workloads = stated_workloads(row);
  if (!row.expressible) {
    out.status = RowStatus::not_expressible;
    std::string needs;
    for (const auto& n : row.needs)
      needs += (needs.empty() ? "" : ", ") + n;
    out.reason = "needs " + needs;
    return out;
  }
  try {
    const auto& source = set.sources[row.source];
    if (row.family == Family::comm) {
      out.predicted = predict_comm(row, in);
    } else {
      auto p = predict_step(row, source, in);
      if (p.model.transformer && p.model.transformer->moe.active() &&
          std::find(out.workloads.begin(), out.workloads.end(), "moe") == out.workloads.end()) {
        out.workloads.insert(out.workloads.begin(), "moe");
      }
      if (row.family == Family::step) {
        out.group =
            band_group(Config(row.config).text("strategy", "ddp"), in.gpu(row.gpu).architecture);
        std::erase_if(p.parts, [](const auto& part) { return !(part.second > 0); });
        std::sort(p.parts.begin(), p.parts.end(),
                  [](const auto& a, const auto& b) { return a.second > b.second; });
        out.breakdown = std::move(p.parts);
      }
      out.predicted = row.family == Family::memory ? memory_metric(row.metric, p)
                                                   : step_metric(row, source, p, in.gpu(row.gpu));
    }
    out.error = error_of(row, out.predicted);
  } catch (const std::exception& e) {
    out.status = RowStatus::failed;
    out.reason = rendered(e, [](const std::string& f) { return f; });
  }
  return out;
}

ErrorSummary summarise(std::string name, const std::vector<const RowPrediction*>& rows) {
  ErrorSummary s;
  s.name = std::move(name);
  std::vector<double> abs;
  for (const auto* r : rows) {
    if (r->status == RowStatus::not_expressible) ++s.not_expressible;
    if (r->status == RowStatus::failed) ++s.failed;
    if (r->status != RowStatus::predicted) continue;
    ++s.predicted;
    abs.push_back(std::abs(r->error));
    s.bias += r->error;
  }
  if (abs.empty()) return s;
  const double n = static_cast<double>(abs.size());
  s.bias /= n;
  for (const double a : abs)
    s.mean_abs_error += a / n;
  std::sort(abs.begin(), abs.end());
  s.median_abs_error = abs.size() % 2 == 1 ? abs[abs.size() / 2]
                                           : 0.5 * (abs[abs.size() / 2 - 1] + abs[abs.size() / 2]);
  s.max_abs_error = abs.back();
  return s;
}

std::vector<ErrorBand> bands_of(const PublishedSet& set, const PublishedAccuracy& a) {
  std::map<std::string, std::vector<const RowPrediction*>> groups;
  for (const auto& p : a.rows) {
    const auto& row = set.rows[p.row];
    if (p.status != RowStatus::predicted || p.group.empty()) continue;
    if (set.sources[row.source].fitted_on) continue;
    groups[p.group].push_back(&p);
  }
  std::vector<ErrorBand> bands;
  for (const auto& [group, rows] : groups) {
    if (static_cast<std::int64_t>(rows.size()) < kMinBandRows) continue;
    const auto s = summarise(group, rows);
    bands.push_back({group, s.predicted, s.median_abs_error, s.mean_abs_error, s.bias});
  }
  return bands;
}

}  // namespace

std::string band_group(std::string_view strategy, std::string_view architecture) {
  const std::string_view kind =
      strategy == "megatron" || strategy == "fsdp2" ? strategy : "data-parallel";
  return std::string(kind) + " on " + std::string(architecture);
}

nlohmann::json bands_json(const std::vector<ErrorBand>& bands) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["what"] =
      "held-out error of dtplan's step predictions against data/published, by framework and "
      "GPU generation (dtplan accuracy --published --write-bands)";
  j["bands"] = nlohmann::json::array();
  for (const auto& b : bands) {
    j["bands"].push_back({{"group", b.group},
                          {"rows", b.rows},
                          {"median_abs_error", b.median_abs_error},
                          {"mean_abs_error", b.mean_abs_error},
                          {"bias", b.bias}});
  }
  return j;
}

std::vector<ErrorBand> load_error_bands(const std::filesystem::path& path) {
  const auto root = ObjectReader::root(read_json_file(path));
  root.check_schema_version(1);
  (void)root.string("what");
  std::vector<ErrorBand> bands;
  for (const auto& b : root.objects("bands")) {
    ErrorBand band;
    band.group = b.string("group");
    band.rows = b.positive_integer("rows");
    band.median_abs_error = b.number("median_abs_error", NumberRange::non_negative(100));
    band.mean_abs_error = b.number("mean_abs_error", NumberRange::non_negative(100));
    band.bias = b.number("bias");
    b.reject_unknown_keys();
    bands.push_back(std::move(band));
  }
  root.reject_unknown_keys();
  return bands;
}

const ErrorBand* find_band(const std::vector<ErrorBand>& bands, std::string_view group) {
  for (const auto& b : bands) {
    if (b.group == group) return &b;
  }
  return nullptr;
}

double narayanan_flops(const TransformerSpec& m, std::int64_t global_batch, std::int64_t seq_len) {
  const double B = static_cast<double>(global_batch), s = static_cast<double>(seq_len);
  const double l = static_cast<double>(m.num_layers), h = static_cast<double>(m.hidden_size);
  const double V = static_cast<double>(m.vocab_size);
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

PublishedAccuracy published_accuracy(const PublishedSet& set, const PublishedRequest& r) {
  Inputs in(r.data_dir);
  PublishedAccuracy out;
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < set.rows.size(); ++i) {
    const auto& row = set.rows[i];
    if (r.family && row.family != *r.family) continue;
    if (!r.source.empty() && set.sources[row.source].id != r.source) continue;
    chosen.push_back(i);
  }
  for (const auto i : chosen) {
    out.rows.push_back(predict(set, i, in));
    if (r.progress)
      r.progress(static_cast<std::int64_t>(out.rows.size()),
                 static_cast<std::int64_t>(chosen.size()));
  }
  const auto held_out = [&](const RowPrediction& p) {
    return !set.sources[set.rows[p.row].source].fitted_on;
  };
  for (const auto f : {Family::step, Family::comm, Family::memory}) {
    std::vector<const RowPrediction*> rows;
    for (const auto& p : out.rows) {
      if (set.rows[p.row].family == f && held_out(p)) rows.push_back(&p);
    }
    if (!rows.empty()) out.by_family.push_back(summarise(std::string(name_of(f)), rows));
    for (const char* w : {"moe", "fp8"}) {
      std::vector<const RowPrediction*> of;
      for (const auto* p : rows) {
        if (std::find(p->workloads.begin(), p->workloads.end(), w) != p->workloads.end())
          of.push_back(p);
      }
      if (!of.empty()) out.by_workload.push_back(summarise(std::string(name_of(f)) + ": " + w, of));
    }
  }
  for (std::size_t s = 0; s < set.sources.size(); ++s) {
    std::vector<const RowPrediction*> rows;
    for (const auto& p : out.rows) {
      if (set.rows[p.row].source == s) rows.push_back(&p);
    }
    if (rows.empty()) continue;
    out.by_source.push_back(summarise(set.sources[s].id, rows));
    out.by_source.back().fitted_on = set.sources[s].fitted_on;
  }
  out.bands = bands_of(set, out);
  out.ranking = ranking_of(set, out.rows);
  return out;
}

}  // namespace dtplan::planner
