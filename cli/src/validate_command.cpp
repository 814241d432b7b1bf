// `dtplan validate`: predicted against measured, figure by figure, for a dtplan-run
// measurement. Predictions come from the cost model with the hardware profile of the machine
// measured (memory model for model states; dense-stack shapes for activations and buffers;
// fitted GEMM, element-wise, optimizer and collective constants for time).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/runtime/measurement.hpp"
#include "dtplan/runtime/runtime_run.hpp"
#include "dtplan/runtime/trials.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

struct ValidateOptions {
  std::string plan;
  std::string measured;
  std::string profile;
  std::string data_dir;
  bool json = false;
};

// Below this, a phase time is the timer's reading of an empty phase: dtplan-run times a phase
// between two clock reads, 0.1-0.2 us apart with nothing between them on the development
// machine (a measured 'waiting for gradients' of 0.17 us where nothing waits).
constexpr double kEmptyPhase_s = 1e-6;

struct Figure {
  std::string name;
  std::string unit;  // bytes, s, samples/s, tokens/s
  std::optional<double> predicted;
  std::optional<double> measured;
  // A paired exchange (send_recv) is timed from the call to its return, the wait for the
  // neighbouring stage included, while the prediction puts that wait in the phase times: the
  // two are not the same quantity, and no error is given.
  bool includes_wait = false;
  // Nothing to compare where both sides say the phase is empty.
  bool both_empty() const {
    return unit == "s" && predicted && measured && *predicted < kEmptyPhase_s &&
           *measured < kEmptyPhase_s;
  }
  std::optional<double> error() const {
    if (!predicted || !measured || *measured == 0 || both_empty() || includes_wait) {
      return std::nullopt;
    }
    return (*predicted - *measured) / *measured;
  }
};

// The profile named, or the bundled one for the measurement's backend and ranks.
std::filesystem::path profile_path(const ValidateOptions& o, const runtime::Measurement& m) {
  if (!o.profile.empty()) return o.profile;
  return cost::bundled_profile(resolve_data_dir(o.data_dir), m.backend, m.world_size);
}

std::string collective_name(const std::string& kind, const std::string& phase, std::int64_t bytes,
                            std::int64_t count) {
  return kind + " " + std::to_string(bytes) + " B (" + phase + ", " + std::to_string(count) +
         "/step)";
}

std::vector<Figure> figures_of(const runtime::Measurement& m, const cost::RuntimePrediction& p) {
  std::vector<Figure> f;
  const auto& rank0 = m.memory.front();
  for (const auto& [component, bytes] : p.memory) {
    const auto it = rank0.components.find(component);
    f.push_back(
        {"memory " + component, "bytes", static_cast<double>(bytes),
         it == rank0.components.end() ? std::nullopt : std::optional<double>(double(it->second))});
  }
  f.push_back({"memory peak (rank 0)", "bytes", double(p.peak_bytes), double(rank0.peak_bytes)});
  std::map<std::tuple<std::string, std::string, std::int64_t>, Figure> coll;
  for (const auto& c : p.collectives) {
    coll[{c.kind, c.phase, c.bytes}] = {collective_name(c.kind, c.phase, c.bytes, c.count_per_step),
                                        "s", c.time_s, std::nullopt};
  }
  for (const auto& c : m.collectives) {
    auto& fig = coll[{c.kind, c.phase, c.bytes}];
    if (fig.name.empty())
      fig = {collective_name(c.kind, c.phase, c.bytes, c.count_per_step), "s", std::nullopt,
             std::nullopt};
    fig.measured = c.time_s;
  }
  for (auto& [key, fig] : coll) {
    fig.includes_wait = std::get<0>(key) == "send_recv";
    f.push_back(fig);
  }
  const auto med = m.median();
  f.push_back({"forward (all micro-steps)", "s", p.forward_s, med.forward_s});
  f.push_back({"backward (all micro-steps)", "s", p.backward_s, med.backward_s});
  f.push_back({"waiting for gradients", "s", p.comm_wait_s, med.comm_wait_s});
  f.push_back({"optimizer", "s", p.optimizer_s, med.optimizer_s});
  f.push_back({"step time", "s", p.step_s, med.time_s});
  const double batch = static_cast<double>(m.global_batch());
  f.push_back({"throughput", "samples/s", batch / p.step_s, m.samples_per_s()});
  f.push_back(
      {"throughput", "tokens/s", batch * double(m.workload.seq_len) / p.step_s, m.tokens_per_s()});
  return f;
}

std::string cell(std::optional<double> v, const std::string& unit) {
  if (!v) return "-";
  if (unit == "bytes") return fixed(*v / 1048576.0, 3) + " MiB";
  if (unit == "s") return fixed(*v * 1e3, 3) + " ms";
  return fixed(*v, 1) + " " + unit;
}

std::string percent(std::optional<double> e) {
  if (!e) return "-";
  return (*e >= 0 ? "+" : "") + fixed(*e * 100, 1) + "%";
}

nlohmann::json opt(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

// The plan fields in which `measured` differs from `given`, nested ones by their path:
// "tp 2 (--plan: 1), predicted/step_time_s 0.08 (--plan: 0.09)". Values are printed bare (no
// braces, which error messages reserve for flag names).
void plan_differences(const nlohmann::json& measured, const nlohmann::json& given,
                      const std::string& path, std::string& out) {
  for (const auto& [key, value] : measured.items()) {
    std::string at = path;
    if (!at.empty()) at += "/";
    at += key;
    const bool has = given.contains(key);
    if (value.is_object() && has && given.at(key).is_object()) {
      plan_differences(value, given.at(key), at, out);
      continue;
    }
    if (has && given.at(key) == value) continue;
    auto bare = [](const nlohmann::json& v) {
      return v.is_string()   ? v.get<std::string>()
             : v.is_object() ? std::string("an object")
                             : v.dump();
    };
    if (!out.empty()) out += ", ";
    out += at;
    out += " " + bare(value);
    out += " (--plan: " + (has ? bare(given.at(key)) : std::string("absent")) + ")";
  }
}

// A note when the measured steps spread more than runs on a quiet machine do (the bundled CPU
// measurements' steps lie within 3% of each other, data/measurements/cpu-2ranks/README.md): the
// medians compared are then the machine's load as much as the run's.
std::optional<std::string> step_spread_note(const runtime::Measurement& m) {
  constexpr double kBusySpread = 0.2;
  if (m.steps.size() < 2) return std::nullopt;
  double low = m.steps.front().time_s, high = low;
  for (const auto& s : m.steps) {
    low = std::min(low, s.time_s);
    high = std::max(high, s.time_s);
  }
  if (!(low > 0) || high / low - 1 <= kBusySpread) return std::nullopt;
  return "the measured steps spread " + fixed(100 * (high / low - 1), 0) + "% (" +
         fixed(low * 1e3, 1) + " to " + fixed(high * 1e3, 1) +
         " ms): the machine was probably busy; the time errors include that (measure again, "
         "or with more steps)";
}

// A note when a rank did not have its core to itself (CPU backend): its CPU time over the
// measured steps' wall time under 0.9, where every rank of the bundled examples measures 0.99
// on the quiet build machine and 0.70 with one other busy process on its 2 cores (2026-11-29).
// The steps then wait on the slowest rank, evenly: no spread shows it.
std::optional<std::string> cpu_share_note(const runtime::Measurement& m) {
  constexpr double kQuietShare = 0.9;
  if (m.backend != "cpu" || !m.cpu_share || *m.cpu_share >= kQuietShare) return std::nullopt;
  const bool oversubscribed = m.cores > 0 && m.world_size > m.cores;
  return "a rank ran on " + fixed(100 * *m.cpu_share, 0) +
         "% of a core during the measured steps (its CPU time over their wall time): " +
         (oversubscribed ? "the run's " + std::to_string(m.world_size) + " ranks on " +
                               std::to_string(m.cores) + " cores, and any other work, shared them"
                         : std::string("other work shared the machine's cores")) +
         ", and the time errors include that (measure again on a quiet machine" +
         (oversubscribed ? " with a core per rank)" : ")");
}

// --plan, read and checked, when given.
std::optional<Plan> given_plan(const ValidateOptions& o) {
  if (o.plan.empty()) return std::nullopt;
  auto plan = plan_from_json(o.plan);
  try {
    (void)runtime::runtime_run_of(plan, 1.0, o.data_dir);
  } catch (const Error& e) {
    throw Error("--plan " + o.plan + ": " + e.what());
  }
  return plan;
}

// The plan the measurement records must be --plan's, when one is given.
void check_same_plan(const ValidateOptions& o, const std::optional<Plan>& plan,
                     const runtime::Measurement& m) {
  if (!plan) return;
  if (to_json(*plan) != to_json(m.plan)) {
    std::string differences;
    plan_differences(to_json(m.plan), to_json(*plan), "", differences);
    throw Error("--measured " + o.measured + ": it was made from a different plan than --plan " +
                o.plan + ": " + differences +
                " (a dtplan-run flag such as --tp overrides the plan; omit --plan to validate the "
                "plan the measurement records)");
  }
}

int run_validate(const ValidateOptions& o, const RunContext& ctx) {
  // What is wrong with the plan itself comes before any comparison with the measurement.
  const auto plan = given_plan(o);
  const auto m = runtime::measurement_from_json(o.measured);
  check_same_plan(o, plan, m);
  const auto path = profile_path(o, m);
  const auto profile = cost::load_profile(path);
  const auto figures =
      figures_of(m, cost::predict_runtime_step(runtime::runtime_run_of(m), profile));
  if (o.json) {
    auto j = report_preamble("validate", ctx.args);
    j["plan"] = o.plan.empty() ? nlohmann::json() : nlohmann::json(o.plan);
    j["measured"] = o.measured;
    j["profile"] = path.string();
    j["notes"] = m.notes;
    if (const auto other = runtime::profile_mismatch(m, profile)) j["notes"].push_back(*other);
    if (const auto busy = step_spread_note(m)) j["notes"].push_back(*busy);
    if (const auto shared = cpu_share_note(m)) j["notes"].push_back(*shared);
    j["figures"] = nlohmann::json::array();
    for (const auto& f : figures) {
      j["figures"].push_back({{"name", f.name},
                              {"unit", f.unit},
                              {"predicted", opt(f.predicted)},
                              {"measured", opt(f.measured)},
                              {"error", opt(f.error())}});
    }
    ctx.out << report_text(j);
    return 0;
  }
  const auto& w = m.workload;
  std::string layout;
  if (w.tp > 1) layout += " x " + std::to_string(w.tp) + " tensor-parallel";
  if (w.pp > 1) layout += " x " + std::to_string(w.pp) + " pipeline-stage";
  ctx.out << "dtplan validate: " << m.plan.model << ", " << name_of(m.executed.strategy) << " on "
          << m.world_size / w.replica_ranks() << layout << " ranks (" << m.backend << ", scale "
          << m.scale << ": " << cost::params_of(m.workload) << " parameters), measured "
          << m.created << "\n"
          << "  hardware: " << m.device << "\n  profile: " << path.string() << " ("
          << profile.hardware << ")\n\n";
  TextTable table({"figure", "predicted", "measured", "error"});
  for (const auto& f : figures) {
    table.add_row(
        {f.name, cell(f.predicted, f.unit), cell(f.measured, f.unit), percent(f.error())});
  }
  table.print(ctx.out);
  ctx.out << "\nerror = (predicted - measured) / measured, '-' where a phase is empty on both "
             "sides (under 1 us); times are medians over "
          << m.steps.size() << " measured steps (slowest rank); memory is rank 0's.\n";
  if (std::any_of(figures.begin(), figures.end(),
                  [](const Figure& f) { return f.includes_wait; })) {
    ctx.out << "send_recv: a paired exchange's measured time includes the wait for the "
               "neighbouring stage, which the prediction puts in the phase times: no error is "
               "given.\n";
  }
  for (const auto& n : m.notes)
    ctx.out << "note: " << n << "\n";
  if (const auto other = runtime::profile_mismatch(m, profile))
    ctx.out << "note: " << *other << "\n";
  if (const auto busy = step_spread_note(m)) ctx.out << "note: " << *busy << "\n";
  if (const auto shared = cpu_share_note(m)) ctx.out << "note: " << *shared << "\n";
  return 0;
}

}  // namespace

Command register_validate_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "validate", "Predicted vs measured, figure by figure, for a dtplan-run measurement");
  auto o = std::make_shared<ValidateOptions>();
  sub->add_option("--plan", o->plan,
                  "the plan (dtplan plan --save-plan), checked against the one the measurement "
                  "records; default: that one");
  sub->add_option("--measured", o->measured, "measurement JSON (dtplan-run --out)")->required();
  sub->add_option("--profile", o->profile,
                  "hardware profile (dtplan-run --measure-profile); default: the bundled one "
                  "for the measurement's backend and ranks");
  sub->add_option("--data-dir", o->data_dir, "dtplan data directory");
  sub->add_flag("--json", o->json,
                "JSON: figures[{name, unit, predicted, measured, error}], notes[]");
  return {"validate", [o](const RunContext& ctx) { return run_validate(*o, ctx); }};
}

}  // namespace dtplan::cli
