// Layout of step-time estimates.
#include "estimate_report.hpp"

#include <algorithm>
#include <cmath>

#include "comm_report.hpp"
#include "dtplan/cost/compute_time.hpp"
#include "dtplan/cost/eager_layers.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/suggest.hpp"
#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

// " (foreach)", " (for-loop)" or " (fused)" for Adam and AdamW, as their step was priced;
// nothing for the others (one fused pass).
std::string optimizer_impl_text(const TrainingConfig& c) {
  const auto impl = cost::priced_optimizer_impl(c);
  return impl ? " (" + std::string(name_of(*impl)) + ")" : "";
}

nlohmann::json compute_json(const cost::ComputeTime& c) {
  return {{"forward_s", c.forward_s},
          {"backward_s", c.backward_s},
          {"recompute_s", c.recompute_s},
          {"gemm_s", c.gemm_s},
          {"attention_s", c.attention_s},
          {"elementwise_s", c.elementwise_s},
          {"host_wait_s", c.host_wait_s},
          {"model_flops", c.model_flops},
          {"hardware_flops", c.hardware_flops},
          {"overlap_units", c.layers},
          {"eager_launches",
           {{"forward", c.eager_forward_launches}, {"backward", c.eager_backward_launches}}},
          {"fsdp_hooks_host_s", c.fsdp_hooks_host_s},
          {"parameter_tensors", c.parameter_tensors}};
}

nlohmann::json times_json(const cost::StepTimes& t) {
  return {{"compute_s", t.compute_s},
          {"exposed_comm_s", t.exposed_comm_s},
          {"hidden_comm_s", t.hidden_comm_s},
          {"optimizer_s", t.optimizer_s},
          {"host_transfer_s", t.host_transfer_s}};
}

std::string share(double part, double whole) {
  return whole > 0 ? percent(part / whole) : "-";
}

}  // namespace

nlohmann::json timeline_json(const std::vector<cost::TimelineEvent>& events) {
  auto out = nlohmann::json::array();
  for (const auto& e : events) {
    out.push_back(
        {{"stream", e.stream}, {"name", e.name}, {"start_s", e.start_s}, {"end_s", e.end_s}});
  }
  return out;
}

nlohmann::json step_estimate_json(const cost::StepEstimate& e) {
  const auto memory = cost::to_json(e.memory);
  return {{"step_time_s", e.times.step_s},
          {"samples_per_s", e.samples_per_s},
          {"tokens_per_s", e.tokens_per_s},
          {"mfu", e.mfu},
          {"hfu", e.hfu},
          {"global_batch", e.global_batch},
          {"seq_len", e.seq_len},
          {"per_gpu", memory.at("per_gpu")},
          {"memory", memory},
          {"compute_per_micro_step", compute_json(e.compute)},
          {"step", times_json(e.times)},
          {"comm", training_comm_json(e.comm)},
          {"timeline", timeline_json(e.timeline)}};
}

void print_step_breakdown(std::ostream& out, const cost::StepEstimate& e,
                          const std::string& indent) {
  const auto& t = e.times;
  TextTable table({"part of the step", "time", "share"});
  table.add_row(
      {"forward + backward (all micro-steps)", seconds(t.compute_s), share(t.compute_s, t.step_s)});
  table.add_row(
      {"communication not hidden", seconds(t.exposed_comm_s), share(t.exposed_comm_s, t.step_s)});
  table.add_row({"optimizer step", seconds(t.optimizer_s), share(t.optimizer_s, t.step_s)});
  if (t.host_transfer_s > 0) {
    table.add_row({"host transfers (offload)", seconds(t.host_transfer_s),
                   share(t.host_transfer_s, t.step_s)});
  }
  table.add_rule();
  table.add_row({"step", seconds(t.step_s), ""});
  table.add_row({"communication hidden behind compute", seconds(t.hidden_comm_s), ""});
  table.print(out, {}, indent);
}

void print_gantt(std::ostream& out, const std::vector<cost::TimelineEvent>& events,
                 std::size_t width) {
  double end = 0;
  for (const auto& e : events)
    end = std::max(end, e.end_s);
  if (!(end > 0) || width < 10) return;
  std::string compute(width, ' ');
  std::string comm(width, ' ');
  for (const auto& e : events) {
    auto& row = e.stream == "compute" ? compute : comm;
    const auto from =
        static_cast<std::size_t>(std::floor(e.start_s / end * static_cast<double>(width)));
    auto to = static_cast<std::size_t>(std::ceil(e.end_s / end * static_cast<double>(width)));
    to = std::min(to, width);
    const char mark = e.name.rfind("forward + backward", 0) == 0 ? 'M'
                      : e.name.rfind("forward", 0) == 0          ? 'F'
                      : e.name.rfind("backward", 0) == 0         ? 'B'
                      : e.name.rfind("optimizer", 0) == 0        ? 'O'
                      : e.stream == "compute"                    ? 'c'
                                                                 : '=';
    for (std::size_t i = std::min(from, width - 1); i < std::max(to, from + 1) && i < width; ++i)
      row[i] = mark;
  }
  out << "  compute |" << compute << "|\n";
  out << "  comm    |" << comm << "|\n";
  out << "          0"
      << std::string(width - 1 - std::min<std::size_t>(width - 1, seconds(end).size()), ' ')
      << seconds(end) << "\n";
  out << "  F forward, B backward, M the micro-steps between the first and the last, O optimizer "
         "step, = communication\n";
}

void print_step_estimate(std::ostream& out, const EstimateReportContext& ctx,
                         const cost::StepEstimate& e) {
  const auto& c = ctx.config;
  const auto& t = ctx.topology;
  out << "dtplan estimate: one optimizer step (predicted)\n";
  TextTable head({"", ""});
  head.add_row(
      {"model", ctx.model.name + ", " + format_thousands(ctx.model.params) + " parameters"});
  head.add_row({"cluster", std::to_string(c.dp_size) + " x " + ctx.gpu.name + " on " +
                               t.node().name + " x " + std::to_string(t.nodes()) +
                               (t.nodes() == 1 ? " node" : " nodes")});
  head.add_row(
      {"training", std::string(name_of(c.strategy)) + ", " + std::string(name_of(c.precision)) +
                       (cost::eager_layers(c).has_value() ? " (eager kernels)" : "") + ", " +
                       std::string(name_of(c.optimizer)) + optimizer_impl_text(c) +
                       ", checkpointing " + std::string(name_of(c.checkpointing)) + ", offload " +
                       std::string(name_of(c.offload)) + ", " + attention_text(ctx.model, c)});
  std::string batch = "micro-batch " + std::to_string(c.micro_batch) + " x accumulation " +
                      std::to_string(ctx.options.micro_steps) + " x " + std::to_string(c.dp_size) +
                      " GPUs = " + std::to_string(e.global_batch);
  if (ctx.options.micro_steps > 1) {  // as dtplan plan writes it
    batch += ctx.options.no_sync && cost::supports_no_sync(c.strategy) ? " (no_sync)"
                                                                       : " (sync every micro-step)";
  }
  if (e.seq_len > 0) batch += ", sequence " + std::to_string(e.seq_len);
  head.add_row({"batch", batch});
  if (ctx.options.straggler_slowdown > 1.0) {
    head.add_row({"straggler", "the slowest rank computes " +
                                   fixed(ctx.options.straggler_slowdown, 2) +
                                   "x slower; every collective waits for it"});
  }
  head.print(out, {1});

  const auto& m = e.memory;
  out << "\n  memory per GPU: " << format_gib(m.gpu.total()) << " (model states "
      << format_gib(m.gpu.model_states()) << ", activations " << format_gib(m.gpu.activations)
      << ", buffers " << format_gib(m.gpu.buffers) << ", overhead " << format_gib(m.gpu.overhead)
      << ") of " << format_gib(ctx.gpu.memory)
      << (m.gpu.total() <= ctx.gpu.memory ? headroom_clause(m.gpu.total(), ctx.gpu.memory)
                                          : "  DOES NOT FIT")
      << '\n';
  if (m.fit && m.fit->host_capacity && m.cpu_per_node.value > 0) {
    out << "  host memory per node: " << format_gib(m.cpu_per_node) << " of "
        << format_gib(*m.fit->host_capacity)
        << (m.fit->host_fits ? "" : "  DOES NOT FIT (--host-memory)") << '\n';
  }
  const auto& k = e.compute;
  out << "  compute per micro-step: forward " << seconds(k.forward_s) << ", backward "
      << seconds(k.backward_s);
  if (k.recompute_s > 0) out << " (of which recomputation " << seconds(k.recompute_s) << ")";
  if (k.host_wait_s > 0) {
    out << "; the GPU waits " << seconds(k.host_wait_s) << " on the host's eager launches";
    if (k.fsdp_hooks_host_s > 0) {
      out << " and FSDP's hooks (" << seconds(k.fsdp_hooks_host_s) << " of host time over "
          << k.layers + 1 << " wrapped modules)";
    }
  }
  out << "; " << fixed(k.model_flops / 1e12, 1) << " model TFLOP\n";
  const double slow = ctx.options.straggler_slowdown;
  if (slow > 1.0) {  // the step below is paced by the slowest rank
    out << "  on the slowest rank (" << fixed(slow, 2) << "x): forward "
        << seconds(k.forward_s * slow) << ", backward " << seconds(k.backward_s * slow)
        << "; the step below runs at its pace\n";
  }
  out << '\n';
  print_step_breakdown(out, e, "  ");
  out << "\n  throughput: " << fixed(e.samples_per_s, 2) << " samples/s";
  if (e.seq_len > 0) out << ", " << format_thousands(std::llround(e.tokens_per_s)) << " tokens/s";
  out << "; MFU " << percent(e.mfu) << ", HFU " << percent(e.hfu) << " (of "
      << fixed(ctx.gpu.peak_flops_for(c.precision) / 1e12, 0) << " TFLOP/s "
      << compute_type(c.precision) << " peak)\n";

  if (e.comm.ops.empty()) {
    out << "\n  communication: none" << (c.dp_size == 1 ? " (one GPU: nothing to exchange)" : "")
        << '\n';
  } else {
    out << "\n  communication per occurrence:\n";
    TextTable ops({"", "group", "messages", "bytes", "runs/step", "each", "algorithm"});
    for (const auto& op : e.comm.ops) {
      ops.add_row({op.name, op.group, std::to_string(op.messages), format_gib(op.bytes),
                   std::to_string(op.runs), seconds(op.time_s), op.algorithm});
    }
    ops.print(out, {1, 6}, "    ");
  }
  for (const auto& note : e.comm.notes)
    out << "    note: " << note << '\n';
  for (const auto& note : e.memory.notes)
    out << "    note: " << note << '\n';
  out << "\n  timeline of the step:\n";
  print_gantt(out, e.timeline, 72);
}

}  // namespace dtplan::cli
