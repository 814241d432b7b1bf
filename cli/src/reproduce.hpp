// The `dtplan estimate` command line of a plan's entry: the plan's own settings (model,
// cluster, constants, the framework options it was given) and the entry's choices (strategy or
// framework, precision, GPUs, batch, parallel sizes, sharding, recomputation, offload), so a
// user can look at the chosen configuration alone (its timeline, trace, exports).
#pragma once

#include <string>
#include <vector>

#include "dtplan/planner/unified_plan.hpp"

namespace dtplan::cli {

// `plan_args`: the plan's command line ("plan", "--model", ...). Returns the arguments after
// `dtplan`: "estimate", then the flags.
std::vector<std::string> estimate_args(const std::vector<std::string>& plan_args,
                                       const planner::LayoutChoice& entry);

// The arguments as one shell line (single-quoted where a shell would split or expand them).
std::string shell_line(const std::vector<std::string>& args);

}  // namespace dtplan::cli
