// dtplan's predictions against the measured runs of data/published (published.hpp): each row's
// configuration run through the cost model with the bundled constants, the prediction put in
// the row's own metric, and the error summarised by family and by source.
//
// Error, signed so that a positive error means dtplan is optimistic (faster) or, for memory,
// predicts more than was measured:
//   throughput-like metrics (tokens/s, TFLOP/s, MFU, bus bandwidth), memory:
//       error = predicted / measured - 1
//   times (step_s, time_us):  error = measured / predicted - 1
// A TFLOP/s figure is turned into the step time it implies with the source's own FLOP count
// (FlopsConvention): dtplan's model FLOPs, or Narayanan et al. 2021's eq. (3).
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtplan/model/transformer.hpp"
#include "dtplan/planner/published.hpp"

namespace dtplan::planner {

enum class RowStatus { predicted, not_expressible, failed };

struct RowPrediction {
  std::size_t row = 0;  // index into PublishedSet::rows
  RowStatus status = RowStatus::predicted;
  std::string reason;    // not_expressible: what it needs; failed: why dtplan refused it
  double predicted = 0;  // in the row's metric and unit
  double error = 0;      // signed, as above
  // Step rows: where the predicted step goes, seconds per step by part (compute by kernel
  // kind, communication not hidden, pipeline bubble, optimizer, host copies), largest first.
  std::vector<std::pair<std::string, double>> breakdown;
  std::string group;  // step rows: band_group of the row's framework and GPU
  // The workloads of 2026 the row is one of ("moe", "fp8"): a model with experts (or a row
  // that needs them), FP8 numerics; reported as families of their own as well.
  std::vector<std::string> workloads;
};

// How far predictions of one kind of run have been from measurement: the held-out step rows
// of a framework on a GPU generation ("megatron on hopper").
struct ErrorBand {
  std::string group;
  std::int64_t rows = 0;
  double median_abs_error = 0, mean_abs_error = 0, bias = 0;
};

// "data-parallel", "megatron" or "fsdp2" (a strategy or framework name), then "on" and the
// GPU's architecture: "data-parallel on ampere".
std::string band_group(std::string_view strategy, std::string_view architecture);

// |error| and signed error over the predicted rows of a group.
struct ErrorSummary {
  std::string name;  // the family, or the source id
  std::int64_t predicted = 0, not_expressible = 0, failed = 0;
  double mean_abs_error = 0, median_abs_error = 0, bias = 0, max_abs_error = 0;
  bool fitted_on = false;  // a source whose rows fitted a constant
};

// Two step rows of one job (the same source, model, GPU, GPU count, global batch, sequence and
// metric) run in different configurations: does dtplan order them as they were measured? A
// planner whose ranking is wrong picks the slower configuration.
struct RankedPair {
  std::size_t faster = 0, slower = 0;  // as measured; indices into PublishedAccuracy::rows
  double measured_gap = 0;             // the faster's measured speed over the slower's, - 1
  double predicted_gap = 0;            // the same of their predictions; < 0: ordered the other way
};

struct RankingSummary {
  // agree: dtplan predicts the measured faster one faster; tied: it predicts both the same
  // (to a part in a million), so a planner would pick either; the rest it orders the other way.
  std::int64_t pairs = 0, agree = 0, tied = 0;
  // Pairs measured at least kClearRankingGap apart, where a run's own variation cannot
  // have decided the order.
  std::int64_t clear_pairs = 0, clear_agree = 0;
  std::vector<RankedPair> disagreements;  // every pair ordered the other way, widest first
  std::vector<RankedPair> ties;           // every tied pair, widest first
};

inline constexpr double kClearRankingGap = 0.05;

struct PublishedAccuracy {
  std::vector<RowPrediction> rows;
  // step, comm, memory (those with rows), over the held-out sources: those no constant was
  // fitted on. A family's error mixes its metrics (each error is relative).
  std::vector<ErrorSummary> by_family;
  std::vector<ErrorSummary> by_source;  // every source, in file order, fitted or not
  // Held out, by family and workload: "step: moe", "step: fp8" (those with rows).
  std::vector<ErrorSummary> by_workload;
  // Step rows by band_group, held out, groups of at least kMinBandRows rows.
  std::vector<ErrorBand> bands;
  // Held-out step rows paired within their jobs.
  RankingSummary ranking;
};

inline constexpr std::int64_t kMinBandRows = 3;
// Fewer rows than this and a front end says the band is a weak guide.
inline constexpr std::int64_t kFewBandRows = 10;

// data/error_bands.json: the bands a front end shows beside a prediction, written by
// `dtplan accuracy --published --write-bands`.
nlohmann::json bands_json(const std::vector<ErrorBand>& bands);
std::vector<ErrorBand> load_error_bands(const std::filesystem::path& path);
// The band of `group`, or nullptr.
const ErrorBand* find_band(const std::vector<ErrorBand>& bands, std::string_view group);

struct PublishedRequest {
  std::filesystem::path data_dir;  // GPUs, topologies, presets, constants
  std::optional<Family> family;    // none: every family
  std::string source;              // empty: every source; else one source id
  // Called after each row: (rows done, rows in all).
  std::function<void(std::int64_t, std::int64_t)> progress;
};

PublishedAccuracy published_accuracy(const PublishedSet& set, const PublishedRequest& r);

// The pairs of `a.rows` (held-out, predicted step rows) that are one job in two different
// configurations; rows whose configurations are equal are repeats, not comparisons.
RankingSummary ranking_of(const PublishedSet& set, const std::vector<RowPrediction>& rows);

// Narayanan et al. 2021, eq. (3): FLOPs of one iteration of a GPT model with full activation
// recomputation, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
double narayanan_flops(const TransformerSpec& m, std::int64_t global_batch, std::int64_t seq_len);

}  // namespace dtplan::planner
