// What is trained: a transformer, a layer list, or just a parameter count. Loaded from a
// preset name (data/models/NAME.json), a file of ours, a Hugging Face config.json (or the
// folder holding it), or a count such as "7.5B".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dtplan/model/layer_list.hpp"
#include "dtplan/model/transformer.hpp"

namespace dtplan {

enum class ModelKind { transformer, layer_list, param_count };

struct ModelDesc {
  std::string name;       // preset name, file stem, or "7.5B parameters"
  std::string origin;     // the file read, or "--params"
  std::string reference;  // where a preset's figures come from (URL), if known
  ModelKind kind = ModelKind::param_count;
  std::int64_t params = 0;
  std::vector<ParamComponent> components;
  std::optional<TransformerSpec> transformer;
  std::optional<LayerListModel> layers;
};

// "7.5e9", "7.5B", "350M", "124439808", "1.2T", "500k". Throws on anything else, on zero or
// negative counts, and on counts beyond 2^63.
std::int64_t parse_param_count(std::string_view text);

ModelDesc model_from_param_count(std::int64_t params, std::string origin);
ModelDesc model_from_transformer(const TransformerSpec& spec, std::string name, std::string origin);

// Resolves `name_or_path`: an existing file or folder is read; otherwise a preset of that name
// in `models_dir`. Unknown names list the close preset names.
ModelDesc load_model(const std::string& name_or_path, const std::filesystem::path& models_dir);
// Reads one file: our model JSON (with "schema_version") or a Hugging Face config.json.
ModelDesc load_model_file(const std::filesystem::path& path);

std::vector<std::string> list_model_presets(const std::filesystem::path& models_dir);

// The tokens per sample a run of `m` uses: `seq_len`, or the model's maximum when 0. Throws
// when a transformer with learned positions has fewer, or when a sequence length is given
// for a model without one (layer lists, bare counts).
std::int64_t sequence_length(const ModelDesc& m, std::int64_t seq_len);

}  // namespace dtplan
