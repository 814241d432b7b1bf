// A tensor x context x pipeline layout in text: the heaviest stage's memory by component and
// the step by part (dtplan estimate --tp/--pp/--cp and the best of dtplan plan).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/planner/search3d.hpp"

namespace dtplan::cli {

struct LayoutHost;
// `host`: the offloaded states' line after the memory line, when given.
void print_layout_figures(std::ostream& out, const planner::Candidate3D& c, const GpuSpec& gpu,
                          const std::string& indent, const LayoutHost* host = nullptr);
// "explain" and "notes" of a layout's memory, in the CLI's flags.
void add_explanations(nlohmann::json& j, const cost::Memory3D& mem);

// The memory line alone (and its notes); against the GPU's capacity when one is given.
void print_layout_memory(std::ostream& out, const cost::Layout3D& l, const cost::Memory3D& mem,
                         const std::optional<GpuSpec>& gpu, const std::string& indent);

// Offloaded states of a layout in host memory: per GPU, the ranks of one node together, and the
// node's host memory.
struct LayoutHost {
  Bytes per_gpu, per_node, capacity;
  bool fits() const { return per_node.value <= capacity.value; }
};
LayoutHost layout_host(const cost::Memory3D& mem, std::int64_t gpus_on_a_node, Bytes capacity);
// The host line, when the layout offloads.
void print_layout_host(std::ostream& out, const LayoutHost& h, const std::string& indent);
// "host_bytes_per_gpu", "host_bytes_per_node", "host_capacity_bytes", "host_fits".
void add_host_json(nlohmann::json& j, const LayoutHost& h);

}  // namespace dtplan::cli
