// Pipeline schedules as rows of one table: the idle time (bubble) of a step, the activations
// the first stage holds at its peak, and the point-to-point traffic, as functions of the
// stages p, the model chunks per GPU v and the micro-batches m per step.
//
// A stage's work on one micro-batch is F (forward), B (backward to the inputs: activation
// gradients, the tensor-parallel collectives of backward and any recomputation) and W
// (backward to the weights). Times below are of a whole stage (all its chunks).
//
//   schedule     bubble per step                 in flight (first stage)  p2p   needs
//   gpipe        (p-1)(F+B+W)                    m                        1     v = 1
//   1f1b         (p-1)(F+B+W)                    min(p, m)                1     v = 1
//   interleaved  (p-1)(F+B+W)/v                  min(p + (p-1)/v, m)      v     v > 1, p | m
//   zb-h1        (p-1)(F+B-W)                    min(p, m)                1     v = 1, m >= p
//   zb-h2        (p-1) max(0, F+B-2W)            min(2p-1, m)             1     v = 1, m >= 2p-1
//   zbv          (p-1) max(0, F+B-2W) / 2        min(p, m)                2     v = 2, m >= p
//
// Sources: GPipe, Huang et al. 2019 (all forwards, then all backwards: every micro-batch's
// activations live at once); 1F1B (PipeDream-Flush) and interleaved 1F1B, Narayanan et al.
// 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
// sections 2.2.1-2.2.2 (bubble (p-1)/m, and (p-1)/(v m) with v chunks, at v times the
// point-to-point traffic); the interleaved first stage's activations, Korthikanti et al.
// 2022, section 4.2.3 (p (1 + (p-1)/(p v)) micro-batches of L/p layers); ZB-H1 and ZB-H2,
// Qi et al. 2024, "Zero Bubble Pipeline Parallelism" (ICLR), Table 2: bubbles (p-1)(T_F +
// T_B - T_W) and (p-1)(T_F + T_B - 2 T_W), peak memory p and 2p-1 micro-batches; ZBV, the
// same authors' V-shaped schedule (sail-sg/zero-bubble-pipeline-parallelism README: bubble
// 0, 1x the activation memory and 2x the pipeline traffic of 1F1B when T_F = T_B = T_W, two
// chunks per GPU). For ZBV with unequal times we take ZB-H2's expression over chunks of half
// a stage: an assumption, exact in the published equal-time case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtplan::cost {

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, zbv };

std::string_view name_of(PipelineSchedule s);
// "1f1b", "interleaved", "gpipe", "zb-h1", "zb-h2", "zbv"; throws naming the known ones.
PipelineSchedule parse_schedule(std::string_view text);
// All schedules, in the table's order.
const std::vector<PipelineSchedule>& all_schedules();
// What Megatron-LM itself runs: 1F1B, or interleaved 1F1B when v > 1.
PipelineSchedule default_schedule(std::int64_t interleave);

// One micro-batch through one whole stage (all its chunks), seconds.
struct StageTimes {
  double forward_s = 0;          // F
  double backward_input_s = 0;   // B
  double backward_weight_s = 0;  // W
};

struct ScheduleCost {
  double bubble_s = 0;    // idle time of a stage per step
  double in_flight = 0;   // micro-batches of a whole stage's activations the first stage holds
  double p2p_factor = 1;  // point-to-point sends per micro-batch, relative to 1F1B
};

// The rule a (schedule, p, v, m) breaks (the "needs" column above), or nullopt.
std::optional<std::string> schedule_problem(PipelineSchedule s, std::int64_t p, std::int64_t v,
                                            std::int64_t m);
// Throws the problem, naming the schedule and the sizes.
void check_schedule(PipelineSchedule s, std::int64_t p, std::int64_t v, std::int64_t m);

ScheduleCost schedule_cost(PipelineSchedule s, std::int64_t p, std::int64_t v, std::int64_t m,
                           const StageTimes& t);

// Micro-batches of a whole stage's activations stage `i` (0: the first) holds at its peak:
// the warm-up forwards it runs before its first backward, plus the one in progress, capped at
// m. 1F1B and ZB-H1: p - i; ZB-H2: 2(p - i) - 1; GPipe: m; interleaved: Megatron-LM's
// warm-up of 2(p - i - 1) + (v - 1)p chunk micro-batches, plus one, over v chunks:
// p + (p - 1 - 2i)/v (i = 0 is Korthikanti et al.'s p (1 + (p - 1)/(p v))); ZBV: p on every
// stage (the V shape balances memory across stages, Qi et al. 2024).
double stage_in_flight(PipelineSchedule s, std::int64_t p, std::int64_t v, std::int64_t m,
                       std::int64_t i);

}  // namespace dtplan::cost
