// Fuzz target: the framework-overhead constants (data/overheads.json).
#include "dtplan/cost/overheads.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  dtplan::cost::load_overheads(dtplan::fuzz::scratch_file(text, "overheads.json"));
}
