// Layout of collective and training-communication reports.
#include "comm_report.hpp"

#include <cstdio>

#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

std::string algorithm_label(const cost::CollectiveEstimate& e) {
  return std::string(cost::name_of(e.algorithm)) + "/" + std::string(name_of(e.protocol));
}

void print_ring_header(std::ostream& out, cost::CommModel& model) {
  const auto& plan = model.rings();
  out << "# rings: " << plan.rings.size() << " channel" << (plan.rings.size() == 1 ? "" : "s")
      << ", " << fixed(plan.bandwidth_Bps / 1e9, 1) << " GB/s per GPU; first ring:";
  for (std::size_t i = 0; i < plan.rings.front().size() && i < 32; ++i) {
    out << ' ' << plan.rings.front()[i];
  }
  out << (plan.rings.front().size() > 32 ? " ..." : "") << '\n';
  const auto& b = plan.bottleneck;
  out << "# ring bottleneck: " << b.from << " -> " << b.to << " (" << b.kind << ", " << b.link_class
      << ", " << fixed(b.achieved_Bps / 1e9, 1) << " GB/s achieved)\n#\n";
}

}  // namespace

nlohmann::json collective_json(const cost::CollectiveEstimate& e) {
  return {{"size_bytes", e.size.value},
          {"time_s", e.time_s},
          {"latency_s", e.latency_s},
          {"algbw_Bps", e.algbw_Bps},
          {"busbw_Bps", e.busbw_Bps},
          {"algorithm", std::string(cost::name_of(e.algorithm))},
          {"protocol", std::string(name_of(e.protocol))},
          {"channels", e.channels},
          {"ring", e.ring},
          {"bottleneck",
           {{"from", e.bottleneck.from},
            {"to", e.bottleneck.to},
            {"kind", e.bottleneck.kind},
            {"class", e.bottleneck.link_class},
            {"bandwidth_Bps", e.bottleneck.bandwidth_Bps},
            {"achieved_Bps", e.bottleneck.achieved_Bps},
            {"bytes", e.bottleneck.bytes}}}};
}

void print_collective_table(std::ostream& out, const Topology& t, cost::CommModel& model,
                            cost::Collective c, cost::Algorithm a,
                            const std::vector<cost::CollectiveEstimate>& results) {
  out << "# dtplan comm: " << cost::name_of(c) << " over " << model.gpus() << " GPUs of "
      << t.node().name << " (" << t.nodes() << (t.nodes() == 1 ? " node" : " nodes")
      << "), algorithm " << cost::name_of(a) << "; predicted, not measured\n";
  if (model.gpus() == 1) {
    out << "# one GPU: nothing to communicate\n";
    return;
  }
  if (c == cost::Collective::all_to_all) {
    out << "# point to point between every pair; each side's nearest NIC across nodes\n#\n";
  } else {
    print_ring_header(out, model);
  }
  const bool reduces = c != cost::Collective::all_gather && c != cost::Collective::all_to_all &&
                       c != cost::Collective::broadcast;
  // nccl-tests' count column is per rank for the collectives that split the buffer.
  const bool per_rank = c == cost::Collective::all_gather ||
                        c == cost::Collective::reduce_scatter || c == cost::Collective::all_to_all;
  const std::int64_t divisor = 4 * (per_rank ? model.gpus() : 1);
  TextTable table({"#        size", "count", "type", "redop", "time", "algbw", "busbw", "algorithm",
                   "bottleneck"});
  table.add_row({"#         (B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", ""});
  table.align_first_right();
  double busbw_sum = 0;
  for (const auto& e : results) {
    table.add_row({std::to_string(e.size.value), std::to_string(e.size.value / divisor), "float",
                   reduces ? "sum" : "none", fixed(e.time_s * 1e6, 1), fixed(e.algbw_Bps / 1e9, 2),
                   fixed(e.busbw_Bps / 1e9, 2), algorithm_label(e),
                   e.bottleneck.from + "->" + e.bottleneck.to});
    busbw_sum += e.busbw_Bps;
  }
  table.print(out, {7, 8}, "");
  out << "# Avg bus bandwidth    : "
      << fixed(busbw_sum / static_cast<double>(results.size()) / 1e9, 3) << " GB/s\n";
}

nlohmann::json training_comm_json(const cost::TrainingComm& r) {
  auto ops = nlohmann::json::array();
  for (const auto& op : r.ops)
    ops.push_back(cost::to_json(op));
  return {{"strategy", std::string(name_of(r.strategy))},
          {"micro_steps", r.micro_steps},
          {"no_sync", r.no_sync && r.no_sync_supported},
          {"ops", ops},
          {"bytes_per_step", r.bytes_per_step.value},
          {"wire_bytes_per_gpu_per_step", r.wire_bytes_per_step.value},
          {"time_per_step_s", r.time_per_step_s},
          {"time_synced_every_micro_step_s", r.time_synced_every_micro_step_s},
          {"wire_bytes_synced_every_micro_step", r.wire_bytes_synced_every_micro_step.value},
          {"no_sync_saving_s", r.time_synced_every_micro_step_s - r.time_per_step_s},
          {"notes", r.notes}};
}

void print_training_comm(std::ostream& out, const TrainingCommContext& ctx,
                         const std::vector<cost::TrainingComm>& results) {
  const auto& t = ctx.topology;
  out << "dtplan comm: communication of one optimizer step (predicted)\n";
  TextTable head({"", ""});
  const std::string count = ctx.model.kind == ModelKind::param_count
                                ? ""
                                : ", " + format_thousands(ctx.model.params) + " parameters";
  head.add_row(
      {"model", ctx.model.name + count + ", " + std::string(name_of(ctx.config.precision))});
  head.add_row({"GPUs", std::to_string(ctx.config.dp_size) + " data-parallel on " + t.node().name +
                            " x " + std::to_string(t.nodes()) +
                            (t.nodes() == 1 ? " node" : " nodes")});
  head.add_row({"steps", std::to_string(ctx.micro_steps) + " micro-step" +
                             (ctx.micro_steps == 1 ? "" : "s") + " per optimizer step; " +
                             (ctx.no_sync ? "no_sync where the strategy allows it"
                                          : "gradients synchronised every micro-step")});
  head.print(out, {1});
  const cost::TrainingComm* ddp = nullptr;
  for (const auto& r : results)
    ddp = r.strategy == Strategy::ddp ? &r : ddp;
  TextTable table({"strategy", "sent per GPU", "time/step", "sync every micro-step",
                   "no_sync saves", "bytes vs ddp"});
  for (const auto& r : results) {
    const double ratio = ddp && ddp->wire_bytes_per_step.value > 0
                             ? static_cast<double>(r.wire_bytes_per_step.value) /
                                   static_cast<double>(ddp->wire_bytes_per_step.value)
                             : 0.0;
    table.add_row({std::string(name_of(r.strategy)), format_gb(r.wire_bytes_per_step),
                   seconds(r.time_per_step_s), seconds(r.time_synced_every_micro_step_s),
                   seconds(r.time_synced_every_micro_step_s - r.time_per_step_s),
                   ddp ? fixed(ratio, 2) + "x" : "-"});
  }
  out << '\n';
  table.print(out);
  for (const auto& r : results) {
    out << "\n  " << name_of(r.strategy) << ":\n";
    TextTable ops({"", "group", "messages", "bytes", "runs/step", "each", "algorithm"});
    for (const auto& op : r.ops) {
      ops.add_row({op.name + (op.gradient_sync ? " *" : ""), op.group, std::to_string(op.messages),
                   format_gib(op.bytes), std::to_string(op.runs), seconds(op.time_s),
                   op.algorithm});
    }
    ops.print(out, {1, 6}, "    ");
    for (const auto& note : r.notes)
      out << "    note: " << note << '\n';
  }
  out << "\n  * deferred to the last micro-step by no_sync\n";
}

}  // namespace dtplan::cli
