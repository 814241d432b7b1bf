// The autotune report and exports (see autotune_report.hpp).
#include "autotune_report.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/planner/exports.hpp"
#include "dtplan/runtime/autotune_log.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "table.hpp"

namespace dtplan::cli {
namespace {

std::string also_of(const runtime::TuneSpace& sp, const std::string& key) {
  const auto it = sp.planned.find(key);
  if (it == sp.planned.end()) return "(not in this search)";
  std::vector<std::string> names;
  for (const auto& c : it->second) {
    const std::string n(name_of(c.strategy));
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ",") + n;
  return out;
}

// The plan of the best measured configuration: `prefer_deepspeed` picks a ZeRO strategy among
// those the runtime executes the same way (DeepSpeed runs ZeRO, not FSDP).
std::optional<Plan> best_plan(const AutotuneOptions& o, const runtime::TuneSpace& sp,
                              const std::string& key, bool prefer_deepspeed) {
  const auto it = sp.planned.find(key);
  if (it == sp.planned.end()) return std::nullopt;
  for (const auto& c : it->second) {
    const auto p = planner::plan_file(c, sp.request, sp.model,
                                      {o.model.model, o.topology, 1, sp.gpus_per_node, o.gpu});
    if (!prefer_deepspeed || planner::uses_deepspeed(p)) return p;
  }
  return std::nullopt;
}

}  // namespace

Exports export_best(const AutotuneOptions& o, const runtime::TuneSpace& sp,
                    const std::string& key) {
  Exports e;
  planner::LaunchOptions launch;
  if (!o.deepspeed_file.empty()) launch.ds_config = o.deepspeed_file;
  const auto plan = best_plan(o, sp, key, false);
  const auto ds = best_plan(o, sp, key, true);
  if (!plan) return e;  // a resumed trial outside this search: nothing to export
  std::vector<OutputFile> files;
  if (!o.deepspeed_file.empty()) {
    if (!ds) {
      e.lines.push_back("no DeepSpeed config: the best runs " + key +
                        ", which DeepSpeed does not (DDP/DP: use torchrun)");
    } else {
      files.push_back({o.deepspeed_file,
                       planner::deepspeed_config(*ds, launch).config.dump(2) + "\n",
                       "--export-deepspeed"});
      e.written.push_back(o.deepspeed_file);
    }
  }
  if (!o.plan_file.empty()) {
    files.push_back({o.plan_file, to_json(*plan).dump(2) + "\n", "--save-plan"});
    e.written.push_back(o.plan_file);
  }
  write_files_together(files);
  if (o.launch) {
    for (const auto& l : planner::torchrun_lines(*plan, launch))
      e.lines.push_back(l);
    if (ds) {
      for (const auto& l : planner::deepspeed_lines(*ds, launch))
        e.lines.push_back(l);
    }
  }
  return e;
}

namespace {

// "no recomputation", or the list searched: "recomputation none, full".
std::string recomputation_searched(const AutotuneOptions& o) {
  if (o.checkpointing.empty()) return "no recomputation";
  std::string list;
  for (const auto& c : o.checkpointing)
    list += (list.empty() ? "" : ", ") + c;
  return "recomputation " + list;
}

}  // namespace

void print_report(std::ostream& out, const AutotuneOptions& o, const runtime::TuneSpace& sp,
                  const runtime::TuneOutcome& r, std::size_t resumed,
                  const cost::HardwareProfile& p, const Exports& ex) {
  out << "dtplan autotune: " << o.model.model << " at scale " << o.scale << ", global batch "
      << o.global_batch << ", " << o.np << " ranks (" << o.backend
      << ")\n  candidates: " << sp.candidates.size()
      << " distinct executions of the planner's configurations for " << o.np << " x " << o.gpu
      << " (" << o.precision << ", " << recomputation_searched(o) << ", no offload)\n"
      << "  profile: " << o.profile << " (" << p.hardware << ")\n  results: " << o.results;
  if (resumed) out << " (" << resumed << " trials resumed)";
  out << "\n\nstopped after " << r.trials.size() << " of " << sp.candidates.size()
      << " candidates: " << r.stop_reason << " (band " << percent(r.band) << ")\n\n";
  auto order = r.trials;
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.measured_s.value_or(1e300) < b.measured_s.value_or(1e300);
  });
  TextTable t({"#", "configuration (as executed)", "planner strategies", "predicted", "measured",
               "error", "samples/s"});
  int rank = 0;
  for (const auto& tr : order) {
    const auto sps = fixed(tr.samples_per_s, 1);
    t.add_row({std::to_string(++rank), tr.key, also_of(sp, tr.key), seconds(tr.predicted_s),
               tr.measured_s ? seconds(*tr.measured_s) : "failed",
               tr.measured_s ? signed_percent(tr.error()) : "-", tr.measured_s ? sps : "-"});
  }
  t.print(out);
  for (const auto& tr : order) {
    if (!tr.measured_s) out << "failed: " << tr.key << ": " << tr.failure << "\n";
  }
  if (!r.untried.empty()) {
    out << "\nuntried (predicted now, with the refitted model):";
    for (std::size_t i = 0; i < r.untried.size() && i < 5; ++i) {
      out << (i ? ", " : " ") << sp.candidates[r.untried[i].first].key << " "
          << seconds(r.untried[i].second);
    }
    if (r.untried.size() > 5) out << ", ... (" << r.untried.size() - 5 << " more)";
    out << "\n";
  }
  const auto* best = best_trial(r.trials);
  if (best) {
    const auto sps = fixed(best->samples_per_s, 1);
    out << "\nbest (measured): " << best->key << " [" << also_of(sp, best->key)
        << "]: " << seconds(*best->measured_s) << " per step, " << sps << " samples/s (predicted "
        << seconds(best->predicted_s) << ")\n";
  }
  for (const auto& w : ex.written)
    out << "wrote " << w << "\n";
  if (!ex.lines.empty()) out << "\n";
  for (const auto& l : ex.lines)
    out << "  " << l << "\n";
}

nlohmann::json report_json(const AutotuneOptions& o, const runtime::TuneSpace& sp,
                           const runtime::TuneOutcome& r, const Exports& ex,
                           const RunContext& ctx) {
  auto j = report_preamble("autotune", ctx.args);
  j["candidates"] = sp.candidates.size();
  j["stop_reason"] = r.stop_reason;
  j["band"] = r.band;
  j["trials"] = nlohmann::json::array();
  for (const auto& t : r.trials)
    j["trials"].push_back(trial_json(t));
  j["untried"] = nlohmann::json::array();
  for (const auto& [i, s] : r.untried)
    j["untried"].push_back({{"key", sp.candidates[i].key}, {"predicted_step_s", s}});
  if (const auto* b = best_trial(r.trials)) j["best"] = trial_json(*b);
  j["step_correction"] = {{"compute_scale", r.correction.compute_scale},
                          {"collective_scale", r.correction.collective_scale},
                          {"optimizer_scale", r.correction.optimizer_scale}};
  j["written"] = ex.written;
  j["launch"] = ex.lines;
  j["results"] = o.results;
  return j;
}

}  // namespace dtplan::cli
