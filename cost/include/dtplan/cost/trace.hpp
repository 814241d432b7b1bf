// Predicted step timelines as Chrome trace files (the Trace Event Format that Perfetto and
// chrome://tracing open): one complete event ("ph": "X", microseconds) per timeline event,
// one thread per stream, named by metadata events, in the order the streams first appear.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/cost/step_time.hpp"

namespace dtplan::cost {

std::string chrome_trace(const std::vector<TimelineEvent>& events, std::string_view title);

// The step of a tensor x context x pipeline layout as its slowest stage's GPU runs it: each
// micro-batch's compute, then the parts of it the model counts as exposed (tensor-parallel
// collectives, the context-parallel exchange, the pipeline sends, FSDP's gathers and
// reductions), one stream each; the schedule's bubble at the end of the pipeline phase; then
// the data-parallel collectives of the step by name (gradients before the optimizer step,
// updated weights after it) and, under offload, the host transfers. Beyond 16 micro-batches the
// middle ones are one block.
std::vector<TimelineEvent> timeline_3d(const Layout3D& l, const Time3D& t);

}  // namespace dtplan::cost
