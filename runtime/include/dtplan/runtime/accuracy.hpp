// Accuracy as a library workflow (dtplan accuracy, the GUI): the fixed held-out
// configurations (trial_sets.hpp; none is used by calibration) run through dtplan-run, each
// median step time set against the hardware profile's prediction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dtplan/cost/calibration.hpp"
#include "dtplan/runtime/trials.hpp"

namespace dtplan::runtime {

struct AccuracyRequest {
  std::string backend;  // empty: the profile's
  std::int64_t np = 2;
  std::int64_t steps = 3;  // measured steps per configuration
  std::int64_t limit = 0;  // only the first N configurations; 0: all
  std::string work_dir;    // empty: a fresh temporary directory
  std::string data_dir;
};

struct AccuracyRow {
  std::string config;
  double predicted_s = 0;
  double measured_s = 0;
  double error() const { return (predicted_s - measured_s) / measured_s; }
};

struct AccuracyReport {
  std::string backend;
  std::vector<AccuracyRow> rows;
  double median_abs_error = 0;
  double max_abs_error = 0;
  std::filesystem::path work_dir;
};

// Throws FieldError for a field out of range or a backend the profile was not measured on.
AccuracyReport measure_accuracy(const AccuracyRequest& r, const cost::HardwareProfile& profile,
                                const ProgressFn& progress);

}  // namespace dtplan::runtime
