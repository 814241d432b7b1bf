// A layout in words (see layout_text.hpp).
#include "dtplan/cost/layout_text.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

#include "dtplan/model/units.hpp"

namespace dtplan::cost {
namespace {

// "7, 8 x 14, 7": equal neighbours as one run.
std::string runs_text(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i])
      ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(v[i]);
    if (j - i > 1) out += " x " + std::to_string(j - i);
    i = j;
  }
  return out;
}

}  // namespace

std::string describe(const Layout3D& l) {
  std::ostringstream s;
  s << "tp " << l.tp;
  if (l.cp > 1) s << " x cp " << l.cp << " (" << name_of(l.cp_comm) << ")";
  s << " x pp " << l.pp << " x dp " << l.dp;
  if (l.ep > 1 || l.etp > 0) {
    s << ", experts over ep " << l.ep << " x etp " << l.expert_tp() << " x edp " << l.expert_dp();
    if (l.deepep) s << " (DeepEP)";
    if (l.overlap_ep_comm) s << " (all-to-alls overlapped)";
  }
  if (l.framework == Framework::fsdp2) {
    s << ", FSDP2 over " << l.shard_ranks() << (l.shard_ranks() == 1 ? " rank (" : " ranks (")
      << (l.sharding == DpSharding::gradients ? "blocks kept gathered from forward to backward"
                                              : "resharded after forward")
      << ")";
  } else if (l.sharding == DpSharding::none) {
    s << ", no distributed optimizer";
  }
  if (l.overlap_param_gather && l.overlap_grad_reduce) {
    s << ", gradient reduction and weight gathers overlapped";
  } else if (l.overlap_grad_reduce) {
    s << ", gradient reduction overlapped";
  } else if (l.overlap_param_gather) {
    s << ", weight gather in one bucket the next forward waits on (no gradient overlap, no "
         "buckets)";
  }
  if (l.ddp_bucket_params > 0)
    s << " (buckets of " << format_thousands(l.ddp_bucket_params) << " parameters)";
  if (l.grad_reduce_bf16) s << ", main gradients in bf16";
  if (l.interleave > 1) s << ", interleave " << l.interleave;
  if (l.pp > 1) s << ", schedule " << name_of(l.pipeline_schedule());
  const auto& split = l.stage_layers;
  if (!split.empty() &&
      std::adjacent_find(split.begin(), split.end(), std::not_equal_to<>()) != split.end()) {
    s << ", layers per stage " << runs_text(split);
  }
  if (l.sequence_parallel) s << ", sequence parallel";
  if (l.tp_comm_overlap) s << " (collectives overlapped with their GEMMs)";
  if (l.fp8 != Fp8Recipe::none) s << ", FP8 " << name_of(l.fp8);
  if (l.fp8_param_gather) s << " (weights kept and gathered in FP8)";
  s << ", micro-batch " << l.micro_batch << " x " << l.micro_batches << ", recompute "
    << name_of(l.recompute);
  if (l.recompute == Checkpointing::selective && !l.recompute_modules.is_default())
    s << " (" << text_of(l.recompute_modules) << ")";
  if (l.recompute == Checkpointing::full && l.checkpoint_every > 1)
    s << " (1 block in " << l.checkpoint_every << ")";
  if (l.offload != Offload::none) s << ", offload " << name_of(l.offload);
  return s.str();
}

std::string states_name(const Layout3D& l) {
  if (l.framework == Framework::fsdp2)
    return l.sharding == DpSharding::gradients ? "fsdp2-keep" : "fsdp2";
  return l.sharding == DpSharding::optimizer ? "dist-opt" : "replicated";
}

}  // namespace dtplan::cost
