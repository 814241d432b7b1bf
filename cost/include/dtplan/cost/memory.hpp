// Per-GPU (and per-host) memory of data-parallel training: model states by component, sharded
// as the strategy shards them, plus activations, transient buffers and overhead. The result is
// the peak, reached during backward, when activations, gradients and communication buffers
// coexist. Derivations and constants: docs/memory-model.md.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/cost/activations.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cost {

struct MemoryComponents {
  Bytes weights;         // compute copy (fp32, or 16-bit under mixed precision)
  Bytes master_weights;  // fp32 master copy under mixed precision
  Bytes gradients;
  Bytes optimizer_states;
  Bytes grad_buckets;  // DDP's bucketed gradient copy
  Bytes activations;
  Bytes buffers;   // transient: gathered units, reduce buckets, NCCL buffers, ...
  Bytes overhead;  // CUDA context, allocator slack
  // Parts of the above PyTorch's caching allocator does not hold: NCCL's buffers (of buffers)
  // and the CUDA context (of overhead); and the allocator's slack (of overhead).
  Bytes outside_allocator;
  Bytes allocator_slack;

  Bytes model_states() const;  // weights + master + gradients + optimizer + buckets
  Bytes total() const;         // model states + activations + buffers + overhead: the GPU's
  // What PyTorch reports as its peak: torch.cuda.max_memory_reserved (the caching allocator's
  // segments) and max_memory_allocated (live tensors), without the CUDA context and NCCL.
  Bytes torch_reserved() const;
  Bytes torch_allocated() const;
};

struct FitVerdict {
  std::string gpu;
  Bytes capacity;
  bool fits = false;  // on the GPU and, when a host capacity is given, in host memory
  Bytes margin;       // GPU capacity - peak; negative when it does not fit
  bool gpu_fits = false;
  // Host memory per node (the offloaded states of all its ranks), when a capacity is given.
  std::optional<Bytes> host_capacity;
  bool host_fits = true;
  Bytes host_margin;  // host capacity - cpu_per_node; negative when it does not fit
};

struct MemoryEstimate {
  Strategy strategy = Strategy::ddp;
  std::int64_t params = 0;
  std::int64_t shard_degree = 1;
  std::string recipe;    // how mixed precision lays out the states
  MemoryComponents gpu;  // per GPU (for DataParallel: rank 0, the most loaded)
  MemoryComponents cpu;  // host memory per rank (offloaded states)
  Bytes cpu_per_node;    // host memory of all ranks on one node
  std::vector<NamedBytes> activation_terms;
  std::vector<NamedBytes> buffer_terms;
  std::vector<NamedBytes> overhead_terms;
  // Component -> how it is derived, and notes; both may mark training fields as {field}
  // (dtplan::render_fields: a front end names them its own way).
  std::vector<std::pair<std::string, std::string>> explain;
  std::vector<std::string> notes;
  bool activations_modelled = false;
  // The GPU's total (gpu.total()) is the larger of two moments for PyTorch's data-parallel
  // strategies: backward (activations, buffers and the gradients allocated by then, which grows
  // with the micro-batch) and the optimizer step (every gradient and the optimizer's
  // temporaries, which does not). 0 where the peak has one moment (backward_total is then
  // gpu.total()).
  Bytes backward_total;
  Bytes step_total;
  std::int64_t seq_len = 0;
  std::optional<FitVerdict> fit;
};

MemoryEstimate estimate_memory(const ModelDesc& m, const TrainingConfig& c,
                               const OverheadConstants& k);

struct GatherUnits;
// estimate_memory's figures alone, as a search reads them: the same components and totals,
// without explanations, notes or term names, and the units the model's sharded strategies
// gather worked out once. Holds references to the model and the constants.
class MemoryFigures {
 public:
  MemoryFigures(const ModelDesc& m, const OverheadConstants& k);
  ~MemoryFigures();
  MemoryFigures(const MemoryFigures&) = delete;
  MemoryFigures& operator=(const MemoryFigures&) = delete;
  MemoryEstimate operator()(const TrainingConfig& c) const;

 private:
  const ModelDesc& model_;
  const OverheadConstants& overheads_;
  std::unique_ptr<const GatherUnits> units_;
};

// The GPU peak against the GPU's memory and, with `host_per_node`, the host memory of one
// node against that capacity (bytes per node).
FitVerdict check_fit(const MemoryEstimate& e, const GpuSpec& gpu,
                     std::optional<Bytes> host_per_node = std::nullopt);

// {"strategy", "params", "shard_degree", "per_gpu": {...}, "per_cpu": {...}, "cpu_per_node",
//  "details": {...}, "explain": {...}, "notes", "capacity", "fits", "margin", "gpu"}; bytes as
// integers; capacity/fits/margin/gpu are null without a fit check.
nlohmann::json to_json(const MemoryEstimate& e);

// [{"name", "bytes"}, ...]: the terms of one component, as to_json's "details" lists them.
nlohmann::json terms_json(const std::vector<NamedBytes>& terms);

}  // namespace dtplan::cost
