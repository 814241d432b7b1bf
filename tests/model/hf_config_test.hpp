// Helpers of the config.json tests: a spec from a JSON text, or the error it raises.
#pragma once

#include <string>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/transformer.hpp"

namespace dtplan::test {

inline TransformerSpec from_config(const std::string& json) {
  return spec_from_hf_config(ObjectReader::root(parse_json(json, "config.json")));
}

// The error's text, or "<no error>".
inline std::string error_of(const std::string& json) {
  try {
    from_config(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace dtplan::test
