// JSON form of a Plan, written by the planner and read back by the runtime.
#include "dtplan/model/plan.hpp"

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"

namespace dtplan {

nlohmann::json to_json(const Plan& p) {
  const auto& t = p.training;
  return {{"schema_version", 1},
          {"model", p.model},
          {"params", p.params},
          {"topology", p.topology},
          {"nodes", p.nodes},
          {"gpu", p.gpu},
          {"strategy", name_of(t.strategy)},
          {"precision", name_of(t.precision)},
          {"optimizer", name_of(t.optimizer)},
          {"dp", t.dp_size},
          {"gpus_per_node", t.gpus_per_node},
          {"micro_batch", t.micro_batch},
          {"grad_accum", p.grad_accum},
          {"global_batch", p.global_batch},
          {"seq_len", t.seq_len},
          {"checkpointing", name_of(t.checkpointing)},
          {"recompute_modules", text_of(t.recompute_modules)},
          {"checkpoint_every", t.checkpoint_every},
          {"optimizer_impl", name_of(t.optimizer_impl)},
          {"layer_kernels", name_of(t.layer_kernels)},
          {"zero_grad", name_of(t.zero_grad)},
          {"fp8", name_of(t.fp8)},
          {"attention", name_of(t.attention)},
          {"attention_kernel", name_of(t.attention_kernel)},
          {"offload", name_of(t.offload)},
          {"bucket_cap_bytes", t.bucket_cap_bytes},
          {"no_sync", p.no_sync},
          {"tp", p.tp},
          {"pp", p.pp},
          {"predicted",
           {{"step_time_s", p.predicted.step_time_s},
            {"samples_per_s", p.predicted.samples_per_s},
            {"tokens_per_s", p.predicted.tokens_per_s},
            {"mfu", p.predicted.mfu},
            {"memory_per_gpu_bytes", p.predicted.memory_per_gpu_bytes}}}};
}

Plan plan_from_json(const std::filesystem::path& path) {
  return plan_from_reader(ObjectReader::root(read_json_file(path)));
}

namespace {

// What plans record since 2026-11-29; plans written before left them at their defaults (what
// they were planned with, bar a --recompute-modules, --optimizer-impl, --layer-kernels,
// --zero-grad or --fp8-recipe that was not recorded then).
void read_recorded_since_2026_11_29(const ObjectReader& r, TrainingConfig& t) {
  auto optional = [&r](const char* key, auto parse, auto& into) {
    if (!r.has(key)) return;
    try {
      into = parse(r.string(key));
    } catch (const Error& e) {
      r.fail(key, e.what());
    }
  };
  optional("recompute_modules", parse_recompute_modules, t.recompute_modules);
  optional("optimizer_impl", parse_optimizer_impl, t.optimizer_impl);
  optional("layer_kernels", parse_layer_kernels, t.layer_kernels);
  optional("zero_grad", parse_zero_grad, t.zero_grad);
  optional("fp8", parse_fp8_recipe, t.fp8);
  if (r.has("checkpoint_every")) t.checkpoint_every = r.integer("checkpoint_every", 1, 1'000'000);
}

// Plans written before dtplan-run executed tensor or pipeline parallelism were data-parallel
// only.
std::int64_t read_model_parallel(const ObjectReader& r, const char* key) {
  return r.has(key) ? r.integer(key, 1, 1'000'000) : 1;
}

}  // namespace

Plan plan_from_reader(const ObjectReader& r) {
  r.check_schema_version(1);
  Plan p;
  auto& t = p.training;
  p.model = r.string("model");
  p.params = r.positive_integer("params");
  p.topology = r.string("topology");
  p.nodes = r.positive_integer("nodes");
  p.gpu = r.string("gpu");
  auto parsed = [&r](const char* key, auto parse) {
    try {
      return parse(r.string(key));
    } catch (const Error& e) {
      r.fail(key, e.what());
    }
  };
  t.strategy = parsed("strategy", parse_strategy);
  t.precision = parsed("precision", parse_precision);
  t.optimizer = parsed("optimizer", parse_optimizer);
  t.checkpointing = parsed("checkpointing", parse_checkpointing);
  read_recorded_since_2026_11_29(r, t);
  t.attention = parsed("attention", parse_attention);
  // Plans written before the kernel was recorded ran the framework's own.
  if (r.has("attention_kernel"))
    t.attention_kernel = parsed("attention_kernel", parse_attention_kernel);
  t.offload = parsed("offload", parse_offload);
  t.dp_size = r.positive_integer("dp");
  t.gpus_per_node = r.positive_integer("gpus_per_node");
  t.micro_batch = r.positive_integer("micro_batch");
  p.grad_accum = r.positive_integer("grad_accum");
  p.global_batch = r.positive_integer("global_batch");
  t.seq_len = r.integer("seq_len", 0, 100'000'000);  // 0: a model without a sequence
  t.bucket_cap_bytes = r.positive_integer("bucket_cap_bytes");
  p.no_sync = r.boolean("no_sync");
  p.tp = read_model_parallel(r, "tp");
  p.pp = read_model_parallel(r, "pp");
  t.grad_accum = p.grad_accum;
  t.no_sync = p.no_sync;
  if (p.global_batch != t.micro_batch * p.grad_accum * t.dp_size) {
    r.fail("global_batch", "is not micro_batch x grad_accum x dp");
  }
  const auto pred = r.object("predicted");
  // Zeros where nothing was predicted (calibration and autotune trial plans).
  p.predicted.step_time_s = pred.number("step_time_s", kSeconds);
  p.predicted.samples_per_s = pred.number("samples_per_s", NumberRange::non_negative(1e12));
  p.predicted.tokens_per_s = pred.number("tokens_per_s", NumberRange::non_negative(1e15));
  p.predicted.mfu = pred.number("mfu", NumberRange::non_negative(1.0));
  p.predicted.memory_per_gpu_bytes = pred.integer("memory_per_gpu_bytes");
  pred.reject_unknown_keys();
  r.reject_unknown_keys();
  return p;
}

}  // namespace dtplan
