// Trials through dtplan-run (see runtime_trials.hpp).
#include "dtplan/runtime/trials.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/runtime/launcher.hpp"
#include "dtplan/runtime/runtime_run.hpp"

namespace dtplan::runtime {

std::string RuntimeConfig::label() const {
  std::ostringstream s;
  s << model << "@" << scale << " " << name_of(strategy) << " mb " << micro_batch;
  if (grad_accum > 1) s << " x " << grad_accum << (no_sync ? " no_sync" : " sync");
  if (optimizer != Optimizer::adamw) s << " " << name_of(optimizer);
  if (checkpointing != Checkpointing::none) s << ", " << name_of(checkpointing) << " recompute";
  return s.str();
}

Plan plan_of(const RuntimeConfig& c, std::int64_t np, const std::string& data_dir) {
  const auto model = load_model(c.model, resolve_data_dir(data_dir) / "models");
  Plan p;
  p.model = c.model;
  p.params = model.params;
  p.topology = "this machine";
  p.gpu = "this machine";
  p.training.strategy = c.strategy;
  p.training.precision = c.precision;
  p.training.optimizer = c.optimizer;
  p.training.dp_size = np;
  p.training.gpus_per_node = np;
  p.training.micro_batch = c.micro_batch;
  p.training.seq_len = c.seq_len;
  p.training.checkpointing = c.checkpointing;
  p.training.grad_accum = c.grad_accum;
  p.training.no_sync = c.no_sync;
  p.grad_accum = c.grad_accum;
  p.global_batch = c.micro_batch * c.grad_accum * np;
  p.no_sync = c.no_sync;
  return p;
}

cost::RuntimeRun runtime_run_of(const RuntimeConfig& c, const TrialSettings& s) {
  return runtime::runtime_run_of(plan_of(c, s.np, s.data_dir), c.scale, s.data_dir);
}

namespace {

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file_atomically(path, j.dump(2) + "\n");
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

runtime::Measurement run_trial(const RuntimeConfig& c, const std::string& name,
                               const TrialSettings& s, const LineFn& on_line) {
  const auto plan_path = s.work_dir / (name + ".plan.json");
  const auto out_path = s.work_dir / (name + ".json");
  write_json(plan_path, to_json(plan_of(c, s.np, s.data_dir)));
  std::filesystem::remove(out_path);
  std::vector<std::string> args{
      "--plan",    plan_path.string(),      "--backend", s.backend,
      "--steps",   std::to_string(s.steps), "--warmup",  std::to_string(s.warmup),
      "--scale",   number(c.scale),         "--out",     out_path.string(),
      "--timeout", number(s.timeout_s)};
  if (!s.data_dir.empty()) args.insert(args.end(), {"--data-dir", s.data_dir});
  const auto result = run_child(mpirun_argv(s.np, args), on_line);
  if (result.exit_code != 0 || !std::filesystem::exists(out_path)) {
    std::string tail;
    for (const auto& l : result.tail)
      tail += "\n  " + l;
    throw Error(c.label() + ": dtplan-run failed (exit " + std::to_string(result.exit_code) +
                "); its last lines:" + tail);
  }
  return runtime::measurement_from_json(out_path);
}

cost::StepSample step_sample_of(const std::string& label, const runtime::Measurement& m,
                                const cost::HardwareProfile& p) {
  const auto parts = cost::predict_runtime_step(runtime::runtime_run_of(m), p).parts;
  const auto med = m.median();
  return cost::step_sample(label, parts, med.forward_s + med.backward_s,
                           med.comm_wait_s + med.optimizer_s);
}

cost::HardwareProfile load_profile_field(const std::string& path) {
  try {
    return cost::load_profile(path);
  } catch (const Error& e) {
    throw FieldError("profile", std::string(e.what()) + " (make one with dtplan calibrate)");
  }
}

std::filesystem::path work_dir_of(const std::string& given, const char* purpose) {
  if (!given.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(given, ec);
    if (ec) throw FieldError("work_dir", given + ": " + ec.message());
    return given;
  }
  auto templ =
      (std::filesystem::temp_directory_path() / (std::string("dtplan-") + purpose + "-XXXXXX"))
          .string();
  if (mkdtemp(templ.data()) == nullptr) {
    throw Error("cannot create a temporary directory for " + std::string(purpose));
  }
  return templ;
}

}  // namespace dtplan::runtime
