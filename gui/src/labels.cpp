// Field names as the GUI's input labels (see labels.hpp).
#include "labels.hpp"

#include <map>

#include "dtplan/model/error.hpp"

namespace dtplan::gui {

std::string label_of(const std::string& field) {
  // The labels of inputs_panel.cpp's form and of the Tools dialogs, by the request fields they
  // set.
  static const std::map<std::string, std::string> kLabels{
      {"model", "model"},
      {"gpu", "GPU"},
      {"topology", "topology"},
      {"nodes", "nodes"},
      {"gpus", "GPUs"},
      {"max_gpus", "GPUs"},
      {"strategies", "strategy"},
      {"strategy", "strategy"},
      {"precision", "precision"},
      {"precisions", "precision"},
      {"optimizer", "optimizer"},
      {"optimizer_impl", "optimizer kernels"},
      {"layer-kernels", "layer kernels"},
      {"layer_kernels", "layer kernels"},
      {"zero_grad", "zero_grad"},
      {"micro_batch", "micro-batch"},
      {"micro_batches", "micro-batch"},
      {"grad_accum", "accumulation"},
      {"seq_len", "sequence (0: max)"},
      {"gpus_per_node", "GPUs per node"},
      {"checkpointing", "checkpointing"},
      {"attention", "attention"},
      {"attention_kernel", "attention kernel"},
      {"offload", "offload"},
      {"offloads", "offload"},
      {"global_batch", "global batch (plan)"},
      {"tp", "tensor parallel"},
      {"tps", "tensor parallel"},
      {"pp", "pipeline stages"},
      {"pps", "pipeline stages"},
      {"cp", "context parallel"},
      {"cps", "context parallel"},
      {"ep", "expert parallel"},
      {"etp", "expert tensor parallel"},
      {"fp8_recipe", "FP8 recipe (dtplan-gui --fp8-recipe)"},
      {"capacity_factor", "capacity factor (dtplan-gui --capacity-factor)"},
      {"recompute_modules", "recompute modules"},
      {"cp_comm", "CP exchange"},
      {"interleave", "chunks per GPU"},
      {"sequence_parallel", "sequence parallel"},
      {"sp", "sequence parallel"},
      {"schedule", "schedule"},
      {"framework", "strategy"},
      {"sharding", "sharding"},
      {"dp_shard", "shard group"},
      {"pp_layers", "layers per stage"},
      // Megatron-LM's flags: the GUI takes them on its command line (gui_options.cpp).
      {"overlap_ep_comm", "dtplan-gui --overlap-ep-comm"},
      {"deepep", "dtplan-gui --deepep"},
      {"overlap_grad_reduce", "dtplan-gui --overlap-grad-reduce"},
      {"overlap_param_gather", "dtplan-gui --overlap-param-gather"},
      {"ddp_bucket_size", "dtplan-gui --ddp-bucket-size"},
      {"grad_reduce_in_bf16", "dtplan-gui --grad-reduce-in-bf16"},
      {"fp8_param_gather", "dtplan-gui --fp8-param-gather"},
      {"tp_comm_overlap", "dtplan-gui --tp-comm-overlap"},
      // Exports the GUI has no button for: the CLI writes them.
      {"export_megatron", "dtplan plan --export-megatron"},
      {"export_torchtitan", "dtplan plan --export-torchtitan"},
      {"export_accelerate", "dtplan plan --export-accelerate"},
      // The Tools menu's dialogs (workflow_dialogs.cpp).
      {"backend", "backend"},
      {"np", "ranks"},
      {"scale", "model width"},
      {"out", "profile file"},
      {"results", "results file"},
      {"max_trials", "at most trials"},
      {"steps", "measured steps per trial"},
  };
  const auto it = kLabels.find(field);
  auto label = it == kLabels.end() ? field : it->second;
  // A control's name is quoted; a command line to type is not.
  if (label.rfind("dtplan", 0) == 0) return label;
  return "\"" + label + "\"";
}

std::string with_labels(const std::string& text) {
  return render_fields(text, label_of);
}

std::string message_of(const std::exception& e) {
  return rendered(e, label_of);
}

}  // namespace dtplan::gui
