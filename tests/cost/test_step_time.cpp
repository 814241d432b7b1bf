// Tests for cost/src/step_time.cpp: the overlap rule on hand-made ops, micro-steps and no_sync,
// the timeline, and a whole estimate's arithmetic (throughput, MFU, stragglers, offload).
#include <catch2/catch.hpp>
#include <filesystem>

#include "dtplan/cost/step_time.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"

using namespace dtplan;
using namespace dtplan::cost;

namespace {
const std::filesystem::path kData = DTPLAN_DATA_DIR;

CommOp op(CommPhase phase, CommWhen when, double seconds, std::int64_t messages) {
  CommOp o;
  o.name = "op";
  o.phase = phase;
  o.when = when;
  o.time_s = seconds;
  o.messages = messages;
  return o;
}

StepInputs inputs(const std::vector<CommOp>& ops, std::int64_t micro_steps = 1,
                  bool no_sync = true) {
  StepInputs in;
  in.forward_s = 1.0;
  in.backward_s = 2.0;
  in.ops = ops;
  in.optimizer_s = 0.1;
  in.micro_steps = micro_steps;
  in.no_sync = no_sync;
  return in;
}
}  // namespace

TEST_CASE("a bucketed op hides behind backward except its last bucket") {
  // T = 1 s in U = 4 buckets alongside C = 2 s: exposed max(T/U, T - C (U-1)/U) = 0.25 s.
  const std::vector ops{op(CommPhase::backward, CommWhen::every_micro_step, 1.0, 4)};
  const auto t = step_times(inputs(ops));
  CHECK(t.exposed_comm_s == Approx(0.25));
  CHECK(t.hidden_comm_s == Approx(0.75));
  CHECK(t.compute_s == Approx(3.0));
  CHECK(t.step_s == Approx(3.0 + 0.25 + 0.1));
}

TEST_CASE("communication longer than the compute it overlaps is exposed beyond it") {
  // T = 3 s, U = 4, C = 2 s: max(0.75, 3 - 1.5) = 1.5 s exposed.
  const std::vector ops{op(CommPhase::backward, CommWhen::every_micro_step, 3.0, 4)};
  CHECK(step_times(inputs(ops)).exposed_comm_s == Approx(1.5));
  // One message cannot overlap at all.
  const std::vector one{op(CommPhase::backward, CommWhen::every_micro_step, 0.5, 1)};
  CHECK(step_times(inputs(one)).exposed_comm_s == Approx(0.5));
}

TEST_CASE("forward all-gathers overlap forward, ops outside the passes are exposed whole") {
  // ZeRO-3-like: 8 units gathered in forward (0.8 s vs 1 s forward): first unit exposed, 0.1 s.
  const std::vector ops{op(CommPhase::forward, CommWhen::every_micro_step, 0.8, 8),
                        op(CommPhase::after_backward, CommWhen::every_micro_step, 0.2, 1),
                        op(CommPhase::after_step, CommWhen::once_per_step, 0.3, 1)};
  const auto t = step_times(inputs(ops, 2));
  // Per micro-step 0.1 + 0.2 exposed, twice; the after-step op once.
  CHECK(t.exposed_comm_s == Approx(2 * (0.1 + 0.2) + 0.3));
  CHECK(t.compute_s == Approx(6.0));
}

TEST_CASE("a blocking op overlaps nothing: DeepSpeed before v0.6 synchronises around it") {
  // The same 0.8 s of forward gathers in 8 messages: overlapped, only the first unit's 0.1 s
  // shows; blocking, all 0.8 s add to the 1 s forward and the 2 s backward.
  auto gathers = op(CommPhase::forward, CommWhen::every_micro_step, 0.8, 8);
  auto reduce = op(CommPhase::backward, CommWhen::every_micro_step, 0.5, 8);
  CHECK(step_times(inputs({gathers, reduce})).exposed_comm_s == Approx(0.1 + 0.0625));
  gathers.blocking = true;
  reduce.blocking = true;
  const auto t = step_times(inputs({gathers, reduce}));
  CHECK(t.exposed_comm_s == Approx(1.3));
  CHECK(t.hidden_comm_s == Approx(0.0));
  CHECK(t.step_s == Approx(3.0 + 1.3 + 0.1));
}

TEST_CASE("no_sync defers gradient synchronisation to the last of the micro-steps") {
  const std::vector ops{op(CommPhase::backward, CommWhen::deferrable, 4.0, 4)};
  // Exposed once: max(1, 4 - 2 x 3/4) = 2.5 s; without no_sync four times.
  CHECK(step_times(inputs(ops, 4, true)).exposed_comm_s == Approx(2.5));
  CHECK(step_times(inputs(ops, 4, false)).exposed_comm_s == Approx(4 * 2.5));
  CHECK(step_times(inputs(ops, 4, true)).compute_s == Approx(12.0));
  // Many micro-steps cost the same arithmetic: first, middle (alike) and last.
  CHECK(step_times(inputs(ops, 1000, true)).compute_s == Approx(3000.0));
  CHECK(step_times(inputs(ops, 1000, false)).exposed_comm_s == Approx(2500.0));
}

TEST_CASE("a step's ops summed per micro-step place: only, first, between, last") {
  // ZeRO-3-like with accumulation: gathers every micro-step (0.8 s, 8 units), a deferred
  // reduce-scatter (0.4 s, 4 buckets), a gather of the first micro-step only (0.3 s) and an
  // all-gather after the optimizer step (0.2 s).
  const std::vector ops{op(CommPhase::forward, CommWhen::every_micro_step, 0.8, 8),
                        op(CommPhase::backward, CommWhen::deferrable, 0.4, 4),
                        op(CommPhase::before_forward, CommWhen::once_per_step, 0.3, 1),
                        op(CommPhase::after_step, CommWhen::once_per_step, 0.2, 1)};
  const StepComm deferred(ops, true);
  const auto& only = deferred.micro_step(0, 1);  // first and last: everything runs
  CHECK(only.before_s == Approx(0.3));
  CHECK(only.forward.comm_s == Approx(0.8));
  CHECK(only.forward.messages == 8);
  CHECK(only.backward.comm_s == Approx(0.4));
  const auto& first = deferred.micro_step(0, 4);  // no reduce yet
  CHECK(first.before_s == Approx(0.3));
  CHECK(first.backward.comm_s == 0.0);
  const auto& between = deferred.micro_step(2, 4);  // the gathers only
  CHECK(between.before_s == 0.0);
  CHECK(between.forward.comm_s == Approx(0.8));
  CHECK(between.backward.comm_s == 0.0);
  const auto& last = deferred.micro_step(3, 4);  // the reduce too
  CHECK(last.before_s == 0.0);
  CHECK(last.backward.comm_s == Approx(0.4));
  CHECK(last.backward.messages == 4);
  CHECK(deferred.after_step_s() == Approx(0.2));
  // Synchronising every micro-step, the reduce runs in each.
  CHECK(StepComm(ops, false).micro_step(2, 4).backward.comm_s == Approx(0.4));
  // Four micro-steps of 1 s forward and 2 s backward, deferred: forward exposes the first
  // gather unit each time (0.1 s x 4), the first micro-step's 0.3 s, the last's reduce
  // max(0.1, 0.4 - 2 x 3/4) = 0.1 s, and 0.2 s after the step.
  StepCompute c;
  c.forward_s = 1.0;
  c.backward_s = 2.0;
  c.micro_steps = 4;
  const auto t = deferred.times(c);
  CHECK(t.exposed_comm_s == Approx(4 * 0.1 + 0.3 + 0.1 + 0.2));
  CHECK(t.compute_s == Approx(12.0));
  CHECK(t.hidden_comm_s == Approx(4 * 0.7 + 0.3));
  // The total alone, as a search ranks by it: by hand 12 + 1.0 exposed + 0.5 optimizer + 0.25
  // host transfers, and the same double as the breakdown's at every accumulation, with and
  // without a slowdown of the overlapped compute.
  c.optimizer_s = 0.5;
  c.host_transfer_s = 0.25;
  CHECK(deferred.step_s(c) == Approx(12.0 + 1.0 + 0.5 + 0.25));
  for (const double slowdown : {0.0, 0.13}) {
    c.overlap_compute_slowdown = slowdown;
    for (const bool no_sync : {true, false}) {
      const StepComm comm(ops, no_sync);
      for (const std::int64_t m : {1, 2, 3, 7}) {
        c.micro_steps = m;
        c.forward_s = 0.37 * static_cast<double>(m);
        CHECK(comm.step_s(c) == comm.times(c).step_s);
      }
    }
  }
}

TEST_CASE("overlap slows compute by the configured fraction of the hidden communication") {
  const std::vector ops{op(CommPhase::backward, CommWhen::every_micro_step, 1.0, 4)};
  auto in = inputs(ops);
  in.overlap_compute_slowdown = 0.2;
  CHECK(step_times(in).compute_s == Approx(3.0 + 0.2 * 0.75));
}

TEST_CASE("the timeline covers the step on two streams") {
  const std::vector ops{op(CommPhase::forward, CommWhen::every_micro_step, 0.8, 8),
                        op(CommPhase::backward, CommWhen::deferrable, 1.0, 4)};
  const auto in = inputs(ops, 2);
  const auto events = step_timeline(in);
  double end = 0;
  int forwards = 0;
  for (const auto& e : events) {
    CHECK(e.end_s >= e.start_s);
    CHECK((e.stream == "compute" || e.stream == "communication"));
    end = std::max(end, e.end_s);
    forwards += e.name.rfind("forward", 0) == 0 ? 1 : 0;
  }
  CHECK(forwards == 2);
  CHECK(end == Approx(step_times(in).step_s));
}

TEST_CASE("an estimate: throughput, MFU from the model FLOPs, straggler, bad options") {
  const auto table = InterconnectTable::load(kData / "interconnect.json");
  const auto topo = Topology::build(load_node_template("dgx-a100", kData / "topologies"), 1, table);
  CommModel all(topo, table, 8);
  CommModel node(topo, table, 8);
  const auto m = load_model("gpt2-xl", kData / "models");
  const auto gpu = GpuCatalog::load(kData / "gpus.json").find("A100-80GB");
  const auto k = load_compute_constants(kData / "compute.json");
  const auto ov = load_overheads(kData / "overheads.json");
  TrainingConfig c;
  c.strategy = Strategy::ddp;
  c.dp_size = 8;
  c.micro_batch = 4;
  c.seq_len = 1024;
  StepOptions o;
  o.micro_steps = 3;
  const auto e = estimate_step(m, c, o, gpu, k, ov, {all, node});
  CHECK(e.global_batch == 4 * 3 * 8);
  CHECK(e.samples_per_s == Approx(96.0 / e.times.step_s));
  CHECK(e.tokens_per_s == Approx(96.0 * 1024 / e.times.step_s));
  // MFU: model FLOPs of the step over the step time at 312 TFLOP/s per GPU.
  CHECK(e.mfu == Approx(e.compute.model_flops * 3 / (e.times.step_s * 312e12)));
  CHECK(e.times.compute_s == Approx(3 * (e.compute.forward_s + e.compute.backward_s)));
  CHECK(e.times.step_s == Approx(e.times.compute_s + e.times.exposed_comm_s + e.times.optimizer_s +
                                 e.times.host_transfer_s));
  o.straggler_slowdown = 1.5;
  const auto slow = estimate_step(m, c, o, gpu, k, ov, {all, node});
  CHECK(slow.times.compute_s == Approx(1.5 * e.times.compute_s));
  o.straggler_slowdown = 0.5;
  CHECK_THROWS_WITH(estimate_step(m, c, o, gpu, k, ov, {all, node}),
                    Catch::Contains("straggler: a slowdown factor from 1 to 100"));
  o.straggler_slowdown = 1.0;
  o.micro_steps = 0;
  CHECK_THROWS_WITH(estimate_step(m, c, o, gpu, k, ov, {all, node}),
                    Catch::Contains("grad_accum: must be a positive integer"));
}

TEST_CASE("offload: the updated parameters come back over PCIe once per step") {
  const auto m = model_from_param_count(1'000'000'000, "--params");
  const auto gpu = GpuCatalog::load(kData / "gpus.json").find("A100-80GB");
  auto k = load_compute_constants(kData / "compute.json");
  k.host_transfer_efficiency = 1.0;
  TrainingConfig c;
  c.strategy = Strategy::zero3;
  c.dp_size = 8;
  c.offload = Offload::optimizer;
  std::vector<CommOp> ops{op(CommPhase::forward, CommWhen::every_micro_step, 0.0, 1)};
  ops[0].collective = Collective::all_gather;
  const double link = 16e9 / 8 * 16 * 128.0 / 130.0;
  // The 1/8 shard of bf16 parameters: 125M x 2 bytes.
  CHECK(offload_transfers(m, c, gpu, k, ops) == Approx(2.5e8 / link));
  CHECK(ops[0].time_s == 0.0);
  c.offload = Offload::optimizer_and_params;
  offload_transfers(m, c, gpu, k, ops);
  CHECK(ops[0].time_s == Approx(2.5e8 / link));  // each gather first fetches the shard
}
