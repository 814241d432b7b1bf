// Fuzz target: hardware profiles (--profile, dtplan calibrate output).
#include "dtplan/cost/hardware_profile.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  dtplan::cost::load_profile(dtplan::fuzz::scratch_file(text, "profile.json"));
}
