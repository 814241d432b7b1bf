// The estimate command line of a plan's entry (reproduce.hpp).
#include "reproduce.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::cli {

namespace {

// Plan flags that estimate takes with the same meaning: what the plan was asked about, not
// what it chose.
constexpr std::array<std::string_view, 23> kShared{"--model",
                                                   "--params",
                                                   "--data-dir",
                                                   "--topology",
                                                   "--nodes",
                                                   "--pcie-class",
                                                   "--socket-class",
                                                   "--nvlink-class",
                                                   "--nic-class",
                                                   "--gpus-per-node",
                                                   "--compute",
                                                   "--compute-file",
                                                   "--gpu",
                                                   "--seq-len",
                                                   "--optimizer",
                                                   "--optimizer-impl",
                                                   "--layer-kernels",
                                                   "--zero-grad",
                                                   "--attention",
                                                   "--attention-kernel",
                                                   "--deepspeed-version",
                                                   "--host-memory",
                                                   "--overhead"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& flags, std::string_view flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

// The plan's flags that carry over, each with its values (a token not starting with "--";
// "--flag=value" is one token).
std::vector<std::string> carried(const std::vector<std::string>& plan_args) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i < plan_args.size(); ++i) {
    const std::string& a = plan_args[i];
    if (a.rfind("--", 0) != 0) continue;
    const std::string flag = a.substr(0, a.find('='));
    const bool keep = listed(kShared, flag);
    std::size_t j = i + 1;
    while (a.find('=') == std::string::npos && j < plan_args.size() &&
           plan_args[j].rfind("--", 0) != 0)
      ++j;
    if (keep)
      out.insert(out.end(), plan_args.begin() + static_cast<std::ptrdiff_t>(i),
                 plan_args.begin() + static_cast<std::ptrdiff_t>(j));
    i = j - 1;
  }
  return out;
}

void add(std::vector<std::string>& out, const char* flag, const std::string& value) {
  out.emplace_back(flag);
  out.push_back(value);
}

void add(std::vector<std::string>& out, const char* flag, std::int64_t value) {
  add(out, flag, std::to_string(value));
}

void data_parallel_choice(const planner::Candidate& c, std::vector<std::string>& out) {
  add(out, "--strategy", std::string(name_of(c.strategy)));
  add(out, "--precision", std::string(name_of(c.precision)));
  add(out, "--gpus", c.dp);
  add(out, "--micro-batch", c.micro_batch);
  add(out, "--global-batch", c.global_batch);
  add(out, "--checkpointing", std::string(name_of(c.checkpointing)));
  add(out, "--offload", std::string(name_of(c.offload)));
  if (c.grad_accum > 1 && !c.no_sync && cost::supports_no_sync(c.strategy))
    out.emplace_back("--sync-every-micro-step");
}

std::string joined(const std::vector<std::int64_t>& values) {
  std::string text;
  for (const auto v : values)
    text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

void parallel_sizes(const cost::Layout3D& l, std::vector<std::string>& out) {
  add(out, "--tp", l.tp);
  add(out, "--pp", l.pp);
  add(out, "--cp", l.cp);
  if (l.cp > 1) add(out, "--cp-comm", std::string(name_of(l.cp_comm)));
  if (l.ep > 1) add(out, "--ep", l.ep);
  if (l.etp > 0) add(out, "--etp", l.etp);
  if (l.capacity_factor > 0) add(out, "--capacity-factor", std::to_string(l.capacity_factor));
  if (l.sequence_parallel) out.emplace_back("--sp");
  if (l.pp > 1) {
    add(out, "--interleave", l.interleave);
    add(out, "--schedule", std::string(name_of(l.pipeline_schedule())));
    if (!l.stage_layers.empty()) add(out, "--pp-layers", joined(l.stage_layers));
  }
}

// The framework options as the plan applied them to this layout (it applies a request's
// --tp-comm-overlap only where sequence parallelism runs, for one).
void overlap_options(const cost::Layout3D& l, std::vector<std::string>& out) {
  const std::array<std::pair<bool, const char*>, 7> flags{{
      {l.tp_comm_overlap, "--tp-comm-overlap"},
      {l.overlap_grad_reduce, "--overlap-grad-reduce"},
      {l.overlap_param_gather, "--overlap-param-gather"},
      {l.grad_reduce_bf16, "--grad-reduce-in-bf16"},
      {l.fp8_param_gather, "--fp8-param-gather"},
      {l.overlap_ep_comm, "--overlap-ep-comm"},
      {l.deepep, "--deepep"},
  }};
  for (const auto& [on, flag] : flags) {
    if (on) out.emplace_back(flag);
  }
  if (l.ddp_bucket_params > 0) add(out, "--ddp-bucket-size", l.ddp_bucket_params);
}

void layout_choice(const cost::Layout3D& l, std::vector<std::string>& out) {
  add(out, "--strategy", std::string(name_of(l.framework)));
  add(out, "--precision", std::string(name_of(l.precision)));
  if (l.fp8 != Fp8Recipe::none) add(out, "--fp8-recipe", std::string(name_of(l.fp8)));
  add(out, "--gpus", l.gpus());
  add(out, "--micro-batch", l.micro_batch);
  add(out, "--global-batch", l.global_batch());
  parallel_sizes(l, out);
  add(out, "--sharding", std::string(name_of(l.sharding)));
  if (l.shard_group > 0) add(out, "--dp-shard", l.shard_group);
  add(out, "--checkpointing", std::string(name_of(l.recompute)));
  if (l.recompute == Checkpointing::selective && !l.recompute_modules.is_default())
    add(out, "--recompute-modules", text_of(l.recompute_modules));
  if (l.recompute == Checkpointing::full && l.checkpoint_every > 1)
    add(out, "--checkpoint-every", l.checkpoint_every);
  if (l.offload != Offload::none) add(out, "--offload", std::string(name_of(l.offload)));
  overlap_options(l, out);
}

}  // namespace

std::vector<std::string> estimate_args(const std::vector<std::string>& plan_args,
                                       const planner::LayoutChoice& entry) {
  std::vector<std::string> out{"estimate"};
  const auto kept = carried(plan_args);
  out.insert(out.end(), kept.begin(), kept.end());
  if (entry.layout) {
    layout_choice(entry.layout->layout, out);
  } else {
    data_parallel_choice(*entry.data_parallel, out);
  }
  return out;
}

std::string shell_line(const std::vector<std::string>& args) {
  std::string line = "dtplan";
  for (const auto& a : args) {
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) != 0 ||
             std::string_view("-_./=,:+@%").find(ch) != std::string_view::npos;
    });
    if (plain) {
      line += " " + a;
      continue;
    }
    std::string quoted = "'";
    for (const char ch : a)
      quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    line += " " + quoted + "'";
  }
  return line;
}

}  // namespace dtplan::cli
