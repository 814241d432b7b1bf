// One rank's training loop under a data-parallel strategy, on any Device and Communicator:
//
//   DDP     replicated states; gradient buckets all-reduced as backward completes them
//   DP      replicated weights; gradients reduced to rank 0 after every backward, rank 0
//           alone keeps optimizer states and steps, then broadcasts the weights
//           (torch.nn.DataParallel's pattern)
//   ZeRO-1  optimizer states sharded; full gradients reduce-scattered after backward, the
//           updated slices all-gathered
//   ZeRO-2  + gradients sharded: each unit's gradient is reduce-scattered as backward
//           completes it, every micro-step
//   ZeRO-3  + weights sharded: each unit is all-gathered before use and freed after
//
// Every reduction averages over ranks (sum, then 1/n), as DDP does, so accumulating without
// no_sync stays correct. With no_sync (DDP, ZeRO-1: the strategies cost::supports_no_sync
// allows), gradients are synchronised in the last micro-step only. fp16 plans use dynamic loss
// scaling: gradients are unscaled before the global-norm clip, and a step with inf/NaN gradients is
// skipped and the scale halved.
//
// With tensor parallelism (stack.tp > 1, the stack a rank's share) `comm` is the rank's
// data-parallel group and `tp` its tensor-parallel group (consecutive world ranks, as Megatron-LM
// orders them): the strategy shards and reduces the share's units over the data-parallel group,
// the model's activations and gradients are summed over the tensor-parallel one (dense_model.hpp).
// Every rank of a tensor-parallel group trains on the same samples. The gradient norm counts the
// replicated parameters (norms, positions, row-parallel biases) once.
//
// With pipeline parallelism (stack.pp > 1, the stack a rank's stage) the step runs Megatron-LM's
// one-forward-one-backward schedule over the grad_accum micro-batches: stage s runs pp - s - 1
// forwards first, then alternates a forward with a backward, then finishes the backwards,
// exchanging activations and their gradients with its neighbours (Communicator::send_recv) and
// keeping at most pp - s micro-batches' activations, each in a model of its own. With tied
// embeddings the last stage keeps a copy of the embedding matrix, whose gradient is summed with
// the first stage's before the optimizer (the copy counted once in the norm). The strategy runs
// over the data-parallel group as before; ZeRO-2 and ZeRO-3 with tied embeddings across stages
// are refused.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/training.hpp"
#include "dtplan/runtime/communicator.hpp"
#include "dtplan/runtime/dense_model.hpp"
#include "dtplan/runtime/device.hpp"
#include "dtplan/runtime/mpi_group.hpp"
#include "dtplan/runtime/param_layout.hpp"
#include "dtplan/runtime/tensor_parallel.hpp"

namespace dtplan::runtime {

struct TrainerSettings {
  Strategy strategy = Strategy::ddp;
  Optimizer optimizer = Optimizer::adamw;
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  bool no_sync = true;
  std::int64_t bucket_cap_bytes = 25LL * 1048576;
  bool loss_scaling = false;
  float initial_loss_scale = 65536.0f;
  float lr = 1e-3f;
  float max_grad_norm = 1.0f;  // 0: no clipping
  std::uint64_t seed = 1234;
};

// The groups beyond the data-parallel one that a rank trains in (none: data parallelism only).
struct ModelParallel {
  Communicator* tp = nullptr;         // the stack.tp ranks splitting each block
  Communicator* pp = nullptr;         // the stack.pp stages of the rank's pipeline, in order
  Communicator* embedding = nullptr;  // tied embeddings across stages: the first and last stage
  const MpiGroup* host = nullptr;     // every rank of the replica (tp x pp), for gradient norms
};

struct StepMeasurement {
  std::int64_t step = 0;
  double time_s = 0;
  double forward_s = 0;    // all micro-steps, ZeRO-3 gathers included
  double backward_s = 0;   // all micro-steps, in-backward collectives included
  double comm_wait_s = 0;  // after backward, waiting for gradient synchronisation
  double optimizer_s = 0;  // unscale, clip, update, weight all-gather / broadcast
  double loss = 0;         // mean over the global batch's tokens
  double grad_norm = 0;    // before clipping
  bool skipped = false;    // inf/NaN gradients under loss scaling
  float loss_scale = 1;
  std::vector<CollectiveRecord> collectives;
};

class Trainer {
 public:
  // `host`: every rank of the job; `mp`: the model-parallel groups stack.tp and stack.pp ask for.
  Trainer(const cost::DenseStack& stack, const TrainerSettings& settings, Device& device,
          Communicator& comm, const MpiGroup& host, const ModelParallel& mp = {});

  StepMeasurement step(std::int64_t index);

  // Every parameter of the whole model (the tensor-parallel shares reassembled), unpadded, in
  // flat order, on every rank (collective).
  std::vector<float> gather_parameters();
  const ParamLayout& layout() const { return layout_; }
  std::int64_t buckets() const { return static_cast<std::int64_t>(buckets_.size()); }
  // Whether gradients wait for the last micro-step (false for DP and ZeRO-2/3, which reduce
  // every micro-step).
  bool no_sync_effective() const;

 private:
  using Mode = cost::RuntimeMode;

  void allocate_states();
  void initialise_weights();
  void micro_step(std::int64_t step, std::int64_t micro, StepMeasurement& m);
  void pipeline_step(std::int64_t step, StepMeasurement& m);
  void load_batch(std::int64_t step, std::int64_t micro, std::size_t slot);
  void forward(std::size_t slot);
  void backward(std::size_t slot, bool sync);
  // The stage's units (units_of(stack)): the embedding's, block l's, the head's.
  std::int64_t block_unit(std::int64_t l) const { return (stack_.has_embedding() ? 1 : 0) + l; }
  std::int64_t head_unit() const;
  std::vector<float> initial_values(std::int64_t u) const;
  void tie_embedding_gradients();
  std::int64_t shared_table(std::int64_t u) const;  // elements of unit u counted on stage 0
  const float* unit_params(std::int64_t u);
  void release_params(std::int64_t u);
  float* unit_grads(std::int64_t u);
  void unit_done(std::int64_t u, bool sync);
  void synchronise_gradients();
  void optimizer_step(StepMeasurement& m);
  void update_region(float* w, float* g, std::int64_t state_offset, std::int64_t n);
  // This rank's part of the squared gradient norm: its gradients, less the replicated elements
  // on tensor-parallel ranks other than 0.
  double local_sum_squares();
  std::vector<float> whole_unit(std::int64_t u, const std::vector<float>& share);
  std::vector<float> join_stages(const std::vector<float>& mine);
  void zero_gradients();
  void average(float* data, std::int64_t n);

  const cost::DenseStack stack_;  // a copy: the models keep a reference to it
  TrainerSettings set_;
  Device& dev_;
  Communicator& comm_;
  const MpiGroup& host_;
  Communicator* tp_;
  Communicator* pp_;
  Communicator* emb_;
  const MpiGroup* mp_host_;
  Mode mode_;
  ParamLayout layout_;
  std::vector<Bucket> buckets_;
  std::vector<CommHandle> in_flight_;
  // One model (its activations) per micro-batch a pipeline stage keeps in flight.
  std::vector<std::unique_ptr<DenseModel>> models_;
  Buffer weights_, grads_, moment1_, moment2_;
  Buffer slice_tmp_;
  std::map<std::int64_t, Buffer> gathered_, unit_grad_;
  std::vector<Buffer> ids_, targets_;  // per model
  float loss_scale_ = 1;
  std::int64_t adam_steps_ = 0;
  double loss_sum_ = 0;
};

}  // namespace dtplan::runtime
