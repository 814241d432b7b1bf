// Chrome trace files and the 3D layout's timeline (see trace.hpp).
#include "dtplan/cost/trace.hpp"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

namespace dtplan::cost {

std::string chrome_trace(const std::vector<TimelineEvent>& events, std::string_view title) {
  constexpr double kMicroseconds = 1e6;
  nlohmann::json trace = nlohmann::json::array();
  trace.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", 1},
                   {"args", {{"name", std::string(title)}}}});
  std::vector<std::string> streams;
  for (const auto& e : events) {
    auto found = std::find(streams.begin(), streams.end(), e.stream);
    if (found == streams.end()) {
      streams.push_back(e.stream);
      found = std::prev(streams.end());
      const auto tid = static_cast<int>(streams.size());
      trace.push_back({{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", 1},
                       {"tid", tid},
                       {"args", {{"name", e.stream}}}});
      trace.push_back({{"name", "thread_sort_index"},
                       {"ph", "M"},
                       {"pid", 1},
                       {"tid", tid},
                       {"args", {{"sort_index", tid}}}});
    }
    if (!(e.end_s > e.start_s)) continue;  // nothing to draw
    trace.push_back({{"name", e.name},
                     {"cat", e.stream},
                     {"ph", "X"},
                     {"pid", 1},
                     {"tid", static_cast<int>(found - streams.begin()) + 1},
                     {"ts", e.start_s * kMicroseconds},
                     {"dur", (e.end_s - e.start_s) * kMicroseconds}});
  }
  const nlohmann::json out{{"traceEvents", trace}, {"displayTimeUnit", "ms"}};
  return out.dump(1) + "\n";
}

namespace {

struct Builder3D {
  std::vector<TimelineEvent> events;
  double t = 0;
  void serial(const char* stream, const std::string& name, double length) {
    if (length <= 0) return;
    events.push_back({stream, name, t, t + length});
    t += length;
  }
  // `count` micro-batches' work, one after another.
  void micro_batches(const Time3D& x, const std::string& label, double count) {
    serial("compute", "forward + backward" + label, count * x.compute_s);
    serial("tensor parallel", "all-reduces" + label, count * x.tp_comm_s);
    serial("context parallel", "K/V exchange (exposed)" + label, count * x.cp_comm_s);
    serial("expert parallel", "token dispatch and combine" + label, count * x.ep_comm_s);
    serial("pipeline", "activation sends" + label, count * x.p2p_s);
    serial("data parallel", "gathers and reductions not hidden" + label, count * x.fsdp_comm_s);
  }
  // The data-parallel collectives that run outside the passes, once per step: before the
  // optimizer step (gradients), or after it (updated weights).
  void step_collectives(const Time3D& x, bool after_step) {
    for (const auto& op : x.dp_ops) {
      const bool outside = op.phase == CommPhase::after_backward ||
                           op.phase == CommPhase::before_forward ||
                           op.phase == CommPhase::after_step;
      if (outside && (op.phase == CommPhase::after_step) == after_step)
        serial("data parallel", op.name, op.time_s);
    }
  }
};

}  // namespace

std::vector<TimelineEvent> timeline_3d(const Layout3D& l, const Time3D& x) {
  Builder3D b;
  const std::int64_t m = l.micro_batches;
  const auto one = [&](std::int64_t i) { return m == 1 ? std::string() : " " + std::to_string(i); };
  if (m <= 16) {
    for (std::int64_t i = 1; i <= m; ++i)
      b.micro_batches(x, one(i), 1);
  } else {
    b.micro_batches(x, " 1", 1);
    b.micro_batches(x, " (micro-batches 2-" + std::to_string(m - 1) + ")",
                    static_cast<double>(m - 2));
    b.micro_batches(x, " " + std::to_string(m), 1);
  }
  if (l.pp > 1) {
    b.serial("pipeline", "bubble (" + std::string(name_of(l.pipeline_schedule())) + ")",
             x.bubble_s);
  }
  b.step_collectives(x, false);
  b.serial("host", "host transfers (offload)", x.host_transfer_s);
  b.serial("compute", "optimizer step", x.optimizer_s);
  b.step_collectives(x, true);
  return std::move(b.events);
}

}  // namespace dtplan::cost
