// Tests for model/src/layer_list.cpp: shapes and parameter counts derived by hand with the
// PyTorch layer formulas.
#include <catch2/catch.hpp>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/layer_list.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
LayerListModel parse(const std::string& json) {
  return layer_list_from_json(ObjectReader::root(parse_json(json, "layers.json")), "test");
}
std::string error_of(const std::string& json) {
  try {
    parse(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("Conv2d output size and parameters") {
  // out = floor((28 + 2*2 - 1*(5-1) - 1) / 1) + 1 = 28; params 16*1*5*5 + 16 = 416
  const auto m = parse(R"({"input_shape": [1, 28, 28], "layers": [
      {"type": "Conv2d", "in_channels": 1, "out_channels": 16, "kernel_size": 5, "padding": 2}]})");
  CHECK(m.layers[0].output_shape == Shape{16, 28, 28});
  CHECK(m.layers[0].params == 416);
  // stride 2, no padding, rectangular kernel: (32 - 3)/2 + 1 = 15, (32 - 5)/2 + 1 = 14
  const auto r = parse(R"({"input_shape": [3, 32, 32], "layers": [
      {"type": "Conv2d", "in_channels": 3, "out_channels": 8, "kernel_size": [3, 5],
       "stride": 2, "bias": false}]})");
  CHECK(r.layers[0].output_shape == Shape{8, 15, 14});
  CHECK(r.layers[0].params == 8 * 3 * 3 * 5);
}

TEST_CASE("grouped convolution divides the weight") {
  const auto m = parse(R"({"input_shape": [32, 8, 8], "layers": [
      {"type": "Conv2d", "in_channels": 32, "out_channels": 32, "kernel_size": 3,
       "padding": 1, "groups": 32}]})");
  CHECK(m.layers[0].params == 32 * 1 * 9 + 32);  // depthwise
}

TEST_CASE("MaxPool2d defaults stride to the kernel size, Flatten merges non-batch dims") {
  const auto m = parse(R"({"input_shape": [16, 28, 28], "layers": [
      {"type": "MaxPool2d", "kernel_size": 2}, {"type": "Flatten"},
      {"type": "Linear", "in_features": 3136, "out_features": 10}]})");
  CHECK(m.layers[0].output_shape == Shape{16, 14, 14});
  CHECK(m.layers[1].output_shape == Shape{3136});
  CHECK(m.layers[1].output_aliases_input);
  CHECK(m.layers[2].params == 3136 * 10 + 10);
}

TEST_CASE("norms, embeddings and activations") {
  const auto m = parse(R"({"input_shape": [128], "layers": [
      {"type": "Embedding", "num_embeddings": 1000, "embedding_dim": 64},
      {"type": "LayerNorm", "normalized_shape": 64},
      {"type": "Dropout", "p": 0.1},
      {"type": "Linear", "in_features": 64, "out_features": 256},
      {"type": "GELU"},
      {"type": "Linear", "in_features": 256, "out_features": 64, "bias": false}]})");
  CHECK(m.integer_input);
  CHECK(m.layers[0].output_shape == Shape{128, 64});
  CHECK(m.layers[0].params == 64'000);
  CHECK(m.layers[1].params == 128);                             // weight + bias
  CHECK(m.layers[1].extra_saved_bytes_per_sample == 128 * 8);   // fp32 mean + rstd per row
  CHECK(m.layers[2].extra_saved_bytes_per_sample == 128 * 64);  // 1-byte mask
  CHECK(m.layers[3].output_shape == Shape{128, 256});
  CHECK(m.params() == 64'000 + 128 + (64 * 256 + 256) + 256 * 64);
}

TEST_CASE("BatchNorm2d: 2C parameters, 2C+1 buffers") {
  const auto m = parse(R"({"input_shape": [16, 4, 4], "layers": [
      {"type": "BatchNorm2d", "num_features": 16}]})");
  CHECK(m.layers[0].params == 32);
  CHECK(m.layers[0].buffer_elements == 33);
}

TEST_CASE("layer-list errors name the layer, key and line") {
  CHECK_THAT(error_of(R"({"input_shape": [1, 28, 28], "layers": [
      {"type": "Conv2d", "in_channels": 3, "out_channels": 16, "kernel_size": 5}]})"),
             Contains("layers.json:2: /layers/0/in_channels") &&
                 Contains("does not match the input's 1 channels"));
  CHECK_THAT(error_of(R"({"input_shape": [1, 28, 28], "layers": [
      {"type": "Conv2d", "in_channels": 1, "out_channels": 0, "kernel_size": 5}]})"),
             Contains("/layers/0/out_channels: must be a positive integer, got 0"));
  CHECK_THAT(error_of(R"({"input_shape": [1, 28, 28], "layers": [
      {"type": "Conv2d", "in_channels": 1, "out_channels": 4, "kernal_size": 5}]})"),
             Contains("/layers/0/kernel_size: missing required key (found 'kernal_size'"));
  CHECK_THAT(error_of(R"({"input_shape": [1, 28, 28], "layers": [
      {"type": "ReLU", "inplace": false, "slope": 0.1}]})"),
             Contains("/layers/0/slope: unknown key"));
  CHECK_THAT(error_of(R"({"input_shape": [1, 28, 28], "layers": [{"type": "Conv3d"}]})"),
             Contains("unknown layer type 'Conv3d'") && Contains("did you mean: Conv2d"));
  CHECK_THAT(error_of(R"({"input_shape": [784], "layers": [
      {"type": "Linear", "in_features": 100, "out_features": 10}]})"),
             Contains("/layers/0/in_features: 100 does not match the input's last dimension"));
  CHECK_THAT(error_of(R"({"input_shape": [1, 4, 4], "layers": [
      {"type": "MaxPool2d", "kernel_size": 5}]})"),
             Contains("is larger than the input"));
  CHECK_THAT(error_of(R"({"input_shape": [0, 28], "layers": [{"type": "ReLU"}]})"),
             Contains("/input_shape: dimensions must be positive"));
  CHECK_THAT(error_of(R"({"input_shape": [8], "layers": [{"type": "ReLU"},
      {"type": "Embedding", "num_embeddings": 10, "embedding_dim": 4}]})"),
             Contains("Embedding must be the first layer"));
}
