// Fuzz target: measurement files that dtplan-run writes and validate/calibrate read.
#include "dtplan/runtime/measurement.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  dtplan::runtime::measurement_from_json(dtplan::fuzz::scratch_file(text, "measurement.json"));
}
