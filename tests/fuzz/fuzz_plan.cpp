// Fuzz target: plan files (--save-plan output, dtplan-run --plan input).
#include "dtplan/model/plan.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  dtplan::plan_from_json(dtplan::fuzz::scratch_file(text, "plan.json"));
}
