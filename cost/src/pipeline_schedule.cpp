// The pipeline schedule table (see pipeline_schedule.hpp for the formulas and sources).
#include "dtplan/cost/pipeline_schedule.hpp"

#include <algorithm>
#include <string>

#include "dtplan/model/error.hpp"

namespace dtplan::cost {

namespace {

struct Row {
  PipelineSchedule schedule;
  std::string_view name;
};

constexpr Row kRows[] = {{PipelineSchedule::gpipe, "gpipe"},
                         {PipelineSchedule::one_f_one_b, "1f1b"},
                         {PipelineSchedule::interleaved, "interleaved"},
                         {PipelineSchedule::zb_h1, "zb-h1"},
                         {PipelineSchedule::zb_h2, "zb-h2"},
                         {PipelineSchedule::zbv, "zbv"}};

}  // namespace

std::string_view name_of(PipelineSchedule s) {
  for (const auto& r : kRows) {
    if (r.schedule == s) return r.name;
  }
  return "?";
}

PipelineSchedule parse_schedule(std::string_view text) {
  std::string known;
  for (const auto& r : kRows) {
    if (r.name == text) return r.schedule;
    known += (known.empty() ? "" : ", ") + std::string(r.name);
  }
  throw Error("pipeline schedule '" + std::string(text) + "' is not known (known: " + known + ")");
}

const std::vector<PipelineSchedule>& all_schedules() {
  static const std::vector<PipelineSchedule> all = [] {
    std::vector<PipelineSchedule> v;
    for (const auto& r : kRows)
      v.push_back(r.schedule);
    return v;
  }();
  return all;
}

PipelineSchedule default_schedule(std::int64_t interleave) {
  return interleave > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
}

std::optional<std::string> schedule_problem(PipelineSchedule s, std::int64_t p, std::int64_t v,
                                            std::int64_t m) {
  if (p < 1 || v < 1 || m < 1) return "sizes must be positive";
  switch (s) {
    case PipelineSchedule::gpipe:
    case PipelineSchedule::one_f_one_b:
      if (v != 1) return "one model chunk per GPU (interleaved takes more)";
      break;
    case PipelineSchedule::interleaved:
      if (v < 2 || p < 2) return "needs pp > 1 and more than one chunk per GPU";
      if (m % p != 0) return "micro-batches must be a multiple of pp";
      break;
    case PipelineSchedule::zb_h1:
      if (v != 1) return "one model chunk per GPU";
      if (m < p) return "needs at least pp micro-batches";
      break;
    case PipelineSchedule::zb_h2:
      if (v != 1) return "one model chunk per GPU";
      if (m < 2 * p - 1) return "needs at least 2 pp - 1 micro-batches";
      break;
    case PipelineSchedule::zbv:
      if (v != 2) return "exactly two model chunks per GPU (the V shape)";
      if (m < p) return "needs at least pp micro-batches";
      break;
  }
  return std::nullopt;
}

void check_schedule(PipelineSchedule s, std::int64_t p, std::int64_t v, std::int64_t m) {
  if (const auto why = schedule_problem(s, p, v, m)) {
    throw Error("schedule " + std::string(name_of(s)) + " with pp " + std::to_string(p) + ", " +
                std::to_string(v) + " chunk(s) per GPU and " + std::to_string(m) +
                " micro-batches: " + *why);
  }
}

ScheduleCost schedule_cost(PipelineSchedule s, std::int64_t p, std::int64_t v, std::int64_t m,
                           const StageTimes& t) {
  check_schedule(s, p, v, m);
  const double pd = static_cast<double>(p), vd = static_cast<double>(v);
  const double md = static_cast<double>(m);
  const double f = t.forward_s, b = t.backward_input_s, w = t.backward_weight_s;
  ScheduleCost c;
  switch (s) {
    case PipelineSchedule::gpipe:
      c.bubble_s = (pd - 1) * (f + b + w);
      c.in_flight = md;
      break;
    case PipelineSchedule::one_f_one_b:
      c.bubble_s = (pd - 1) * (f + b + w);
      c.in_flight = std::min(pd, md);
      break;
    case PipelineSchedule::interleaved:
      c.bubble_s = (pd - 1) * (f + b + w) / vd;
      c.in_flight = std::min(pd + (pd - 1) / vd, md);
      c.p2p_factor = vd;
      break;
    case PipelineSchedule::zb_h1:
      c.bubble_s = (pd - 1) * std::max(0.0, f + b - w);
      c.in_flight = std::min(pd, md);
      break;
    case PipelineSchedule::zb_h2:
      c.bubble_s = (pd - 1) * std::max(0.0, f + b - 2 * w);
      c.in_flight = std::min(2 * pd - 1, md);
      break;
    case PipelineSchedule::zbv:
      c.bubble_s = (pd - 1) * std::max(0.0, f + b - 2 * w) / vd;
      c.in_flight = std::min(pd, md);
      c.p2p_factor = 2;
      break;
  }
  return c;
}

double stage_in_flight(PipelineSchedule s, std::int64_t p, std::int64_t v, std::int64_t m,
                       std::int64_t i) {
  check_schedule(s, p, v, m);
  if (i < 0 || i >= p) {
    throw Error("stage " + std::to_string(i) + " of a " + std::to_string(p) + "-stage pipeline");
  }
  const double pd = static_cast<double>(p), vd = static_cast<double>(v);
  const double md = static_cast<double>(m), rest = static_cast<double>(p - i);
  switch (s) {
    case PipelineSchedule::gpipe:
      return md;
    case PipelineSchedule::one_f_one_b:
    case PipelineSchedule::zb_h1:
      return std::min(rest, md);
    case PipelineSchedule::zb_h2:
      return std::min(2 * rest - 1, md);
    case PipelineSchedule::interleaved:
      return std::min(pd + (pd - 1 - 2 * static_cast<double>(i)) / vd, md);
    case PipelineSchedule::zbv:
      return std::min(pd, md);
  }
  return md;
}

}  // namespace dtplan::cost
