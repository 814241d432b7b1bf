// Measured runs from public sources (data/published/*.json, format in its README.md): each
// source's citation and the runs it measured, each as a dtplan configuration (the flags of
// `dtplan estimate`, `dtplan memory` or `dtplan comm` without their dashes), the measured
// figure, and whether dtplan can write it down today. Parsed strictly: an unknown key, a
// metric that is not one of the known ones or a family/metric mismatch is an error naming the
// file, line and key.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dtplan::planner {

enum class Family { step, comm, memory };
std::string_view name_of(Family f);
Family parse_family(std::string_view text);

// How the source counts the FLOPs behind a TFLOP/s figure:
//   model          the model's FLOPs (forward + backward, no recomputation), as dtplan's MFU
//   narayanan2021  Narayanan et al. 2021, eq. (3): 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per
//                  iteration, which counts full activation recomputation
//   megatron_causal  the model's FLOPs with causal attention's scores and their product with
//                  V counted for half the key positions: Megatron-LM's
//                  num_floating_point_operations since 2025-03 (commit 8873b55d6a, "only half
//                  of the attention matrix is non-zero"); earlier releases count all, as model
enum class FlopsConvention { model, narayanan2021, megatron_causal };

struct PublishedSource {
  std::string file;  // the JSON file it was read from
  std::string id, title, authors, url, kind;
  std::int64_t year = 0;
  bool fitted_on = false;  // a constant was fitted on its rows
  FlopsConvention flops = FlopsConvention::model;
  // Models the rows name that are not presets: Hugging Face configs, kept as JSON with the
  // document they came from (for error locations).
  std::map<std::string, nlohmann::json> models;
};

struct PublishedRow {
  std::size_t source = 0;           // index into PublishedSet::sources
  std::string id, where, location;  // location: "file:line: /rows/3" for messages
  Family family = Family::step;
  std::string gpu;
  std::int64_t gpus = 0;
  nlohmann::json config;  // flag name (no dashes) -> value
  std::string metric, unit;
  double measured = 0;
  bool expressible = true;
  std::vector<std::string> needs;
  std::string notes;
};

struct PublishedSet {
  std::vector<PublishedSource> sources;
  std::vector<PublishedRow> rows;
};

// Every *.json file of `dir`, in name order. Throws dtplan::Error naming the file, line and key.
PublishedSet load_published(const std::filesystem::path& dir);

// Whether a larger value of `metric` means faster (throughput, TFLOP/s, MFU, bandwidth) or
// more memory; false for times (step_s, time_us).
bool larger_is_more(std::string_view metric);

}  // namespace dtplan::planner
