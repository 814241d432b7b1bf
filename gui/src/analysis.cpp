// The session's analysis through the library (see analysis.hpp).
#include "analysis.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "dtplan/cost/collectives.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/cost/trace.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/planner/cluster_inputs.hpp"
#include "dtplan/planner/layout_spec.hpp"
#include "dtplan/runtime/measurement.hpp"
#include "labels.hpp"

namespace dtplan::gui {
namespace {

struct Inputs {
  std::filesystem::path data;
  ModelDesc model;
  std::unique_ptr<const planner::ClusterInputs> cluster;  // topology, table, GPU, constants
  TrainingConfig config;
};

// `parse` of a session's field, whose errors name the field (its input's label when shown).
template <class Parse>
auto field_value(const char* field, const Parse& parse) {
  try {
    return parse();
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    throw FieldError(field, e.what());
  }
}

TrainingConfig config_of(const Session& s, const ModelDesc& m, const Topology& t) {
  if (s.gpus > t.gpu_count()) {
    throw Error("GPUs " + std::to_string(s.gpus) + ": the topology has " +
                std::to_string(t.gpu_count()));
  }
  TrainingConfig c;
  if (!planner::is_layout_framework(s.strategy))
    c.strategy = field_value("strategy", [&] { return parse_strategy(s.strategy); });
  c.precision = field_value("precision", [&] { return parse_precision(s.precision); });
  c.optimizer = field_value("optimizer", [&] { return parse_optimizer(s.optimizer); });
  c.optimizer_impl =
      field_value("optimizer_impl", [&] { return parse_optimizer_impl(s.optimizer_impl); });
  c.layer_kernels =
      field_value("layer_kernels", [&] { return parse_layer_kernels(s.layer_kernels); });
  c.zero_grad = field_value("zero_grad", [&] { return parse_zero_grad(s.zero_grad); });
  c.dp_size = s.gpus;
  c.gpus_per_node = std::min(s.gpus, t.gpus_per_node());
  c.gpus_per_host = t.node().gpus_per_host;
  c.micro_batch = s.micro_batch;
  c.seq_len = s.seq_len;
  sequence_length(m, c.seq_len);
  if (m.transformer && c.seq_len == 0) c.seq_len = m.transformer->max_positions;
  c.checkpointing =
      field_value("checkpointing", [&] { return parse_checkpointing(s.checkpointing); });
  c.checkpoint_every = s.checkpoint_every;
  c.attention = field_value("attention", [&] { return parse_attention(s.attention); });
  c.attention_kernel =
      field_value("attention_kernel", [&] { return parse_attention_kernel(s.attention_kernel); });
  check_attention_kernel(c.attention, c.attention_kernel);
  c.fp8 = field_value("fp8_recipe", [&] { return parse_fp8_recipe(s.fp8_recipe); });
  c.offload = field_value("offload", [&] { return parse_offload(s.offload); });
  c.grad_accum = s.grad_accum;
  return c;
}

Inputs load_inputs(const Session& s) {
  Inputs in;
  in.data = resolve_data_dir("");
  in.model = load_model(s.model, in.data / "models");
  in.cluster = std::make_unique<const planner::ClusterInputs>(
      in.data, planner::ClusterNames{s.topology, s.nodes, s.gpu, s.gpus_per_node});
  in.config = config_of(s, in.model, in.cluster->topology);
  return in;
}

std::vector<MemoryBar> memory_bars(const Inputs& in) {
  std::vector<MemoryBar> out;
  for (const auto& traits : cost::all_strategy_traits()) {  // the registry's order
    const auto st = traits.strategy;
    auto c = in.config;
    c.strategy = st;
    try {
      out.push_back({st, cost::estimate_memory(in.model, c, in.cluster->overheads).gpu, {}});
    } catch (const Error& e) {
      out.push_back({st, {}, message_of(e)});  // e.g. DataParallel on more than one node
    }
  }
  return out;
}

TopologyPicture picture_of(const Inputs& in) {
  const auto& t = in.cluster->topology;
  const auto& g = t.graph();
  TopologyPicture p;
  for (auto v : boost::make_iterator_range(boost::vertices(g))) {
    p.devices.push_back({g[v].name, g[v].kind, g[v].host, g[v].gpu_rank});
  }
  std::map<std::int64_t, std::size_t> by_physical;
  for (auto e : boost::make_iterator_range(boost::edges(g))) {
    const auto id = g[e].physical_id();
    if (by_physical.count(id)) continue;
    by_physical[id] = p.links.size();
    p.links.push_back({boost::source(e, g), boost::target(e, g), std::string(g[e].link_class()),
                       g[e].effective_Bps(), 0, false});
  }
  cost::CommModel comm(t, in.cluster->table, in.config.dp_size);
  const auto& rings = comm.rings();
  p.ring = rings.rings.front();
  p.channels = rings.rings.size();
  p.ring_bandwidth_Bps = rings.bandwidth_Bps;
  p.bottleneck = rings.bottleneck;
  cost::Router router(t);
  for (std::size_t i = 0; i < p.ring.size() && p.ring.size() > 1; ++i) {
    const auto a = t.gpu(p.ring[i]), b = t.gpu(p.ring[(i + 1) % p.ring.size()]);
    for (const auto k : router.route(a, b).edges)
      ++p.links[by_physical.at(router.link(k).physical_id())].ring_hops;
  }
  for (auto& l : p.links) {
    const auto& a = p.devices[l.from].name;
    const auto& b = p.devices[l.to].name;
    l.bottleneck = (a == p.bottleneck.from && b == p.bottleneck.to) ||
                   (a == p.bottleneck.to && b == p.bottleneck.from);
  }
  return p;
}

cost::StepEstimate step_of(const Inputs& in) {
  const auto& t = in.cluster->topology;
  cost::StepOptions o;
  o.micro_steps = in.config.grad_accum;
  o.no_sync = in.config.no_sync;
  const auto context = std::make_shared<cost::CommContext>(t);
  cost::CommModel all(t, in.cluster->table, in.config.dp_size, context);
  cost::CommModel node(t, in.cluster->table, std::min(in.config.dp_size, t.gpus_per_node()),
                       context);
  return cost::estimate_step(in.model, in.config, o, in.cluster->gpu, in.cluster->compute,
                             in.cluster->overheads, {all, node});
}

bool is_layout(const Session& s) {
  return planner::wants_layout(s.layout, s.strategy);
}

// The session's layout (under the framework its strategy names), or a FieldError naming the
// input that breaks a rule (a data-parallel strategy with layout inputs among them).
LayoutAnalysis layout_of(const Inputs& in, const Session& s) {
  LayoutAnalysis out;
  out.layout = planner::layout_of(s.layout, s.strategy, in.model, in.config, s.grad_accum);
  out.memory = cost::memory_3d(in.model, out.layout, in.cluster->overheads);
  out.time = cost::time_3d(in.model, out.layout, in.cluster->topology, in.cluster->table,
                           in.cluster->gpu, in.cluster->compute);
  out.timeline = cost::timeline_3d(out.layout, out.time);
  using cost::DpSharding;
  using cost::Framework;
  for (const auto& [framework, sharding] : {std::pair{Framework::megatron, DpSharding::none},
                                            {Framework::megatron, DpSharding::optimizer},
                                            {Framework::fsdp2, DpSharding::gradients},
                                            {Framework::fsdp2, DpSharding::parameters}}) {
    auto l = out.layout;
    l.framework = framework;
    l.sharding = sharding;
    try {
      cost::check_layout(*in.model.transformer, l, in.config.gpus_per_node);
      out.by_sharding.push_back(
          {framework, sharding, cost::memory_3d(in.model, l, in.cluster->overheads), {}});
    } catch (const Error& e) {
      out.by_sharding.push_back(
          {framework, sharding, {}, message_of(e)});  // e.g. hybrid under Megatron
    }
  }
  return out;
}

std::vector<std::string> notes_of(const planner::UnifiedPlan& p, const planner::PlanRequest& r) {
  std::vector<std::string> out;
  if (auto note = planner::layout_beats_exports_note(p, r.objective)) out.push_back(*note);
  if (auto note = planner::expert_layout_note(p, r.objective)) out.push_back(*note);
  if (auto note = planner::recompute_note(p, r.objective)) out.push_back(*note);
  if (auto note = planner::idle_gpus_note(p.data_parallel, r.global_batch)) out.push_back(*note);
  out.insert(out.end(), p.suggestions.begin(), p.suggestions.end());
  return out;
}

// How the session's frameworks run, for the layouts the plan searches (as dtplan plan's flags
// of the same names): the overlaps, DeepEP, the buckets, bf16 gradients, FP8 weights.
void framework_flags(const planner::LayoutSpec& l, planner::LayoutRequest& r) {
  r.overlap_ep_comm = l.overlap_ep_comm;
  r.deepep = l.deepep;
  r.overlap_grad_reduce = l.overlap_grad_reduce || l.overlap_param_gather;
  r.overlap_param_gather = l.overlap_param_gather;
  r.ddp_bucket_size = r.overlap_grad_reduce ? l.ddp_bucket_size : 0;
  r.grad_reduce_in_bf16 = l.grad_reduce_in_bf16;
  r.fp8_param_gather = l.fp8_param_gather;
  r.tp_comm_overlap = l.tp_comm_overlap;
}

planner::PlanRequest request_of(const Inputs& in, const Session& s) {
  planner::PlanRequest r;
  r.global_batch = s.global_batch;
  r.seq_len = in.config.seq_len;
  r.optimizer = in.config.optimizer;
  r.optimizer_impl = in.config.optimizer_impl;
  r.layer_kernels = in.config.layer_kernels;
  r.attention = in.config.attention;
  r.attention_kernel = in.config.attention_kernel;
  r.max_gpus = s.gpus;
  r.top_k = 50;
  return r;
}

// The session's profile; else one beside the measurement (profile-cuda-1rank.json, as
// data/measurements keeps them); else the bundled one for its backend and ranks.
std::filesystem::path profile_for(const Session& s, const std::string& file,
                                  const runtime::Measurement& m,
                                  const std::filesystem::path& data) {
  if (!s.profile.empty()) return s.profile;
  const auto n = std::to_string(m.world_size);
  const auto dir = std::filesystem::path(file).parent_path();
  for (const auto& name : {"profile-" + m.backend + "-" + n + "rank.json",
                           "profile-" + m.backend + "-" + n + "ranks.json"}) {
    if (std::filesystem::exists(dir / name)) return dir / name;
  }
  return cost::bundled_profile(data, m.backend, m.world_size);
}

void validate(const Session& s, const std::filesystem::path& data, Analysis& a) {
  for (const auto& file : s.measurements) {
    try {
      const auto m = runtime::measurement_from_json(file);
      const auto profile = cost::load_profile(profile_for(s, file, m, data));
      const auto p = cost::predict_runtime_step(runtime::runtime_run_of(m), profile);
      ValidationRow row;
      row.file = file;
      // x the processes; a tensor or pipeline split says how they divide the model.
      row.label = m.plan.model + " " + std::string(name_of(m.executed.strategy)) + " x" +
                  std::to_string(m.world_size) + " " + m.backend;
      const auto& w = m.workload;
      if (w.replica_ranks() > 1) {
        row.label += " (dp " + std::to_string(m.world_size / w.replica_ranks());
        if (w.tp > 1) row.label += " x tp " + std::to_string(w.tp);
        if (w.pp > 1) row.label += " x pp " + std::to_string(w.pp);
        row.label += ")";
      }
      // What the run computed in and recomputed, where it is not the default.
      if (m.workload.compute != cost::ElementType::fp32) {
        row.label += ", " + std::string(cost::name_of(m.workload.compute));
      }
      if (m.workload.recompute != Checkpointing::none) {
        row.label += ", " + std::string(name_of(m.workload.recompute)) + " recomputation";
      }
      row.predicted_step_s = p.step_s;
      row.measured_step_s = m.median().time_s;
      row.predicted_peak_bytes = static_cast<double>(p.peak_bytes);
      row.measured_peak_bytes = static_cast<double>(m.memory.front().peak_bytes);
      a.validation.push_back(row);
      if (const auto other = runtime::profile_mismatch(m, profile)) {
        a.problems.push_back("validation: " + file + ": " + *other);
      }
    } catch (const std::exception& e) {
      a.problems.push_back("validation: " + file + ": " + message_of(e));
    }
  }
}

}  // namespace

Plan plan_file_of(const Analysis& a, const planner::Candidate& c) {
  const auto& s = a.session;
  return planner::plan_file(c, a.plan_request, a.model,
                            {s.model, s.topology, s.nodes, a.gpus_per_node, s.gpu});
}

NamedComponents components_of(const cost::MemoryComponents& m) {
  return {{"weights", m.weights},      {"master weights", m.master_weights},
          {"gradients", m.gradients},  {"optimizer states", m.optimizer_states},
          {"buckets", m.grad_buckets}, {"activations", m.activations},
          {"buffers", m.buffers},      {"overhead", m.overhead}};
}

NamedComponents components_of(const cost::Memory3D& m) {
  return {{"weights", m.weights},         {"master weights", m.master_weights},
          {"gradients", m.gradients},     {"optimizer states", m.optimizer_states},
          {"activations", m.activations}, {"logits", m.logits},
          {"buffers", m.buffers},         {"overhead", m.overhead}};
}

Bytes MemoryColumn::total() const {
  Bytes sum{0};
  for (const auto& [name, bytes] : components)
    sum.value += bytes.value;
  return sum;
}

std::vector<MemoryColumn> memory_columns(const Analysis& a) {
  std::vector<MemoryColumn> out;
  if (a.layout) {
    for (const auto& bar : a.layout->by_sharding) {
      out.push_back({std::string(cost::name_of(bar.framework)) + ", sharding " +
                         std::string(cost::name_of(bar.sharding)),
                     components_of(bar.memory), bar.not_applicable});
    }
    return out;
  }
  for (const auto& bar : a.memory)
    out.push_back({std::string(name_of(bar.strategy)), components_of(bar.gpu), bar.not_applicable});
  return out;
}

const std::vector<cost::TimelineEvent>& timeline_of(const Analysis& a) {
  return a.layout ? a.layout->timeline : a.step.timeline;
}

double step_seconds(const Analysis& a) {
  return a.layout ? a.layout->time.step_s : a.step.times.step_s;
}

double samples_per_second(const Analysis& a) {
  return a.layout ? a.layout->time.samples_per_s : a.step.samples_per_s;
}

// The error band of the session's framework or strategy on its GPU's generation.
void error_band(const Session& s, const Inputs& in, Analysis& a) {
  const std::string kind =
      a.layout ? std::string(cost::name_of(a.layout->layout.framework)) : s.strategy;
  a.band_group = planner::band_group(kind, in.cluster->gpu.architecture);
  const auto file = in.data / "error_bands.json";
  if (!std::filesystem::exists(file)) return;
  try {
    const auto bands = planner::load_error_bands(file);
    if (const auto* b = planner::find_band(bands, a.band_group)) a.band = *b;
  } catch (const Error& e) {
    a.problems.push_back("accuracy: " + message_of(e));
  }
}

Analysis analyse(const Session& s) {
  const auto in = load_inputs(s);
  Analysis a;
  a.session = s;
  a.model = in.model;
  a.params = in.model.params;
  a.capacity_bytes = static_cast<double>(in.cluster->gpu.memory.value);
  a.topology = picture_of(in);
  if (is_layout(s)) {
    // A layout that breaks a rule is the session's error (the form names the input); the
    // data-parallel bars and step do not describe it.
    a.layout = layout_of(in, s);
  } else {
    a.memory = memory_bars(in);
    try {
      a.step = step_of(in);
    } catch (const Error& e) {
      // The session's strategy cannot run here (DataParallel on several nodes): the other
      // views still show the session, and the planner searches the strategies that can.
      a.problems.push_back("timeline: " + message_of(e));
    }
  }
  a.gpus_per_node = in.cluster->topology.gpus_per_node();
  a.plan_request = request_of(in, s);
  try {
    planner::LayoutRequest request;
    request.plan = a.plan_request;
    request.fp8 = parse_fp8_recipe(s.fp8_recipe);
    framework_flags(s.layout, request);
    request.plan.rejected_kept = kRejectedListed;
    a.plan =
        planner::plan_layouts(in.model, in.cluster->topology, in.cluster->table, in.cluster->gpu,
                              request, in.cluster->compute, in.cluster->overheads);
    a.plan_notes = notes_of(a.plan, a.plan_request);
  } catch (const std::exception& e) {
    a.problems.push_back("plan: " + message_of(e));
  }
  validate(s, in.data, a);
  error_band(s, in, a);
  return a;
}

}  // namespace dtplan::gui
