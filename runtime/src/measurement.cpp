// Measurement JSON: writing and checked reading (see measurement.hpp).
#include "dtplan/runtime/measurement.hpp"

#include <algorithm>

#include "dtplan/cost/hardware_profile.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"

namespace dtplan::runtime {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json step_json(const StepRow& s) {
  return {{"step", s.step},
          {"time_s", s.time_s},
          {"forward_s", s.forward_s},
          {"backward_s", s.backward_s},
          {"comm_wait_s", s.comm_wait_s},
          {"optimizer_s", s.optimizer_s},
          {"loss", s.loss},
          {"grad_norm", s.grad_norm},
          {"loss_scale", s.loss_scale},
          {"skipped", s.skipped}};
}

StepRow step_from(const ObjectReader& r) {
  StepRow s;
  s.step = r.integer("step");
  s.time_s = r.number("time_s", kPositiveSeconds);
  s.forward_s = r.number("forward_s", kSeconds);
  s.backward_s = r.number("backward_s", kSeconds);
  s.comm_wait_s = r.number("comm_wait_s", kSeconds);
  s.optimizer_s = r.number("optimizer_s", kSeconds);
  s.loss = r.number("loss");
  s.grad_norm = r.number("grad_norm", NumberRange::non_negative(1e30));
  s.loss_scale = r.number("loss_scale", NumberRange::positive(1e30));
  s.skipped = r.boolean("skipped");
  r.reject_unknown_keys();
  return s;
}

nlohmann::json executed_json(const Executed& e) {
  return {{"strategy", name_of(e.strategy)},
          {"optimizer", name_of(e.optimizer)},
          {"compute_precision", e.compute_precision},
          {"loss_scaling", e.loss_scaling},
          {"micro_batch", e.micro_batch},
          {"grad_accum", e.grad_accum},
          {"no_sync", e.no_sync},
          {"bucket_cap_bytes", e.bucket_cap_bytes},
          {"buckets", e.buckets},
          {"lr", e.lr},
          {"max_grad_norm", e.max_grad_norm},
          {"seed", e.seed}};
}

Executed executed_from(const ObjectReader& r) {
  Executed e;
  try {
    e.strategy = parse_strategy(r.string("strategy"));
    e.optimizer = parse_optimizer(r.string("optimizer"));
  } catch (const Error& err) {
    r.fail_here(err.what());
  }
  e.compute_precision = r.string("compute_precision");
  e.loss_scaling = r.boolean("loss_scaling");
  e.micro_batch = r.positive_integer("micro_batch");
  e.grad_accum = r.positive_integer("grad_accum");
  e.no_sync = r.boolean("no_sync");
  e.bucket_cap_bytes = r.positive_integer("bucket_cap_bytes");
  e.buckets = r.positive_integer("buckets");
  e.lr = r.number("lr", kLearningRate);
  e.max_grad_norm = r.number("max_grad_norm", NumberRange::non_negative(1e30));
  e.seed = r.integer("seed");
  r.reject_unknown_keys();
  return e;
}

nlohmann::json memory_json(const RankMemory& m) {
  return {{"rank", m.rank},
          {"peak_bytes", m.peak_bytes},
          {"components", m.components},
          {"peak_rss_bytes", m.peak_rss_bytes}};
}

RankMemory memory_from(const ObjectReader& r) {
  RankMemory m;
  m.rank = static_cast<int>(r.integer("rank"));
  m.peak_bytes = r.integer("peak_bytes");
  const auto c = r.object("components");
  for (const auto& [key, value] : r.value("components").items())
    m.components[key] = c.integer(key);
  c.reject_unknown_keys();
  m.peak_rss_bytes = r.integer("peak_rss_bytes");
  r.reject_unknown_keys();
  return m;
}

CollectiveSummary collective_from(const ObjectReader& r) {
  CollectiveSummary c;
  c.kind = r.string("kind");
  c.phase = r.string("phase");
  c.bytes = r.integer("bytes");
  c.count_per_step = r.positive_integer("count_per_step");
  c.time_s = r.number("time_s", kSeconds);
  r.reject_unknown_keys();
  return c;
}

}  // namespace

StepRow Measurement::median() const {
  auto med = [&](double StepRow::*f) {
    std::vector<double> v;
    for (const auto& s : steps)
      v.push_back(s.*f);
    return median_of(v);
  };
  StepRow r;
  r.time_s = med(&StepRow::time_s);
  r.forward_s = med(&StepRow::forward_s);
  r.backward_s = med(&StepRow::backward_s);
  r.comm_wait_s = med(&StepRow::comm_wait_s);
  r.optimizer_s = med(&StepRow::optimizer_s);
  r.loss = med(&StepRow::loss);
  r.grad_norm = med(&StepRow::grad_norm);
  return r;
}

std::int64_t Measurement::global_batch() const {
  return executed.micro_batch * executed.grad_accum * world_size / workload.replica_ranks();
}

double Measurement::samples_per_s() const {
  const double t = median().time_s;
  return t > 0 ? static_cast<double>(global_batch()) / t : 0;
}

double Measurement::tokens_per_s() const {
  return samples_per_s() * static_cast<double>(workload.seq_len);
}

nlohmann::json to_json(const Measurement& m) {
  auto steps = nlohmann::json::array();
  for (const auto& s : m.steps)
    steps.push_back(step_json(s));
  auto collectives = nlohmann::json::array();
  for (const auto& c : m.collectives) {
    collectives.push_back({{"kind", c.kind},
                           {"phase", c.phase},
                           {"bytes", c.bytes},
                           {"count_per_step", c.count_per_step},
                           {"time_s", c.time_s}});
  }
  auto memory = nlohmann::json::array();
  for (const auto& r : m.memory)
    memory.push_back(memory_json(r));
  const auto med = m.median();
  return {{"schema_version", 1},
          {"tool", "dtplan-run"},
          {"version", m.version},
          {"created", m.created},
          {"command", m.command},
          {"plan_file", m.plan_file},
          {"plan", to_json(m.plan)},
          {"backend", m.backend},
          {"world_size", m.world_size},
          {"host", m.host},
          {"hardware",
           {{"device", m.device},
            {"cpu", m.cpu},
            {"cores", m.cores},
            {"host_memory_bytes", m.host_memory_bytes},
            {"device_capacity_bytes", m.device_capacity_bytes},
            {"cpu_share", m.cpu_share ? nlohmann::json(*m.cpu_share) : nlohmann::json()}}},
          {"versions", m.versions},
          {"scale", m.scale},
          {"workload", cost::to_json(m.workload)},
          {"executed", executed_json(m.executed)},
          {"warmup_steps", m.warmup},
          {"steps", steps},
          {"summary",
           {{"step_time_s", med.time_s},
            {"forward_s", med.forward_s},
            {"backward_s", med.backward_s},
            {"comm_wait_s", med.comm_wait_s},
            {"optimizer_s", med.optimizer_s},
            {"samples_per_s", m.samples_per_s()},
            {"tokens_per_s", m.tokens_per_s()},
            {"max_peak_bytes", std::max_element(m.memory.begin(), m.memory.end(),
                                                [](const auto& a, const auto& b) {
                                                  return a.peak_bytes < b.peak_bytes;
                                                })
                                   ->peak_bytes}}},
          {"collectives", collectives},
          {"memory", memory},
          {"notes", m.notes}};
}

Measurement measurement_from_json(const std::filesystem::path& path) {
  const auto r = ObjectReader::root(read_json_file(path));
  r.check_schema_version(1);
  if (r.string("tool") != "dtplan-run")
    r.fail("tool", "is not dtplan-run: this is not a measurement file");
  Measurement m;
  m.version = r.string("version");
  m.created = r.string("created");
  m.command = r.string("command");
  m.plan_file = r.string("plan_file");
  m.plan = plan_from_reader(r.object("plan"));
  m.backend = r.string("backend");
  if (const auto problem = cost::backend_problem(m.backend)) r.fail("backend", *problem);
  m.world_size = r.positive_integer("world_size");
  m.host = r.string("host");
  const auto hw = r.object("hardware");
  m.device = hw.string("device");
  m.cpu = hw.string("cpu");
  m.cores = hw.integer("cores");
  m.host_memory_bytes = hw.integer("host_memory_bytes");
  m.device_capacity_bytes = hw.integer("device_capacity_bytes");
  m.cpu_share = hw.optional_number("cpu_share", NumberRange::non_negative(1e3));
  hw.reject_unknown_keys();
  const auto v = r.object("versions");
  for (const auto& [key, value] : r.value("versions").items())
    m.versions[key] = v.string(key);
  v.reject_unknown_keys();
  m.scale = r.number("scale", kModelScale);
  m.workload = cost::dense_stack_from_json(r.object("workload"));
  m.executed = executed_from(r.object("executed"));
  m.warmup = r.integer("warmup_steps");
  for (const auto& s : r.objects("steps"))
    m.steps.push_back(step_from(s));
  if (m.steps.empty()) r.fail("steps", "is empty: nothing was measured");
  (void)r.value("summary");  // derived from the steps; recomputed, not trusted
  for (const auto& c : r.objects("collectives"))
    m.collectives.push_back(collective_from(c));
  for (const auto& mem : r.objects("memory"))
    m.memory.push_back(memory_from(mem));
  if (m.world_size % m.workload.replica_ranks() != 0) {
    r.fail("world_size", "is not a multiple of the workload's tensor-parallel x pipeline ranks");
  }
  if (static_cast<std::int64_t>(m.memory.size()) != m.world_size) {
    r.fail("memory", "does not have one entry per rank");
  }
  m.notes = r.strings("notes");
  r.reject_unknown_keys();
  return m;
}

std::optional<std::string> profile_mismatch(const Measurement& m, const cost::HardwareProfile& p) {
  const std::string calibrate = "dtplan calibrate --np " + std::to_string(m.world_size) +
                                " --out FILE measures this machine; then --profile FILE";
  if (p.hardware.rfind(m.device, 0) != 0) {
    return "the profile was measured on '" + p.hardware + "', this run on '" + m.device +
           "': the time errors include that difference (" + calibrate + ")";
  }
  if (!p.attention && m.workload.attention == cost::StackAttention::causal) {
    return "the profile predates the runtime's attention and norms: it has no attention fit "
           "(attention is priced from its GEMMs and softmax) and its step correction was fitted "
           "on the older workload, so the time errors include that (" +
           calibrate + ")";
  }
  std::int64_t calibrated = 0;  // the ranks of the calibration run: its largest collective group
  for (const auto& c : p.collectives)
    calibrated = std::max(calibrated, c.ranks);
  if (calibrated > 0 && calibrated != m.world_size) {
    return "the profile was calibrated over " + std::to_string(calibrated) +
           " ranks and this run " + "had " + std::to_string(m.world_size) +
           ": ranks share the machine's cores and memory " +
           "differently, so its compute rates do not hold (" + calibrate + ")";
  }
  const auto& w = m.workload;
  if (!p.dropout_draw_s_per_element &&
      w.attention_dropout + w.hidden_dropout + w.embedding_dropout > 0) {
    return "the profile predates the runtime's dropout: it has no timing of mask draws (each is "
           "priced as a 9-byte element-wise pass), so the time errors include that (" +
           calibrate + ")";
  }
  return std::nullopt;
}

cost::RuntimeRun runtime_run_of(const Measurement& m) {
  cost::RuntimeRun r;
  r.stack = m.workload;
  r.strategy = m.executed.strategy;
  r.optimizer = m.executed.optimizer;
  r.ranks = m.world_size / m.workload.replica_ranks();  // data-parallel ranks
  r.micro_batch = m.executed.micro_batch;
  r.grad_accum = m.executed.grad_accum;
  r.no_sync = m.executed.no_sync;
  r.bucket_cap_bytes = m.executed.bucket_cap_bytes;
  return r;
}

}  // namespace dtplan::runtime
