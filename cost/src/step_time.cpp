// Composition of compute, communication and the optimizer into one step.
#include "dtplan/cost/step_time.hpp"

#include <algorithm>
#include <array>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {

namespace {

// Whether an op runs in a micro-step at that place of the step.
bool runs_in(const CommOp& op, bool first, bool last, bool no_sync) {
  const bool early = op.phase == CommPhase::before_forward || op.phase == CommPhase::forward;
  switch (op.when) {
    case CommWhen::every_micro_step:
      return true;
    case CommWhen::once_per_step:
      return op.phase != CommPhase::after_step && (early ? first : last);
    case CommWhen::deferrable:
      return !no_sync || (early ? first : last);
  }
  return true;
}

void add(PassComm& pass, const CommOp& op) {
  if (op.blocking) {
    pass.blocking_s += op.time_s;
    return;
  }
  pass.comm_s += op.time_s;
  pass.messages = std::max(pass.messages, op.messages);
}

// exposed_comm_s of the pass, with its last message's time summed once (the same doubles).
double exposed(const PassComm& pass, double compute_s) {
  if (pass.comm_s <= 0) return pass.blocking_s;
  const double u = static_cast<double>(std::max<std::int64_t>(pass.messages, 1));
  return pass.blocking_s + std::max(pass.last_message_s, pass.comm_s - compute_s * (u - 1) / u);
}

void finish(PassComm& pass) {
  pass.last_message_s = pass.comm_s / static_cast<double>(std::max<std::int64_t>(pass.messages, 1));
}

// The communication of a micro-step at that place, by phase.
MicroStepComm sum_micro_step(std::span<const CommOp> ops, bool first, bool last, bool no_sync) {
  MicroStepComm s;
  for (const auto& op : ops) {
    if (!runs_in(op, first, last, no_sync)) continue;
    switch (op.phase) {
      case CommPhase::before_forward:
        s.before_s += op.time_s;
        break;
      case CommPhase::forward:
        add(s.forward, op);
        break;
      case CommPhase::backward:
        add(s.backward, op);
        break;
      case CommPhase::after_backward:
        s.after_s += op.time_s;
        break;
      case CommPhase::after_step:
        break;
    }
  }
  finish(s.forward);
  finish(s.backward);
  return s;
}

// The times of one micro-step: exposed communication around and inside each pass, and each
// pass's compute including the slowdown the communication hidden behind it causes.
struct MicroTimes {
  const MicroStepComm* ops = nullptr;  // the place's sums, held by the StepComm
  double exposed_forward = 0;
  double exposed_backward = 0;
  double forward = 0;   // compute
  double backward = 0;  // compute
  double hidden() const {
    return (ops->forward.total_s() - exposed_forward) +
           (ops->backward.total_s() - exposed_backward);
  }
  double total() const {
    return ops->before_s + exposed_forward + forward + backward + exposed_backward + ops->after_s;
  }
};

MicroTimes micro_times(const MicroStepComm& ops, const StepCompute& in) {
  MicroTimes t;
  t.ops = &ops;
  t.exposed_forward = exposed(ops.forward, in.forward_s);
  t.exposed_backward = exposed(ops.backward, in.backward_s);
  const double slow = in.overlap_compute_slowdown;
  t.forward = in.forward_s + slow * (ops.forward.total_s() - t.exposed_forward);
  t.backward = in.backward_s + slow * (ops.backward.total_s() - t.exposed_backward);
  return t;
}

// Micro-steps differ only as the first, the last, and those between (all alike).
struct Kind {
  std::int64_t index;
  std::int64_t count;
};

// At most three kinds, held in place: the search times millions of steps.
struct Kinds {
  std::array<Kind, 3> kinds{};
  std::size_t count = 0;
  const Kind* begin() const { return kinds.data(); }
  const Kind* end() const { return kinds.data() + count; }
};

Kinds micro_step_kinds(std::int64_t m) {
  Kinds out;
  out.kinds[out.count++] = {0, 1};
  if (m > 2) out.kinds[out.count++] = {1, m - 2};
  if (m > 1) out.kinds[out.count++] = {m - 1, 1};
  return out;
}

// Lays a step out on two streams; micro-steps between the first and the last are one block.
class Timeline {
 public:
  explicit Timeline(const StepInputs& in) : in_(in), comm_(in.ops, in.no_sync) {}

  std::vector<TimelineEvent> build() {
    for (const auto& k : micro_step_kinds(in_.micro_steps))
      micro_step(k);
    if (in_.host_transfer_s > 0) {
      add("communication", "host transfers (offload)", t_, in_.host_transfer_s);
      t_ += in_.host_transfer_s;
    }
    add("compute", "optimizer step", t_, in_.optimizer_s);
    t_ += in_.optimizer_s;
    for (const auto& op : in_.ops) {
      if (op.phase != CommPhase::after_step) continue;
      add("communication", op.name, t_, op.time_s);
      t_ += op.time_s;
    }
    return std::move(events_);
  }

 private:
  void add(const char* stream, const std::string& name, double start, double length) {
    events_.push_back({stream, name + label_, start, start + length});
  }

  // Ops of a phase back to back from `start`; returns where they end.
  double comm(CommPhase phase, std::int64_t i, double start, double scale) {
    const bool first = i == 0;
    const bool last = i == in_.micro_steps - 1;
    for (const auto& op : in_.ops) {
      if (op.phase != phase || !runs_in(op, first, last, in_.no_sync)) continue;
      add("communication", op.name, start, scale * op.time_s);
      start += scale * op.time_s;
    }
    return start;
  }

  void micro_step(const Kind& k) {
    const auto t = micro_times(comm_.micro_step(k.index, in_.micro_steps), in_);
    const auto m = in_.micro_steps;
    const double n = static_cast<double>(k.count);
    label_ = m == 1         ? ""
             : k.count == 1 ? " " + std::to_string(k.index + 1)
                            : " (micro-steps 2-" + std::to_string(m - 1) + ")";
    if (k.count > 1) {
      // One block: compute and each op's total time over the micro-steps it stands for.
      add("compute", "forward + backward", t_ + n * (t.ops->before_s + t.exposed_forward),
          n * (t.forward + t.backward));
      double c = t_;
      for (const auto phase : {CommPhase::before_forward, CommPhase::forward, CommPhase::backward,
                               CommPhase::after_backward}) {
        c = comm(phase, k.index, c, n);
      }
      t_ += n * t.total();
      return;
    }
    t_ = comm(CommPhase::before_forward, k.index, t_, 1.0);
    // Forward waits for what the first all-gather does not hide.
    comm(CommPhase::forward, k.index, t_, 1.0);
    add("compute", "forward", t_ + t.exposed_forward, t.forward);
    t_ += t.exposed_forward + t.forward;
    // Backward's messages become ready as it proceeds, the last one only at its end.
    add("compute", "backward", t_, t.backward);
    const double u = static_cast<double>(std::max<std::int64_t>(t.ops->backward.messages, 1));
    const double end = t_ + t.backward + t.exposed_backward;
    comm(CommPhase::backward, k.index,
         std::max(t_ + t.backward / u, end - t.ops->backward.total_s()), 1.0);
    t_ = comm(CommPhase::after_backward, k.index, end, 1.0);
    label_.clear();
  }

  const StepInputs& in_;
  StepComm comm_;
  std::vector<TimelineEvent> events_;
  std::string label_;
  double t_ = 0;
};

}  // namespace

double exposed_comm_s(double comm_s, std::int64_t messages, double compute_s) {
  if (comm_s <= 0) return 0;
  const double u = static_cast<double>(std::max<std::int64_t>(messages, 1));
  return std::max(comm_s / u, comm_s - compute_s * (u - 1) / u);
}

StepComm::StepComm(std::span<const CommOp> ops, bool no_sync) {
  places_[only] = sum_micro_step(ops, true, true, no_sync);
  places_[first] = sum_micro_step(ops, true, false, no_sync);
  places_[between] = sum_micro_step(ops, false, false, no_sync);
  places_[last] = sum_micro_step(ops, false, true, no_sync);
  for (const auto& op : ops)
    after_step_s_ += op.phase == CommPhase::after_step ? op.time_s : 0.0;
}

const MicroStepComm& StepComm::micro_step(std::int64_t index, std::int64_t micro_steps) const {
  if (micro_steps == 1) return places_[only];
  if (index == 0) return places_[first];
  return places_[index == micro_steps - 1 ? last : between];
}

StepTimes StepComm::times(const StepCompute& in) const {
  StepTimes out;
  for (const auto& k : micro_step_kinds(in.micro_steps)) {
    const auto t = micro_times(micro_step(k.index, in.micro_steps), in);
    const double n = static_cast<double>(k.count);
    out.compute_s += n * (t.forward + t.backward);
    out.forward_compute_s += n * t.forward;
    out.exposed_forward_s += n * t.exposed_forward;
    out.exposed_backward_s += n * t.exposed_backward;
    out.exposed_outside_s += n * (t.ops->before_s + t.ops->after_s);
    out.hidden_comm_s += n * t.hidden();
  }
  out.exposed_outside_s += after_step_s_;
  out.exposed_comm_s = out.exposed_forward_s + out.exposed_backward_s + out.exposed_outside_s;
  out.optimizer_s = in.optimizer_s;
  out.host_transfer_s = in.host_transfer_s;
  out.step_s = out.compute_s + out.exposed_comm_s + out.optimizer_s + out.host_transfer_s;
  return out;
}

double StepComm::step_s(const StepCompute& in) const {
  // The sums of times() in its order, so that the result is the same double.
  double compute_s = 0, exposed_forward_s = 0, exposed_backward_s = 0, outside_s = 0;
  for (const auto& k : micro_step_kinds(in.micro_steps)) {
    const auto t = micro_times(micro_step(k.index, in.micro_steps), in);
    const double n = static_cast<double>(k.count);
    compute_s += n * (t.forward + t.backward);
    exposed_forward_s += n * t.exposed_forward;
    exposed_backward_s += n * t.exposed_backward;
    outside_s += n * (t.ops->before_s + t.ops->after_s);
  }
  outside_s += after_step_s_;
  const double exposed_s = exposed_forward_s + exposed_backward_s + outside_s;
  return compute_s + exposed_s + in.optimizer_s + in.host_transfer_s;
}

StepTimes step_times(const StepInputs& in) {
  return StepComm(in.ops, in.no_sync).times(in);
}

std::vector<TimelineEvent> step_timeline(const StepInputs& in) {
  return Timeline(in).build();
}

std::int64_t optimizer_elements(const ModelDesc& m, const TrainingConfig& c) {
  return traits_of(c.strategy).shards_optimizer ? ceil_div(m.params, shard_degree(c)) : m.params;
}

double optimizer_step_s(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                        const ComputeConstants& k) {
  return std::max(optimizer_time(optimizer_elements(m, c), c, gpu, k),
                  fsdp_optimizer_host_s(m, c, k));
}

double host_transfers_s(Offload o, std::int64_t updated, std::int64_t shard, double element_bytes,
                        double link_Bps, std::vector<CommOp>& ops) {
  if (o == Offload::none) return 0;
  if (o == Offload::optimizer_and_params) {
    const double fetch_s = static_cast<double>(shard) * element_bytes / link_Bps;
    for (auto& op : ops) {
      if (op.collective == Collective::all_gather) op.time_s += fetch_s;
    }
  }
  return static_cast<double>(updated) * element_bytes / link_Bps;
}

double offload_transfers(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                         const ComputeConstants& k, std::vector<CommOp>& ops) {
  if (c.offload == Offload::none) return 0;
  const double compute_bytes = static_cast<double>(bytes_per_element(compute_element(c.precision)));
  return host_transfers_s(c.offload, optimizer_elements(m, c), ceil_div(m.params, shard_degree(c)),
                          compute_bytes, host_link_Bps(gpu, k), ops);
}

StepEstimate estimate_step(const ModelDesc& m, const TrainingConfig& config, const StepOptions& o,
                           const GpuSpec& gpu, const ComputeConstants& k,
                           const OverheadConstants& overheads, CommModels models) {
  auto c = config;  // memory depends on the accumulation (FSDP's no_sync)
  c.grad_accum = o.micro_steps;
  c.no_sync = o.no_sync;
  if (o.micro_steps < 1) throw FieldError("grad_accum", "must be a positive integer");
  if (!(o.straggler_slowdown >= 1.0) || o.straggler_slowdown > 100.0) {
    throw FieldError("straggler", "a slowdown factor from 1 to 100");
  }
  StepEstimate e;
  e.memory = estimate_memory(m, c, overheads);
  e.memory.fit = check_fit(e.memory, gpu);
  e.compute = estimate_compute(m, c, gpu, k);
  models.copy_kernel_s = k.kernel_overhead_s;
  e.comm = estimate_training_comm(m, c, o.micro_steps, o.no_sync, models, overheads);
  StepInputs in;
  in.forward_s = e.compute.forward_s * o.straggler_slowdown;
  in.backward_s = e.compute.backward_s * o.straggler_slowdown;
  auto ops = e.comm.ops;
  in.host_transfer_s = offload_transfers(m, c, gpu, k, ops);
  in.ops = ops;
  in.optimizer_s = optimizer_step_s(m, c, gpu, k) * o.straggler_slowdown;
  in.micro_steps = o.micro_steps;
  in.no_sync = o.no_sync;
  in.overlap_compute_slowdown = k.overlap_compute_slowdown;
  e.times = step_times(in);
  e.timeline = step_timeline(in);
  e.global_batch = checked_mul(checked_mul(c.micro_batch, o.micro_steps, "global batch"), c.dp_size,
                               "global batch");
  e.seq_len = m.transformer ? e.memory.seq_len : 0;
  e.samples_per_s = static_cast<double>(e.global_batch) / e.times.step_s;
  e.tokens_per_s = e.samples_per_s * static_cast<double>(std::max<std::int64_t>(e.seq_len, 1));
  const double peak = gpu.peak_flops_for(c.precision) * static_cast<double>(c.dp_size);
  const double micro = static_cast<double>(o.micro_steps);
  const double gpus = static_cast<double>(c.dp_size);
  e.mfu = e.compute.model_flops * micro * gpus / (e.times.step_s * peak);
  e.hfu = e.compute.hardware_flops * micro * gpus / (e.times.step_s * peak);
  return e;
}

}  // namespace dtplan::cost
