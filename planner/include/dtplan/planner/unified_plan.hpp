// One search over every layout a plan can take, one ranking, one Pareto front:
//   - the data-parallel family (tp = pp = cp = 1): DDP, ZeRO-1/2/3 and the FSDP modes with
//     offload, precision, gradient accumulation and no_sync (planner.hpp), and
//   - tensor x context x pipeline x data layouts under Megatron-LM or FSDP2 (search3d.hpp),
// over every GPU count the data-parallel search tries (fewer GPUs compete with all of them),
// ranked together by the request's objective. A restriction of any axis (tp, pp, cp,
// interleave, strategy or framework, offload, precision) applies to both: a tensor-parallel
// size list without 1 leaves out the data-parallel family, an offload the layouts do not
// model leaves out the layouts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/planner/planner.hpp"
#include "dtplan/planner/search3d.hpp"

namespace dtplan::planner {

struct LayoutRequest {
  // The batch, objective, precisions, checkpointing, ... shared by both; its rejected_kept
  // applies to the layouts too (Request3D::rejected_kept).
  PlanRequest plan;
  // Axes beyond the data-parallel family; empty: every valid value.
  std::vector<std::int64_t> tps, pps, cps, interleaves;
  std::vector<cost::CpComm> cp_comms;       // empty: p2p
  std::vector<std::int64_t> eps, etps;      // a mixture of experts; empty: search3d.hpp's
  Fp8Recipe fp8 = Fp8Recipe::none;          // FP8 Linear GEMMs: layouts only
  std::vector<cost::Framework> frameworks;  // empty: Megatron-LM and FSDP2
  std::vector<bool> sequence_parallel;      // empty: both
  std::vector<cost::PipelineSchedule> schedules;
  std::vector<RecomputeModules> recompute_modules;  // selective's sets; empty: search3d.hpp's
  bool overlap_ep_comm = false, deepep = false;     // where the layouts run them (search3d.hpp)
  bool overlap_grad_reduce = false, overlap_param_gather = false;  // Megatron-LM's, likewise
  std::int64_t ddp_bucket_size = 0;  // Megatron-LM's --ddp-bucket-size; 0: its default
  bool grad_reduce_in_bf16 = false;  // Megatron-LM's --grad-reduce-in-bf16
  bool fp8_param_gather = false;     // Megatron-LM's --fp8-param-gather
  bool tp_comm_overlap = false;      // Megatron-LM's --tp-comm-overlap (layouts with sp)
  // Whether strategies were named (plan.strategies and frameworks together): then only the
  // named families run; a data-parallel strategy list alone leaves the layouts out.
  bool strategies_named = false;
};

// One entry of the ranking: a data-parallel configuration or a layout, and the figures every
// entry has.
struct LayoutChoice {
  std::optional<Candidate> data_parallel;
  std::optional<Candidate3D> layout;
  std::int64_t gpus() const;
  std::int64_t global_batch() const;
  Bytes memory() const;
  double step_s() const;
  double samples_per_s() const;
  double tokens_per_s() const;
  double mfu() const;
  double objective() const;
  // The strategy (ddp, zero3, fsdp-full, ...) or the layout's framework (megatron, fsdp2).
  std::string family() const;
};

// A configuration or layout the plan did not choose, and why (Rejected's reasons and amounts;
// "slower" is measured against the plan's best, whichever family it is). The entry itself
// stays in the list its search left in the plan, found by `from` and `index` through the
// plan's accessors: a large search rejects 10^5 layouts, and a copy of each doubled the
// plan's peak memory.
struct RejectedChoice {
  enum class From : std::uint8_t {
    data_parallel_rejected,  // data_parallel.rejected[index]
    data_parallel_best,      // data_parallel.best, behind the best layout
    layout_rejected,         // layouts->rejected[index]
    layout_best,             // layouts->ranked.front(), behind the best data-parallel entry
  };
  From from = From::data_parallel_rejected;
  std::size_t index = 0;
  Reason reason = Reason::slower;
  double amount = 0;
};

// How the plan's numbers add up, over both families:
//   evaluated = chosen + rejected_evaluated
//   rejected_total() = rejected_evaluated + not_evaluated (rejected.size() when all are kept)
struct UnifiedCounts {
  std::int64_t evaluated = 0;  // data-parallel configurations and layouts priced
  std::int64_t data_parallel_evaluated = 0;
  std::int64_t layouts_evaluated = 0;
  std::int64_t chosen = 0;
  std::int64_t rejected_evaluated = 0;
  std::int64_t not_evaluated = 0;  // data-parallel families never evaluated (unsupported, ...)
  std::string not_evaluated_why;   // which of those reasons: SearchCounts::not_evaluated_why
};

struct UnifiedPlan {
  PlanResult data_parallel;  // empty when the family was left out
  bool data_parallel_searched = false;
  std::optional<Result3D> layouts;   // none when left out (see layouts_left_out)
  std::string layouts_left_out;      // why the layouts were not searched, if they were not
  std::vector<LayoutChoice> ranked;  // best objective first, up to top_k
  std::vector<LayoutChoice> pareto;  // fewest bytes first, each better than all that use less
  // Every entry not chosen, both families, less those the searches did not keep
  // (PlanRequest::rejected_kept), which rejected_omitted counts per reason.
  std::vector<RejectedChoice> rejected;
  std::map<Reason, std::int64_t> rejected_omitted;
  // When nothing fits: what would. {name} marks a request or input field (render_fields).
  std::vector<std::string> suggestions;
  double elapsed_s = 0;
  const LayoutChoice* best() const { return ranked.empty() ? nullptr : &ranked.front(); }
  // The best of the ranking, as a percentage: how far `objective` is behind it.
  double behind_pct(double objective) const;
  // Entries rejected, listed or omitted; those of one reason omitted from the list.
  std::int64_t rejected_total() const;
  std::int64_t omitted(Reason reason) const;
  // A rejected entry's configuration (nullptr for a layout; a micro_batch of 0 stands for
  // every micro-batch of that kind), layout (nullptr for a configuration), objective (the search's,
  // lower is better), the entry as a ranking entry (a copy, with the layout's memory and time as
  // priced), and the data-parallel detail.
  const Candidate* data_parallel_of(const RejectedChoice& r) const;
  const cost::Layout3D* layout_of(const RejectedChoice& r) const;
  double objective_of(const RejectedChoice& r) const;
  LayoutChoice choice_of(const RejectedChoice& r) const;
  const std::string& detail_of(const RejectedChoice& r) const;
};

UnifiedCounts counts_of(const UnifiedPlan& p);

// Megatron-LM's flags of `r` against what the search can run them on: each needs Megatron-LM
// among the frameworks; --ddp-bucket-size the reduce overlap; --fp8-param-gather an FP8
// recipe; --grad-reduce-in-bf16 bf16 among the precisions (empty: the GPU's default, bf16 on
// every GPU with bf16 tensor cores). Throws a FieldError naming the flag (plan_layouts calls it,
// so the CLI and the GUI refuse alike).
void check_framework_flags(const LayoutRequest& r);

// Throws as plan() and search_3d() do, naming the request's fields.
UnifiedPlan plan_layouts(const ModelDesc& m, const Topology& t, const InterconnectTable& table,
                         const GpuSpec& gpu, const LayoutRequest& r,
                         const cost::ComputeConstants& k, const cost::OverheadConstants& overheads,
                         std::shared_ptr<cost::CommContext> comm = nullptr);

// How each family fared: its best entry (and how far behind the plan's best), or its
// nearest miss: a data-parallel rejection, or the layout least over memory.
struct FamilyOutcome {
  std::string family;
  std::optional<LayoutChoice> best;
  double behind_pct = 0;
  std::optional<Rejected> nearest_miss;            // data-parallel strategies
  std::optional<Candidate3D> nearest_layout_miss;  // frameworks with no layout in memory
};
std::vector<FamilyOutcome> by_family(const UnifiedPlan& p);

// The best layout a framework runs, if one fits.
const Candidate3D* best_layout_of(const UnifiedPlan& p, cost::Framework f);

}  // namespace dtplan::planner
