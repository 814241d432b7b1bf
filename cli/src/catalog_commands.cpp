// `dtplan models` and `dtplan gpus`: what the bundled presets hold.
#include <memory>

#include "commands.hpp"
#include "common_options.hpp"
#include "dtplan/model/error.hpp"
#include "format.hpp"
#include "json_output.hpp"
#include "model_report.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

struct CatalogOptions {
  std::string data_dir;
  std::string model;  // `dtplan models NAME`: describe one model
  bool json = false;
};

std::string tera(double flops) {
  return fixed(flops / 1e12, 1);
}

int describe_model(const CatalogOptions& o, const RunContext& ctx) {
  const auto m = resolve_model({o.model, "", o.data_dir});
  if (o.json) {
    nlohmann::json j = report_preamble("models", ctx.args);
    j["model"] = model_json(m);
    ctx.out << j.dump(2) << '\n';
  } else {
    print_model_detail(ctx.out, m);
  }
  return 0;
}

int run_models(const CatalogOptions& o, const RunContext& ctx) {
  if (!o.model.empty()) return describe_model(o, ctx);
  const auto models_dir = data_dir_of({"", "", o.data_dir}) / "models";
  nlohmann::json j = report_preamble("models", ctx.args);
  j["models"] = nlohmann::json::array();
  TextTable t({"preset", "parameters", "kind", "reference"});
  for (const auto& name : list_model_presets(models_dir)) {
    const auto m = load_model_file(models_dir / (name + ".json"));
    const std::string kind = m.transformer ? m.transformer->model_type : "layer list";
    t.add_row({name, format_thousands(m.params), kind, m.reference});
    j["models"].push_back(model_json(m));
  }
  if (o.json) {
    ctx.out << j.dump(2) << '\n';
  } else {
    t.print(ctx.out, {2, 3});
  }
  return 0;
}

int run_gpus(const CatalogOptions& o, const RunContext& ctx) {
  const auto data = data_dir_of({"", "", o.data_dir});
  const auto catalog = GpuCatalog::load(data / "gpus.json");
  nlohmann::json j = report_preamble("gpus", ctx.args);
  j["gpus"] = nlohmann::json::array();
  TextTable t({"GPU", "memory GiB", "HBM GB/s", "fp32 TF", "fp16 TF", "bf16 TF", "fp8 TF",
               "NVLink GB/s", "xGMI GB/s", "host link"});
  for (const auto& g : catalog.gpus()) {
    t.add_row(
        {g.name, gib(g.memory),
         std::to_string(static_cast<long long>(g.memory_bandwidth_bytes_per_s / 1e9)),
         tera(g.peak_flops.fp32), tera(g.peak_flops.fp16), tera(g.peak_flops.bf16),
         tera(g.peak_flops.fp8),
         std::to_string(static_cast<long long>(g.nvlink_bytes_per_s_per_direction / 1e9)),
         std::to_string(static_cast<long long>(g.xgmi_bytes_per_s_per_direction / 1e9)),
         g.host_link_bytes_per_s_per_direction > 0
             ? "C2C"
             : "gen" + std::to_string(g.pcie_generation) + " x" + std::to_string(g.pcie_lanes)});
    j["gpus"].push_back(
        {{"name", g.name},
         {"aliases", g.aliases},
         {"memory_bytes", g.memory.value},
         {"memory_bandwidth_bytes_per_s", g.memory_bandwidth_bytes_per_s},
         {"peak_flops_bf16", g.peak_flops.bf16},
         {"peak_flops_fp16", g.peak_flops.fp16},
         {"peak_flops_fp32", g.peak_flops.fp32},
         {"peak_flops_fp8", g.peak_flops.fp8},
         {"peak_flops_fp4", g.peak_flops.fp4},
         {"nvlink_bytes_per_s_per_direction", g.nvlink_bytes_per_s_per_direction},
         {"xgmi_bytes_per_s_per_direction", g.xgmi_bytes_per_s_per_direction},
         {"host_link_bytes_per_s_per_direction", g.host_link_bytes_per_s_per_direction},
         {"max_achievable_matmul_flops_bf16", g.mamf_bf16_flops},
         {"architecture", g.architecture}});
  }
  if (o.json) {
    ctx.out << j.dump(2) << '\n';
  } else {
    t.print(ctx.out);
    ctx.out << "\n  dense peaks; NVLink and xGMI per direction, all links; C2C: NVLink-C2C to "
               "Grace, not PCIe; sources: docs/gpus.md\n";
  }
  return 0;
}

Command register_catalog(CLI::App& app, const char* name, const char* help,
                         int (*run)(const CatalogOptions&, const RunContext&)) {
  auto options = std::make_shared<CatalogOptions>();
  auto* cmd = app.add_subcommand(name, help);
  cmd->add_option("--data-dir", options->data_dir, "data directory");
  cmd->add_flag("--json", options->json, "machine-readable output");
  if (std::string(name) == "models") {
    cmd->add_option("model", options->model,
                    "describe one model: a preset name, a config.json or a dtplan model file");
  }
  return {name, [options, run](const RunContext& ctx) { return run(*options, ctx); }};
}

}  // namespace

Command register_models_command(CLI::App& app) {
  return register_catalog(app, "models", "List the bundled model presets and their sizes",
                          run_models);
}

Command register_gpus_command(CLI::App& app) {
  return register_catalog(app, "gpus", "List the GPU catalogue", run_gpus);
}

}  // namespace dtplan::cli
