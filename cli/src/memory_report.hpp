// Human-readable memory reports: one strategy in detail, or all strategies side by side.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "dtplan/cost/memory.hpp"
#include "dtplan/model/model_desc.hpp"

namespace dtplan::cli {

struct SkippedStrategy {
  Strategy strategy;
  std::string reason;
};

struct MemoryReportContext {
  const ModelDesc& model;
  const TrainingConfig& config;  // strategy ignored
  const std::optional<GpuSpec>& gpu;
  std::optional<Bytes> host_memory;  // per node, checked with the GPU fit
  bool host_assumed = false;         // not given: kDefaultHostMemory
};

// The estimate with the {field} markers of its notes and explanations as the CLI's flags.
cost::MemoryEstimate with_flags(cost::MemoryEstimate e);

void print_memory_header(std::ostream& out, const MemoryReportContext& ctx,
                         const std::string& strategy_text, std::int64_t seq_len);
void print_memory_detail(std::ostream& out, const MemoryReportContext& ctx,
                         const cost::MemoryEstimate& e);
void print_memory_comparison(std::ostream& out, const MemoryReportContext& ctx,
                             const std::vector<cost::MemoryEstimate>& estimates,
                             const std::vector<SkippedStrategy>& skipped);

}  // namespace dtplan::cli
