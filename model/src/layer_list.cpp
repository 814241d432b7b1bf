// Layer-list models: one analysis function per layer type in a table (add a type = add a
// row). Each checks its keys, infers the output shape, counts parameters and records what
// PyTorch autograd keeps for backward.
#include "dtplan/model/layer_list.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/suggest.hpp"
#include "dtplan/model/units.hpp"

namespace dtplan {

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (const auto d : shape)
    n = checked_mul(n, d, "tensor element count");
  return n;
}

std::string format_shape(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

std::int64_t LayerListModel::params() const {
  std::int64_t total = 0;
  for (const auto& l : layers)
    total = checked_add(total, l.params, "parameter count");
  return total;
}

const Shape& LayerListModel::output_shape() const {
  return layers.empty() ? input_shape : layers.back().output_shape;
}

namespace {

struct Pair {
  std::int64_t h = 0;
  std::int64_t w = 0;
};

// An int or a two-element list, as PyTorch accepts for kernel_size, stride, padding.
Pair read_pair(const ObjectReader& r, const char* key, std::optional<std::int64_t> fallback,
               std::int64_t minimum) {
  Pair p;
  if (!r.has(key)) {
    if (!fallback) r.value(key);  // throws "missing required key"
    r.optional_integer(key);      // mark as read
    return {*fallback, *fallback};
  }
  const auto& v = r.value(key);
  if (v.is_array()) {
    const auto list = r.integers(key);
    if (list.size() != 2) r.fail(key, "expected an integer or a list of two integers");
    p = {list[0], list[1]};
  } else {
    const auto single = r.integer(key);
    p = {single, single};
  }
  if (p.h < minimum || p.w < minimum) {
    r.fail(key, "must be at least " + std::to_string(minimum));
  }
  return p;
}

void require_rank(const ObjectReader& r, const Shape& in, std::size_t rank, const char* layout) {
  if (in.size() != rank) {
    r.fail_here("expects a " + std::string(layout) + " input, got shape " + format_shape(in));
  }
}

std::int64_t pooled_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                         std::int64_t d, bool ceil_mode) {
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  return (ceil_mode ? ceil_div(span, s) : span / s) + 1;
}

std::string layer_label(const ObjectReader& r, const std::string& fallback) {
  return r.optional_string("name").value_or(fallback);
}

LayerInfo conv2d(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto cin = r.positive_integer("in_channels");
  const auto cout = r.positive_integer("out_channels");
  const auto k = read_pair(r, "kernel_size", std::nullopt, 1);
  const auto s = read_pair(r, "stride", 1, 1);
  const auto p = read_pair(r, "padding", 0, 0);
  const auto d = read_pair(r, "dilation", 1, 1);
  const auto groups = r.optional_integer("groups").value_or(1);
  const bool bias = r.optional_boolean("bias").value_or(true);
  if (groups <= 0 || cin % groups != 0 || cout % groups != 0) {
    r.fail("groups", "must be positive and divide in_channels and out_channels");
  }
  require_rank(r, in, 3, "[channels, height, width]");
  if (in[0] != cin) {
    r.fail("in_channels", std::to_string(cin) + " does not match the input's " +
                              std::to_string(in[0]) + " channels (input " + format_shape(in) + ")");
  }
  const auto ho = pooled_size(in[1], k.h, s.h, p.h, d.h, false);
  const auto wo = pooled_size(in[2], k.w, s.w, p.w, d.w, false);
  if (ho < 1 || wo < 1)
    r.fail("kernel_size", "is larger than the padded input " + format_shape(in));
  l.output_shape = {cout, ho, wo};
  l.params = checked_mul(cout, cin / groups * k.h * k.w, "parameter count") + (bias ? cout : 0);
  l.gemm_k = cin / groups * k.h * k.w;
  l.saves_input = true;
  std::ostringstream label;
  label << "Conv2d " << cin << "->" << cout << " k" << k.h << "x" << k.w << " s" << s.h << " p"
        << p.h;
  l.label = layer_label(r, label.str());
  return l;
}

LayerInfo batchnorm2d(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto c = r.positive_integer("num_features");
  const bool affine = r.optional_boolean("affine").value_or(true);
  const bool track = r.optional_boolean("track_running_stats").value_or(true);
  r.optional_number("eps");
  r.optional_number("momentum");
  require_rank(r, in, 3, "[channels, height, width]");
  if (in[0] != c) {
    r.fail("num_features", std::to_string(c) + " does not match the input's " +
                               std::to_string(in[0]) + " channels");
  }
  l.output_shape = in;
  l.params = affine ? 2 * c : 0;
  l.buffer_elements = track ? 2 * c + 1 : 0;  // running mean, var, num_batches_tracked
  l.saves_input = true;
  l.label = layer_label(r, "BatchNorm2d " + std::to_string(c));
  return l;
}

LayerInfo layernorm(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  Shape normalized;
  if (r.value("normalized_shape").is_array()) {
    normalized = r.integers("normalized_shape");
  } else {
    normalized = {r.positive_integer("normalized_shape")};
  }
  const bool affine = r.optional_boolean("elementwise_affine").value_or(true);
  const bool bias = r.optional_boolean("bias").value_or(true);
  r.optional_number("eps");
  const bool fits = normalized.size() <= in.size() &&
                    std::equal(normalized.rbegin(), normalized.rend(), in.rbegin());
  if (normalized.empty() || !fits) {
    r.fail("normalized_shape", format_shape(normalized) + " does not match the trailing " +
                                   "dimensions of the input " + format_shape(in));
  }
  const auto n = element_count(normalized);
  l.output_shape = in;
  l.params = (affine ? n : 0) + (affine && bias ? n : 0);
  l.saves_input = true;
  l.extra_saved_bytes_per_sample = 8 * (element_count(in) / n);  // fp32 mean and rstd: 2 x 4 B
  l.label = layer_label(r, "LayerNorm " + format_shape(normalized));
  return l;
}

LayerInfo linear(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto fin = r.positive_integer("in_features");
  const auto fout = r.positive_integer("out_features");
  const bool bias = r.optional_boolean("bias").value_or(true);
  if (in.empty() || in.back() != fin) {
    r.fail("in_features", std::to_string(fin) + " does not match the input's last dimension (" +
                              format_shape(in) + ")");
  }
  l.output_shape = in;
  l.output_shape.back() = fout;
  l.params = checked_mul(fin, fout, "parameter count") + (bias ? fout : 0);
  l.gemm_k = fin;
  l.saves_input = true;
  l.label = layer_label(r, "Linear " + std::to_string(fin) + "->" + std::to_string(fout));
  return l;
}

LayerInfo embedding(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto n = r.positive_integer("num_embeddings");
  const auto d = r.positive_integer("embedding_dim");
  r.optional_integer("padding_idx");
  l.output_shape = in;
  l.output_shape.push_back(d);
  l.params = checked_mul(n, d, "parameter count");
  l.saves_input = true;  // the int64 indices
  l.label = layer_label(r, "Embedding " + std::to_string(n) + "x" + std::to_string(d));
  return l;
}

LayerInfo relu(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  l.output_shape = in;
  l.saves_output = true;
  l.output_aliases_input = r.optional_boolean("inplace").value_or(false);
  l.label = layer_label(r, "ReLU");
  return l;
}

LayerInfo gelu(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto approximate = r.optional_string("approximate").value_or("none");
  if (approximate != "none" && approximate != "tanh") {
    r.fail("approximate", "must be \"none\" or \"tanh\"");
  }
  l.output_shape = in;
  l.saves_input = true;
  l.label = layer_label(r, "GELU");
  return l;
}

LayerInfo maxpool2d(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto k = read_pair(r, "kernel_size", std::nullopt, 1);
  const auto s = r.has("stride") ? read_pair(r, "stride", std::nullopt, 1) : k;
  if (!r.has("stride")) r.optional_integer("stride");
  const auto p = read_pair(r, "padding", 0, 0);
  const auto d = read_pair(r, "dilation", 1, 1);
  const bool ceil_mode = r.optional_boolean("ceil_mode").value_or(false);
  r.optional_boolean("return_indices");
  require_rank(r, in, 3, "[channels, height, width]");
  if (2 * p.h > k.h || 2 * p.w > k.w) r.fail("padding", "must be at most half the kernel size");
  const auto ho = pooled_size(in[1], k.h, s.h, p.h, d.h, ceil_mode);
  const auto wo = pooled_size(in[2], k.w, s.w, p.w, d.w, ceil_mode);
  if (ho < 1 || wo < 1) r.fail("kernel_size", "is larger than the input " + format_shape(in));
  l.output_shape = {in[0], ho, wo};
  l.saves_input = true;
  l.extra_saved_bytes_per_sample = 8 * element_count(l.output_shape);  // int64 argmax indices
  l.label = layer_label(r, "MaxPool2d k" + std::to_string(k.h) + " s" + std::to_string(s.h));
  return l;
}

LayerInfo flatten(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const auto rank = static_cast<std::int64_t>(in.size()) + 1;  // with the batch dimension
  auto start = r.optional_integer("start_dim").value_or(1);
  auto end = r.optional_integer("end_dim").value_or(-1);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  if (start < 1 || end >= rank || start > end) {
    r.fail_here("start_dim/end_dim must select non-batch dimensions of an input of rank " +
                std::to_string(rank) + " (batch included)");
  }
  Shape out(in.begin(), in.begin() + (start - 1));
  std::int64_t merged = 1;
  for (auto i = start; i <= end; ++i)
    merged *= in[static_cast<std::size_t>(i - 1)];
  out.push_back(merged);
  out.insert(out.end(), in.begin() + end, in.end());
  l.output_shape = out;
  l.output_aliases_input = true;  // a view
  l.label = layer_label(r, "Flatten");
  return l;
}

LayerInfo dropout(const ObjectReader& r, const Shape& in) {
  LayerInfo l;
  const double p = r.optional_number("p").value_or(0.5);
  if (p < 0.0 || p >= 1.0) r.fail("p", "must be in [0, 1)");
  r.optional_boolean("inplace");
  l.output_shape = in;
  if (p > 0.0) l.extra_saved_bytes_per_sample = element_count(in);  // bool mask, 1 byte
  l.label = layer_label(r, "Dropout p=" + std::to_string(p).substr(0, 4));
  return l;
}

struct LayerType {
  const char* name;
  LayerInfo (*analyse)(const ObjectReader&, const Shape&);
};

constexpr LayerType kLayerTypes[] = {
    {"Linear", linear},       {"Conv2d", conv2d},       {"BatchNorm2d", batchnorm2d},
    {"LayerNorm", layernorm}, {"Embedding", embedding}, {"ReLU", relu},
    {"GELU", gelu},           {"MaxPool2d", maxpool2d}, {"Flatten", flatten},
    {"Dropout", dropout},
};

LayerInfo analyse_layer(const ObjectReader& r, const Shape& in, std::size_t index) {
  const std::string type = r.string("type");
  for (const auto& t : kLayerTypes) {
    if (type != t.name) continue;
    if (type == std::string("Embedding") && index != 0) {
      r.fail("type", "Embedding must be the first layer (it reads integer indices)");
    }
    LayerInfo l = t.analyse(r, in);
    r.reject_unknown_keys();
    l.type = type;
    l.input_shape = in;
    element_count(l.output_shape);  // overflow check
    return l;
  }
  r.fail("type", unknown_name_message("layer type", type, supported_layer_types()));
}

}  // namespace

std::vector<std::string> supported_layer_types() {
  std::vector<std::string> names;
  for (const auto& t : kLayerTypes)
    names.emplace_back(t.name);
  return names;
}

LayerListModel layer_list_from_json(const ObjectReader& reader, const std::string& name) {
  LayerListModel m;
  m.name = name;
  m.input_shape = reader.integers("input_shape");
  for (const auto d : m.input_shape) {
    if (d <= 0) reader.fail("input_shape", "dimensions must be positive");
  }
  if (m.input_shape.empty()) reader.fail("input_shape", "must have at least one dimension");
  Shape current = m.input_shape;
  const auto layers = reader.objects("layers");
  if (layers.empty()) reader.fail("layers", "must list at least one layer");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    m.layers.push_back(analyse_layer(layers[i], current, i));
    current = m.layers.back().output_shape;
  }
  m.integer_input = m.layers.front().type == "Embedding";
  return m;
}

}  // namespace dtplan
