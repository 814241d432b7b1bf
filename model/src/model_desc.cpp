// Loading model descriptions from presets, files and raw parameter counts.
#include "dtplan/model/model_desc.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <system_error>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan {

std::int64_t parse_param_count(std::string_view text) {
  const std::string original(text);
  std::string body(text);
  double scale = 1.0;
  if (!body.empty()) {
    switch (std::tolower(static_cast<unsigned char>(body.back()))) {
      case 'k':
        scale = 1e3;
        break;
      case 'm':
        scale = 1e6;
        break;
      case 'b':
        scale = 1e9;
        break;
      case 't':
        scale = 1e12;
        break;
      default:
        break;
    }
    if (scale != 1.0) body.pop_back();
  }
  const bool plain =
      !body.empty() && body.find_first_not_of("0123456789.eE+-") == std::string::npos;
  const auto value = plain ? parse_number(body) : std::nullopt;
  if (!value) {
    throw Error("{params} '" + original +
                "': not a parameter count (examples: 124439808, 7.5e9, 7.5B, 350M)");
  }
  const double exact = *value * scale;
  const double count = std::round(exact);
  if (std::fabs(exact - count) > 1e-9 * std::max(1.0, exact)) {
    throw Error("{params} '" + original + "': not a whole number of parameters");
  }
  if (count < 1.0) throw Error("{params} '" + original + "': must be a positive count");
  if (count >= 9.2e18) throw Error("{params} '" + original + "': beyond a 64-bit count");
  return static_cast<std::int64_t>(count);
}

ModelDesc model_from_param_count(std::int64_t params, std::string origin) {
  ModelDesc m;
  m.name = format_thousands(params) + " parameters";
  m.origin = std::move(origin);
  m.kind = ModelKind::param_count;
  m.params = params;
  m.components = {{"all", params}};
  return m;
}

ModelDesc model_from_transformer(const TransformerSpec& spec, std::string name,
                                 std::string origin) {
  const auto counts = count_parameters(spec);
  ModelDesc m;
  m.name = std::move(name);
  m.origin = std::move(origin);
  m.kind = ModelKind::transformer;
  m.params = counts.total();
  m.components = counts.components();
  m.transformer = spec;
  return m;
}

namespace {

ModelDesc model_from_layers(LayerListModel layers, std::string origin) {
  ModelDesc m;
  m.name = layers.name;
  m.origin = std::move(origin);
  m.kind = ModelKind::layer_list;
  m.params = layers.params();
  for (const auto& l : layers.layers) {
    if (l.params > 0) m.components.push_back({l.label, l.params});
  }
  m.layers = std::move(layers);
  return m;
}

// Our format: {"schema_version", "name", "reference"?, "description"?, and either
// "hf_config": {...} or "input_shape" + "layers"}.
ModelDesc read_our_model(const ObjectReader& r, const std::string& stem) {
  r.check_schema_version(1);
  const std::string name = r.optional_string("name").value_or(stem);
  const std::string reference = r.optional_string("reference").value_or("");
  r.optional_string("description");
  ModelDesc m;
  if (r.has("hf_config")) {
    m = model_from_transformer(spec_from_hf_config(r.object("hf_config")), name,
                               r.document().origin);
  } else if (r.has("layers")) {
    m = model_from_layers(layer_list_from_json(r, name), r.document().origin);
  } else {
    r.fail_here("a model file needs \"hf_config\" (a transformer) or \"layers\" (a layer list)");
  }
  r.reject_unknown_keys();
  m.reference = reference;
  return m;
}

}  // namespace

ModelDesc load_model_file(const std::filesystem::path& path) {
  const auto doc = read_json_file(path);
  const auto reader = ObjectReader::root(doc);
  const std::string stem = path.stem().string() == "config" && path.has_parent_path()
                               ? path.parent_path().filename().string()
                               : path.stem().string();
  if (reader.has("schema_version")) return read_our_model(reader, stem);
  if (reader.has("model_type")) {
    return model_from_transformer(spec_from_hf_config(reader), stem, doc->origin);
  }
  throw Error(doc->origin +
              ": not a model description: expected \"schema_version\" (a dtplan model file) or "
              "\"model_type\" (a Hugging Face config.json)");
}

std::vector<std::string> list_model_presets(const std::filesystem::path& models_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  if (ec) throw Error(models_dir.string() + ": cannot list model presets: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

ModelDesc load_model(const std::string& name_or_path, const std::filesystem::path& models_dir) {
  std::filesystem::path path(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    path /= "config.json";
    if (!std::filesystem::exists(path, ec)) {
      throw Error(name_or_path + ": a folder without config.json");
    }
    return load_model_file(path);
  }
  if (std::filesystem::is_regular_file(path, ec)) return load_model_file(path);
  const auto preset = models_dir / (to_lower(name_or_path) + ".json");
  if (std::filesystem::is_regular_file(preset, ec)) return load_model_file(preset);
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos || path.extension() == ".json";
  if (looks_like_path) throw Error(name_or_path + ": no such file");
  throw Error(unknown_name_message("model", name_or_path, list_model_presets(models_dir)) +
              " (or give a path to a config.json or a dtplan model file)");
}

std::int64_t sequence_length(const ModelDesc& m, std::int64_t seq_len) {
  if (!m.transformer) {
    if (seq_len > 0) {
      throw Error("{seq_len} " + std::to_string(seq_len) + ": model '" + m.name +
                  "' has no sequence (a layer list or a bare parameter count)");
    }
    return 0;
  }
  return sequence_length(*m.transformer, seq_len);
}

}  // namespace dtplan
