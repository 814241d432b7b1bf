// Fuzz target: Hugging Face config.json objects, and the parameter count derived from them.
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/transformer.hpp"
#include "fuzz_support.hpp"

DTPLAN_FUZZ_TARGET(text) {
  const auto config = dtplan::ObjectReader::root(dtplan::parse_json(std::string(text), "<fuzz>"));
  dtplan::model_from_transformer(dtplan::spec_from_hf_config(config), "fuzz", "<fuzz>");
}
