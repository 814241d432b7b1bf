// `dtplan autotune`'s options, its search space, and its report: measured results ranked
// next to their predictions, the untried candidates, the best configuration and its exports
// (DeepSpeed config, launch lines, Plan file).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/planner/planner.hpp"
#include "dtplan/runtime/autotune.hpp"

namespace dtplan::cli {

struct AutotuneOptions {
  ModelOptions model;
  std::int64_t global_batch = 0;
  std::int64_t seq_len = 0;
  std::int64_t np = 2;
  std::string backend = "cpu";
  double scale = 1;
  std::string profile;
  std::string results = "autotune.jsonl";
  bool resume = false;
  std::int64_t max_trials = 0;
  double time_budget_s = 0;
  bool exhaustive = false;
  std::int64_t steps = 5, warmup = 1;
  std::string topology = "pcie-1switch-8";
  std::string gpu = "A100-80GB";
  std::vector<std::string> strategies;
  std::vector<std::int64_t> micro_batches;
  std::vector<std::string> checkpointing;  // recomputation to search; empty: none
  std::string precision = "bf16";
  std::string optimizer = "adamw";
  std::string work_dir;
  std::string deepspeed_file, plan_file;
  bool launch = false;
  bool json = false;
};

struct Exports {
  std::vector<std::string> lines;
  std::vector<std::string> written;
};

// Writes --export-deepspeed / --save-plan for the best key and gathers --export-launch lines
// (nothing for a resumed key outside this search).
Exports export_best(const AutotuneOptions& o, const runtime::TuneSpace& sp, const std::string& key);
void print_report(std::ostream& out, const AutotuneOptions& o, const runtime::TuneSpace& sp,
                  const runtime::TuneOutcome& r, std::size_t resumed,
                  const cost::HardwareProfile& p, const Exports& ex);
nlohmann::json report_json(const AutotuneOptions& o, const runtime::TuneSpace& sp,
                           const runtime::TuneOutcome& r, const Exports& ex, const RunContext& ctx);

}  // namespace dtplan::cli
