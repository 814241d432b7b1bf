// Fuzz target: dtplan model files (schema_version, hf_config or a layer list), read as
// `--model FILE` reads them.
#include "dtplan/model/model_desc.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  dtplan::load_model_file(dtplan::fuzz::scratch_file(text, "model.json"));
}
