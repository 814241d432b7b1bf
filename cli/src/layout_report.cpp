// A layout in text (see layout_report.hpp).
#include "layout_report.hpp"

#include <cmath>

#include "dtplan/planner/layout_json.hpp"
#include "format.hpp"

namespace dtplan::cli {

void add_explanations(nlohmann::json& j, const cost::Memory3D& mem) {
  auto explain = planner::memory_explain_json(mem);
  for (auto& [component, text] : explain.items())
    text = with_flags(text.get<std::string>());
  j["explain"] = explain;
  j["notes"] = nlohmann::json::array();
  for (const auto& note : mem.notes)
    j["notes"].push_back(with_flags(note));
}

void print_layout_memory(std::ostream& out, const cost::Layout3D& l, const cost::Memory3D& mem,
                         const std::optional<GpuSpec>& gpu, const std::string& indent) {
  std::vector<LinePart> parts{
      {"", "memory per GPU (the heaviest: pipeline stage " + std::to_string(mem.stage + 1) +
               " of " + std::to_string(l.pp) + ", " + format_thousands(mem.params_per_gpu) +
               " parameters):"},
      {" ", "weights " + gib(mem.weights) + " GiB"},
      {", ", "master weights " + gib(mem.master_weights)},
      {", ", "gradients " + gib(mem.gradients)},
      {", ", "optimizer states " + gib(mem.optimizer_states)},
      {", ", "activations " + gib(mem.activations)}};
  if (mem.logits.value > 0) parts.push_back({", ", "logits and loss " + gib(mem.logits)});
  if (mem.buffers.value > 0) parts.push_back({", ", "buffers " + gib(mem.buffers)});
  parts.push_back({", ", "overhead " + gib(mem.overhead)});
  std::string total = "total " + gib(mem.total()) + " GiB";
  if (gpu) total += " of " + gib(gpu->memory);
  parts.push_back({"; ", total});
  if (gpu && mem.total().value > gpu->memory.value) {
    parts.push_back({": ", "does NOT fit on " + gpu->name + " (short by " +
                               gib(Bytes{mem.total().value - gpu->memory.value}) + " GiB)"});
  } else if (gpu) {
    // "; above dtplan plan's 10% headroom (...), which keeps room ...", or empty: one part
    // per clause.
    const auto clause = headroom_clause(mem.total(), gpu->memory);
    std::string separator = "; ";
    for (std::size_t at = clause.empty() ? std::string::npos : 2; at != std::string::npos;) {
      const auto comma = clause.find(", ", at);
      parts.push_back(
          {separator, clause.substr(at, comma == std::string::npos ? comma : comma - at)});
      separator = ", ";
      at = comma == std::string::npos ? comma : comma + 2;
    }
  }
  print_wrapped(out, indent, parts);
  for (const auto& note : mem.notes)
    out << indent << "note: " << with_flags(note) << "\n";
}

LayoutHost layout_host(const cost::Memory3D& mem, std::int64_t gpus_on_a_node, Bytes capacity) {
  return {mem.host, Bytes{checked_mul(mem.host.value, gpus_on_a_node, "host bytes per node")},
          capacity};
}

void print_layout_host(std::ostream& out, const LayoutHost& h, const std::string& indent) {
  if (h.per_gpu.value == 0) return;
  out << indent << "host memory (offloaded states): " << gib(h.per_gpu) << " GiB per GPU, "
      << gib(h.per_node) << " GiB per node of " << gib(h.capacity)
      << (h.fits() ? std::string()
                   : ": does NOT fit (short by " + gib(Bytes{h.per_node.value - h.capacity.value}) +
                         " GiB; --host-memory)")
      << "\n";
}

void add_host_json(nlohmann::json& j, const LayoutHost& h) {
  j["host_bytes_per_gpu"] = h.per_gpu.value;
  j["host_bytes_per_node"] = h.per_node.value;
  j["host_capacity_bytes"] = h.capacity.value;
  j["host_fits"] = h.fits();
}

void print_layout_figures(std::ostream& out, const planner::Candidate3D& c, const GpuSpec& gpu,
                          const std::string& indent, const LayoutHost* host) {
  const auto& l = c.layout;
  const auto& tm = c.time;
  const double m = static_cast<double>(l.micro_batches);
  print_layout_memory(out, l, c.memory, gpu, indent);
  if (host) print_layout_host(out, *host, indent);
  std::vector<LinePart> parts{
      {"", "step " + seconds(tm.step_s) + ": " + std::to_string(l.micro_batches) +
               (l.micro_batches == 1 ? " micro-batch x " : " micro-batches x ") +
               seconds(tm.microbatch_s)},
      {" (", "compute " + seconds(tm.compute_s)},
      {", ", (l.tp_comm_overlap ? "tensor-parallel collectives not hidden "
                                : "tensor-parallel all-reduces ") +
                 seconds(tm.tp_comm_s)}};
  if (l.cp > 1) parts.push_back({", ", "context-parallel K/V exchange " + seconds(tm.cp_comm_s)});
  if (tm.ep_comm_s > 0)
    parts.push_back({", ", "expert dispatch and combine " + seconds(tm.ep_comm_s)});
  if (l.framework == cost::Framework::fsdp2)
    parts.push_back({", ", "FSDP gathers and reductions not hidden " + seconds(tm.fsdp_comm_s)});
  parts.push_back(
      {", ", "pipeline sends " + seconds(tm.p2p_s) + ") = " + seconds(tm.microbatch_s * m)});
  parts.push_back({", ", "pipeline bubble " + seconds(tm.bubble_s)});
  parts.push_back({", ", (l.overlap_grad_reduce || l.overlap_param_gather
                              ? "overlapped data-parallel buckets not hidden "
                              : "data-parallel gradients ") +
                             seconds(tm.dp_sync_s)});
  if (tm.host_transfer_s > 0)
    parts.push_back({", ", "host transfers " + seconds(tm.host_transfer_s)});
  parts.push_back({", ", "optimizer " + seconds(tm.optimizer_s) +
                             (l.offload != Offload::none ? " (on the CPU)" : "")});
  print_wrapped(out, indent, parts);
  out << indent << fixed(tm.samples_per_s, 2) << " samples/s, "
      << format_thousands(std::llround(tm.tokens_per_s)) << " tokens/s, MFU " << percent(tm.mfu)
      << "\n";
}

}  // namespace dtplan::cli
