// Composition of compute, communication and the optimizer into one step.
#include "dtplan/cost/step_time.hpp"

#include <algorithm>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "state_layout.hpp"

namespace dtplan::cost {

namespace {

// Whether an op runs in micro-step i of m.
bool runs_in(const CommOp& op, std::int64_t i, std::int64_t m, bool no_sync) {
  const bool first = i == 0;
  const bool last = i == m - 1;
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

// Exposed part of T seconds of communication in U messages alongside C seconds of compute.
double exposed(double t, std::int64_t messages, double compute) {
  if (t <= 0) return 0;
  const double u = static_cast<double>(std::max<std::int64_t>(messages, 1));
  return std::max(t / u, t - compute * (u - 1) / u);
}

struct Phase {
  double comm = 0;
  std::int64_t messages = 0;
  void add(const CommOp& op) {
    comm += op.time_s;
    messages = std::max(messages, op.messages);
  }
};

// The communication of micro-step i, by phase.
struct MicroStep {
  double before = 0;
  Phase forward;
  Phase backward;
  double after = 0;
};

MicroStep micro_step(const StepInputs& in, std::int64_t i) {
  MicroStep s;
  for (const auto& op : in.ops) {
    if (!runs_in(op, i, in.micro_steps, in.no_sync)) continue;
    switch (op.phase) {
      case CommPhase::before_forward:
        s.before += op.time_s;
        break;
      case CommPhase::forward:
        s.forward.add(op);
        break;
      case CommPhase::backward:
        s.backward.add(op);
        break;
      case CommPhase::after_backward:
        s.after += op.time_s;
        break;
      case CommPhase::after_step:
        break;
    }
  }
  return s;
}

double after_step(const StepInputs& in) {
  double t = 0;
  for (const auto& op : in.ops)
    t += op.phase == CommPhase::after_step ? op.time_s : 0.0;
  return t;
}

}  // namespace

StepTimes step_times(const StepInputs& in) {
  StepTimes out;
  const double slow = in.overlap_compute_slowdown;
  // Micro-steps differ only as first, last and the ones between (all alike): three at most.
  const std::int64_t m = in.micro_steps;
  struct Kind {
    std::int64_t index;
    std::int64_t count;
  };
  const Kind kinds[] = {{0, 1}, {1, std::max<std::int64_t>(m - 2, 0)}, {m - 1, m > 1 ? 1 : 0}};
  for (const auto& [i, count] : kinds) {
    if (count == 0) continue;
    const auto s = micro_step(in, i);
    const double ef = exposed(s.forward.comm, s.forward.messages, in.forward_s);
    const double eb = exposed(s.backward.comm, s.backward.messages, in.backward_s);
    const double hidden = (s.forward.comm - ef) + (s.backward.comm - eb);
    const double compute = in.forward_s + in.backward_s + slow * hidden;
    const double n = static_cast<double>(count);
    out.compute_s += n * compute;
    out.exposed_comm_s += n * (s.before + ef + eb + s.after);
    out.hidden_comm_s += n * hidden;
  }
  out.exposed_comm_s += after_step(in);
  out.optimizer_s = in.optimizer_s;
  out.host_transfer_s = in.host_transfer_s;
  out.step_s = out.compute_s + out.exposed_comm_s + out.optimizer_s + out.host_transfer_s;
  return out;
}

std::vector<TimelineEvent> step_timeline(const StepInputs& in) {
  std::vector<TimelineEvent> events;
  double t = 0;
  auto comm_events = [&](double start, bool forward, std::int64_t i) {
    double c = start;
    for (const auto& op : in.ops) {
      const bool phase = forward ? op.phase == CommPhase::forward : op.phase == CommPhase::backward;
      if (!phase || !runs_in(op, i, in.micro_steps, in.no_sync)) continue;
      events.push_back({"communication", op.name, c, c + op.time_s});
      c += op.time_s;
    }
    return c;
  };
  for (std::int64_t i = 0; i < in.micro_steps; ++i) {
    const auto s = micro_step(in, i);
    const std::string step = in.micro_steps > 1 ? " " + std::to_string(i + 1) : "";
    if (s.before > 0) {
      for (const auto& op : in.ops) {
        if (op.phase == CommPhase::before_forward && runs_in(op, i, in.micro_steps, in.no_sync)) {
          events.push_back({"communication", op.name, t, t + op.time_s});
          t += op.time_s;
        }
      }
    }
    // Forward: compute waits for what the first all-gather does not hide.
    const double ef = exposed(s.forward.comm, s.forward.messages, in.forward_s);
    comm_events(t, true, i);
    events.push_back({"compute", "forward" + step, t + ef, t + ef + in.forward_s});
    t += ef + in.forward_s;
    // Backward: messages become ready as the pass proceeds; the last one only at its end.
    const double u = static_cast<double>(std::max<std::int64_t>(s.backward.messages, 1));
    const double c = in.backward_s;
    const double tt = s.backward.comm;
    events.push_back({"compute", "backward" + step, t, t + c});
    const double end = comm_events(t + std::max(c / u, c + tt / u - tt), false, i);
    t = std::max(t + in.backward_s, end);
    for (const auto& op : in.ops) {
      if (op.phase == CommPhase::after_backward && runs_in(op, i, in.micro_steps, in.no_sync)) {
        events.push_back({"communication", op.name, t, t + op.time_s});
        t += op.time_s;
      }
    }
  }
  if (in.host_transfer_s > 0) {
    events.push_back({"communication", "host transfers (offload)", t, t + in.host_transfer_s});
    t += in.host_transfer_s;
  }
  events.push_back({"compute", "optimizer step", t, t + in.optimizer_s});
  t += in.optimizer_s;
  for (const auto& op : in.ops) {
    if (op.phase != CommPhase::after_step) continue;
    events.push_back({"communication", op.name, t, t + op.time_s});
    t += op.time_s;
  }
  return events;
}

std::int64_t optimizer_elements(const ModelDesc& m, const TrainingConfig& c) {
  return traits_of(c.strategy).shards_optimizer ? ceil_div(m.params, shard_degree(c)) : m.params;
}

double offload_transfers(const ModelDesc& m, const TrainingConfig& c, const GpuSpec& gpu,
                         const ComputeConstants& k, std::vector<CommOp>& ops) {
  if (c.offload == Offload::none) return 0;
  const double link = host_link_Bps(gpu, k);
  const double compute_bytes = is_mixed(c.precision) ? 2.0 : 4.0;
  if (c.offload == Offload::optimizer_and_params) {
    const double shard = static_cast<double>(ceil_div(m.params, shard_degree(c)));
    for (auto& op : ops) {
      if (op.collective == Collective::all_gather) op.time_s += shard * compute_bytes / link;
    }
  }
  return static_cast<double>(optimizer_elements(m, c)) * compute_bytes / link;
}

StepEstimate estimate_step(const ModelDesc& m, const TrainingConfig& config, const StepOptions& o,
                           const GpuSpec& gpu, const ComputeConstants& k,
                           const OverheadConstants& overheads, CommModels models) {
  auto c = config;  // memory depends on the accumulation (FSDP's no_sync)
  c.grad_accum = o.micro_steps;
  c.no_sync = o.no_sync;
  if (o.micro_steps < 1) throw Error("--grad-accum: must be a positive integer");
  if (!(o.straggler_slowdown >= 1.0) || o.straggler_slowdown > 100.0) {
    throw Error("--straggler: a slowdown factor from 1 to 100");
  }
  StepEstimate e;
  e.memory = estimate_memory(m, c, overheads);
  e.compute = estimate_compute(m, c, gpu, k);
  e.comm = estimate_training_comm(m, c, o.micro_steps, o.no_sync, models);
  StepInputs in;
  in.forward_s = e.compute.forward_s * o.straggler_slowdown;
  in.backward_s = e.compute.backward_s * o.straggler_slowdown;
  auto ops = e.comm.ops;
  in.host_transfer_s = offload_transfers(m, c, gpu, k, ops);
  in.ops = ops;
  in.optimizer_s = optimizer_time(optimizer_elements(m, c), c, gpu, k) * o.straggler_slowdown;
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
