// Session JSON (see session.hpp).
#include "session.hpp"

#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/model/json_reader.hpp"

namespace dtplan::gui {

namespace {

nlohmann::json layout_json(const planner::LayoutSpec& l) {
  return {{"tp", l.tp},
          {"pp", l.pp},
          {"cp", l.cp},
          {"ep", l.ep},
          {"etp", l.etp},
          {"capacity_factor", l.capacity_factor},
          {"overlap_ep_comm", l.overlap_ep_comm},
          {"deepep", l.deepep},
          {"overlap_grad_reduce", l.overlap_grad_reduce},
          {"overlap_param_gather", l.overlap_param_gather},
          {"ddp_bucket_size", l.ddp_bucket_size},
          {"grad_reduce_in_bf16", l.grad_reduce_in_bf16},
          {"fp8_param_gather", l.fp8_param_gather},
          {"tp_comm_overlap", l.tp_comm_overlap},
          {"recompute_modules", l.recompute_modules},
          {"interleave", l.interleave},
          {"cp_comm", l.cp_comm},
          {"framework", l.framework},
          {"sharding", l.sharding},
          {"dp_shard", l.dp_shard},
          {"schedule", l.schedule},
          {"pp_layers", l.pp_layers},
          {"sequence_parallel", l.sequence_parallel}};
}

// The bounds of the CLI's layout flags' checks; names are checked where the layout is built.
planner::LayoutSpec layout_from_reader(const ObjectReader& r) {
  planner::LayoutSpec l;
  l.tp = r.integer("tp", 1, 1'000'000);
  l.pp = r.integer("pp", 1, 1'000'000);
  l.cp = r.integer("cp", 1, 1'000'000);
  // Sessions saved before expert parallelism have neither.
  if (r.has("ep")) l.ep = r.integer("ep", 1, 1'000'000);
  if (r.has("etp")) l.etp = r.integer("etp", 0, 1'000'000);
  if (r.has("capacity_factor"))
    l.capacity_factor = r.number("capacity_factor", NumberRange::non_negative(64));
  if (r.has("overlap_ep_comm")) l.overlap_ep_comm = r.boolean("overlap_ep_comm");
  if (r.has("deepep")) l.deepep = r.boolean("deepep");
  if (r.has("overlap_grad_reduce")) l.overlap_grad_reduce = r.boolean("overlap_grad_reduce");
  if (r.has("overlap_param_gather")) l.overlap_param_gather = r.boolean("overlap_param_gather");
  if (r.has("ddp_bucket_size"))
    l.ddp_bucket_size = r.integer("ddp_bucket_size", 0, std::int64_t{1} << 50);  // 0: default
  if (r.has("grad_reduce_in_bf16")) l.grad_reduce_in_bf16 = r.boolean("grad_reduce_in_bf16");
  if (r.has("fp8_param_gather")) l.fp8_param_gather = r.boolean("fp8_param_gather");
  if (r.has("tp_comm_overlap")) l.tp_comm_overlap = r.boolean("tp_comm_overlap");
  if (r.has("recompute_modules")) l.recompute_modules = r.string("recompute_modules");
  l.interleave = r.integer("interleave", 1, 1'000'000);
  l.cp_comm = r.string("cp_comm");
  l.framework = r.string("framework");
  l.sharding = r.string("sharding");
  l.dp_shard = r.integer("dp_shard", 0, 1'000'000);
  l.schedule = r.string("schedule");
  l.pp_layers = r.integers("pp_layers");
  l.sequence_parallel = r.boolean("sequence_parallel");
  r.reject_unknown_keys();
  return l;
}

}  // namespace

nlohmann::json to_json(const Session& s) {
  return {{"schema_version", 1},
          {"model", s.model},
          {"gpu", s.gpu},
          {"topology", s.topology},
          {"nodes", s.nodes},
          {"gpus_per_node", s.gpus_per_node},
          {"gpus", s.gpus},
          {"strategy", s.strategy},
          {"precision", s.precision},
          {"optimizer", s.optimizer},
          {"optimizer_impl", s.optimizer_impl},
          {"layer_kernels", s.layer_kernels},
          {"zero_grad", s.zero_grad},
          {"micro_batch", s.micro_batch},
          {"grad_accum", s.grad_accum},
          {"seq_len", s.seq_len},
          {"checkpointing", s.checkpointing},
          {"checkpoint_every", s.checkpoint_every},
          {"attention", s.attention},
          {"attention_kernel", s.attention_kernel},
          {"fp8_recipe", s.fp8_recipe},
          {"offload", s.offload},
          {"global_batch", s.global_batch},
          {"measurements", s.measurements},
          {"profile", s.profile},
          {"layout", layout_json(s.layout)}};
}

namespace {

Session session_from_reader(const ObjectReader& r) {
  r.check_schema_version(1);
  Session s;
  s.model = r.string("model");
  s.gpu = r.string("gpu");
  s.topology = r.string("topology");
  // The bounds the CLI's flags have (--nodes, --gpus, --micro-batch, --grad-accum,
  // --global-batch, --seq-len), so a session file cannot ask for what a flag may not.
  s.nodes = r.integer("nodes", kNodesRange.min, kNodesRange.max);
  // Sessions saved before partial nodes used every GPU of each.
  if (r.has("gpus_per_node")) {
    s.gpus_per_node = r.integer("gpus_per_node", kGpusPerNodeRange.min, kGpusPerNodeRange.max);
  }
  s.gpus = r.integer("gpus", kGpusRange.min, kGpusRange.max);
  s.strategy = r.string("strategy");
  s.precision = r.string("precision");
  s.optimizer = r.string("optimizer");
  // Sessions saved before these were inputs used the CLI's defaults.
  s.optimizer_impl = r.optional_string("optimizer_impl").value_or("framework");
  s.layer_kernels = r.optional_string("layer_kernels").value_or("framework");
  s.zero_grad = r.optional_string("zero_grad").value_or("set-to-none");
  s.micro_batch = r.integer("micro_batch", kMicroBatchRange.min, kMicroBatchRange.max);
  s.grad_accum = r.integer("grad_accum", kGradAccumRange.min, kGradAccumRange.max);
  s.seq_len = r.integer("seq_len", kSeqLenRange.min, kSeqLenRange.max);
  s.checkpointing = r.string("checkpointing");
  if (r.has("checkpoint_every")) s.checkpoint_every = r.integer("checkpoint_every", 1, 1'000'000);
  // Sessions saved before the attention kernel was an input used the CLI's default, flash.
  s.attention = r.optional_string("attention").value_or("flash");
  // ... and, before the fused kernel was one, the framework's own.
  s.attention_kernel = r.optional_string("attention_kernel").value_or("framework");
  s.fp8_recipe = r.optional_string("fp8_recipe").value_or("none");
  s.offload = r.string("offload");
  s.global_batch = r.integer("global_batch", kGlobalBatchRange.min, kGlobalBatchRange.max);
  s.measurements = r.strings("measurements");
  s.profile = r.string("profile");
  // Sessions saved before layouts existed have none: the data-parallel strategy alone.
  if (const auto layout = r.optional_object("layout")) s.layout = layout_from_reader(*layout);
  r.reject_unknown_keys();
  return s;
}

}  // namespace

Session session_from_json(const nlohmann::json& j, const std::string& origin) {
  return session_from_reader(ObjectReader::root(parse_json(j.dump(), origin)));
}

Session load_session(const std::filesystem::path& path) {
  return session_from_reader(ObjectReader::root(read_json_file(path)));
}

void save_session(const Session& s, const std::filesystem::path& path) {
  write_file_atomically(path, to_json(s).dump(2) + "\n", "session file");
}

}  // namespace dtplan::gui
