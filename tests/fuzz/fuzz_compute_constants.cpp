// Fuzz target: the compute-time constants (data/compute.json).
#include "dtplan/cost/compute_time.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  dtplan::cost::load_compute_constants(dtplan::fuzz::scratch_file(text, "compute.json"));
}
