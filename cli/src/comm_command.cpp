// `dtplan comm`: collective time, algbw and busbw on a topology, for one size or a sweep
// printed like nccl-tests; or, with a model, the communication of one training step per
// strategy, with and without no_sync gradient accumulation.
#include <cmath>
#include <cstdio>
#include <memory>

#include "comm_report.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/number_range.hpp"
#include "dtplan/model/suggest.hpp"
#include "format.hpp"
#include "json_output.hpp"

namespace dtplan::cli {

namespace {

struct CommOptions {
  TopologyOptions topology;
  ModelOptions model;
  std::optional<std::int64_t> gpus;
  std::string collective = "allreduce";
  std::string size;
  std::string sweep;
  double step_factor = 2.0;
  std::string algorithm = "auto";
  bool json = false;
  // Training mode
  std::string strategy = "all";
  std::string precision = "bf16";
  std::int64_t grad_accum = 1;
  bool sync_every_micro_step = false;
  double bucket_cap_mb = 25.0;
};

// nccl-tests rounds each size down to a whole number of elements per rank for the
// collectives that split the buffer (float elements here).
Bytes rounded(Bytes size, cost::Collective c, std::int64_t gpus) {
  const bool split = c == cost::Collective::all_gather || c == cost::Collective::reduce_scatter ||
                     c == cost::Collective::all_to_all;
  const std::int64_t unit = 4 * (split ? gpus : 1);
  return Bytes{std::max(unit, size.value / unit * unit)};
}

std::vector<Bytes> sizes_of(const CommOptions& o) {
  if (!o.size.empty() && !o.sweep.empty()) throw Error("--size and --sweep: give one of them");
  if (!o.size.empty()) return {parse_size(o.size, "--size")};
  if (o.sweep.empty()) {
    throw Error(
        "give --size SIZE or --sweep FROM:TO (e.g. --sweep 32KiB:4GiB), or --model for "
        "training communication");
  }
  const auto colon = o.sweep.find(':');
  if (colon == std::string::npos) throw Error("--sweep '" + o.sweep + "': expected FROM:TO");
  const auto from = parse_size(o.sweep.substr(0, colon), "--sweep");
  const auto to = parse_size(o.sweep.substr(colon + 1), "--sweep");
  if (to < from) throw Error("--sweep '" + o.sweep + "': TO is smaller than FROM");
  if (!(o.step_factor > 1.0)) throw Error("--step-factor: must be greater than 1");
  std::vector<Bytes> sizes;
  for (double s = static_cast<double>(from.value); s <= static_cast<double>(to.value) * 1.000001;
       s *= o.step_factor) {
    sizes.push_back(Bytes{static_cast<std::int64_t>(std::llround(s))});
    if (sizes.size() > 10'000) throw Error("--sweep: more than 10,000 sizes");
  }
  return sizes;
}

int run_collectives(const CommOptions& o, const LoadedTopology& loaded, const RunContext& ctx) {
  const auto& t = loaded.topology;
  cost::CommModel model(t, loaded.table, o.gpus.value_or(t.gpu_count()));
  const auto collective = cost::parse_collective(o.collective);
  const auto algorithm = cost::parse_algorithm(o.algorithm);
  const auto sizes = sizes_of(o);
  std::vector<cost::CollectiveEstimate> results;
  std::vector<Bytes> unique;
  for (const auto s : sizes) {
    const auto r = rounded(s, collective, model.gpus());
    if (unique.empty() || unique.back() != r) unique.push_back(r);
  }
  results.reserve(unique.size());
  for (const auto s : unique)
    results.push_back(model.estimate(collective, s, algorithm));
  if (o.json) {
    nlohmann::json j = report_preamble("comm", ctx.args);
    j["topology"] = {{"name", t.node().name}, {"nodes", t.nodes()}, {"gpus", model.gpus()}};
    j["collective"] = std::string(cost::name_of(collective));
    j["algorithm_requested"] = std::string(cost::name_of(algorithm));
    if (sizes.size() == 1 && o.sweep.empty()) {
      j.update(collective_json(results.front()));
    } else {
      j["results"] = nlohmann::json::array();
      for (const auto& r : results)
        j["results"].push_back(collective_json(r));
    }
    ctx.out << report_text(j);
    return 0;
  }
  print_collective_table(ctx.out, t, model, collective, algorithm, results);
  return 0;
}

int run_training(const CommOptions& o, const LoadedTopology& loaded, const RunContext& ctx) {
  const auto& t = loaded.topology;
  const auto m = resolve_model(o.model);
  const auto overheads = cost::load_overheads(data_dir_of(o.model) / "overheads.json");
  TrainingConfig c;
  c.precision = parse_flag("--precision", o.precision, parse_precision);
  c.dp_size = o.gpus.value_or(t.gpu_count());
  c.gpus_per_node = t.gpus_per_node();
  c.bucket_cap_bytes = static_cast<std::int64_t>(std::llround(o.bucket_cap_mb * 1048576.0));
  if (o.grad_accum < 1) throw Error("--grad-accum: must be a positive integer");
  const auto context = std::make_shared<cost::CommContext>(t);
  cost::CommModel all(t, loaded.table, c.dp_size, context);
  cost::CommModel node(t, loaded.table, std::min(c.dp_size, t.gpus_per_node()), context);
  std::vector<cost::TrainingComm> results;
  std::vector<std::pair<Strategy, std::string>> skipped;
  for (const auto& row : kStrategies) {
    if (o.strategy != "all" && parse_strategy(o.strategy) != row.value) continue;
    c.strategy = row.value;
    try {
      results.push_back(cost::estimate_training_comm(m, c, o.grad_accum, !o.sync_every_micro_step,
                                                     {all, node}, overheads));
    } catch (const Error& e) {
      if (o.strategy != "all") throw;
      // Strategies the user did not name: their settings, not flags never typed.
      skipped.emplace_back(row.value, rendered(e, setting_of));
    }
  }
  const TrainingCommContext report{m, c, t, o.grad_accum, !o.sync_every_micro_step};
  if (o.json) {
    nlohmann::json j = report_preamble("comm", ctx.args);
    j["model"] = model_json(m);
    j["training"] = training_json(c);
    j["grad_accum"] = o.grad_accum;
    j["topology"] = {{"name", t.node().name}, {"nodes", t.nodes()}, {"gpus", c.dp_size}};
    j["strategies"] = nlohmann::json::array();
    for (const auto& r : results)
      j["strategies"].push_back(training_comm_json(r));
    ctx.out << report_text(j);
    return 0;
  }
  print_training_comm(ctx.out, report, results);
  for (const auto& [s, why] : skipped)
    ctx.out << "\n  skipped " << name_of(s) << ": " << why << '\n';
  return 0;
}

int run_comm(const CommOptions& o, const RunContext& ctx) {
  const auto data = data_dir_of(o.model);
  const auto loaded = load_topology(o.topology, data);
  if (!o.model.model.empty() || !o.model.params.empty()) return run_training(o, loaded, ctx);
  return run_collectives(o, loaded, ctx);
}

}  // namespace

Command register_comm_command(CLI::App& app) {
  auto options = std::make_shared<CommOptions>();
  auto* cmd = app.add_subcommand(
      "comm", "Collective time and bandwidth on a topology, or a training step's communication");
  add_topology_options(*cmd, options->topology, true);
  cmd->add_option("--gpus", options->gpus, "GPUs taking part (default: all of the topology)");
  cmd->add_option("--collective", options->collective,
                  "allreduce|reduce-scatter|all-gather|broadcast|reduce|all-to-all")
      ->capture_default_str();
  cmd->add_option("--size", options->size, "message size, e.g. 1GiB (nccl-tests' size)");
  cmd->add_option("--sweep", options->sweep, "sizes FROM:TO, e.g. 32KiB:16GiB");
  cmd->add_option("--step-factor", options->step_factor, "sweep multiplier (nccl-tests -f)")
      ->capture_default_str()
      ->check(number_check({1.0, 1024.0, true}));
  cmd->add_option("--algorithm", options->algorithm, "ring|tree|nvls|hierarchical|ps|auto")
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "machine-readable output");
  add_model_options(*cmd, options->model);
  cmd->add_option("--strategy", options->strategy,
                  "training mode: " + join(strategy_names(), "|") + " or all")
      ->capture_default_str();
  cmd->add_option("--precision", options->precision, "training mode: fp32|fp16|bf16|amp-*")
      ->capture_default_str();
  cmd->add_option("--grad-accum", options->grad_accum, "training mode: micro-steps per step")
      ->capture_default_str();
  cmd->add_flag("--sync-every-micro-step", options->sync_every_micro_step,
                "training mode: do not use no_sync (synchronise gradients every micro-step)");
  cmd->add_option("--bucket-cap-mb", options->bucket_cap_mb, "training mode: DDP bucket_cap_mb")
      ->capture_default_str()
      ->check(number_check(kBucketCapMiB));
  return {"comm", [options](const RunContext& ctx) { return run_comm(*options, ctx); }};
}

}  // namespace dtplan::cli
