// Tests for model/src/model_desc.cpp: presets count like the real models, parameter-count
// parsing, and loading errors.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"

using namespace dtplan;
using Catch::Contains;

namespace {
const std::filesystem::path kModels = std::filesystem::path(DTPLAN_DATA_DIR) / "models";
const std::filesystem::path kTestData = DTPLAN_TEST_DATA_DIR;

std::string load_error(const std::string& what) {
  try {
    load_model(what, kModels);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

// Published totals: transformers' PreTrainedModel.num_parameters() of each checkpoint, which
// the Hugging Face model pages list (rounded) in their safetensors metadata; the Llama 2
// paper (Touvron et al. 2023) and Mistral 7B paper state the same models as 7B/13B/70B/7B.
TEST_CASE("transformer presets count exactly like the released models") {
  const std::pair<const char*, std::int64_t> expected[] = {
      {"gpt2", 124'439'808},           {"gpt2-medium", 354'823'168},
      {"gpt2-large", 774'030'080},     {"gpt2-xl", 1'557'611'200},
      {"llama-2-7b", 6'738'415'616},   {"llama-2-13b", 13'015'864'320},
      {"llama-2-70b", 68'976'648'192}, {"llama-3-8b", 8'030'261'248},
      {"mistral-7b", 7'241'732'096},   {"bert-large", 335'141'888},
  };
  for (const auto& [name, params] : expected) {
    INFO(name);
    const auto m = load_model(name, kModels);
    CHECK(m.kind == ModelKind::transformer);
    CHECK(m.params == params);
    CHECK_FALSE(m.reference.empty());
  }
}

TEST_CASE("CNN presets count by hand") {
  // MNIST ConvNet: conv1 1*16*25+16 = 416, bn1 32, conv2 16*32*25+32 = 12,832, bn2 64,
  // fc 1568*10+10 = 15,690.
  const auto mnist = load_model("mnist-convnet", kModels);
  CHECK(mnist.kind == ModelKind::layer_list);
  CHECK(mnist.params == 416 + 32 + 12'832 + 64 + 15'690);
  CHECK(mnist.layers->output_shape() == Shape{10});
  CHECK(mnist.layers->layers[3].output_shape == Shape{16, 14, 14});
  CHECK(mnist.layers->layers[7].output_shape == Shape{32, 7, 7});
  // CIFAR-10 LeNet of the PyTorch tutorial: 456 + 2,416 + 48,120 + 10,164 + 850 = 62,006.
  const auto lenet = load_model("cifar10-lenet", kModels);
  CHECK(lenet.params == 62'006);
  CHECK(lenet.layers->layers[5].output_shape == Shape{16, 5, 5});
}

TEST_CASE("Hugging Face config.json files and folders load") {
  const auto by_file = load_model((kTestData / "hf/pythia-160m/config.json").string(), kModels);
  CHECK(by_file.params == 162'322'944);
  CHECK(by_file.name == "pythia-160m");  // named after the folder, not "config"
  const auto by_folder = load_model((kTestData / "hf/qwen2-0.5b").string(), kModels);
  CHECK(by_folder.params == 494'032'768);
}

TEST_CASE("parameter counts parse with suffixes") {
  CHECK(parse_param_count("7.5e9") == 7'500'000'000);
  CHECK(parse_param_count("7.5B") == 7'500'000'000);
  CHECK(parse_param_count("7.5b") == 7'500'000'000);
  CHECK(parse_param_count("350M") == 350'000'000);
  CHECK(parse_param_count("1.3B") == 1'300'000'000);
  CHECK(parse_param_count("124439808") == 124'439'808);
  CHECK(parse_param_count("1T") == 1'000'000'000'000);
  CHECK(parse_param_count("500k") == 500'000);
  for (const char* bad : {"", "abc", "7.5X", "0", "-5", "1e30", "B", "nan"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_param_count(bad), Error);
  }
  CHECK_THROWS_WITH(parse_param_count("0"), Contains("{params} '0': must be a positive count"));
}

TEST_CASE("unknown presets list close names") {
  const auto msg = load_error("llama-2-7");
  CHECK_THAT(msg, Contains("unknown model 'llama-2-7'") && Contains("did you mean: llama-2-7b") &&
                      Contains("known: bert-large"));
  CHECK_THAT(load_error("./missing/model.json"), Contains("./missing/model.json: no such file"));
}

TEST_CASE("files that are neither format are rejected") {
  const auto path = std::filesystem::temp_directory_path() / "dtplan_test_neither.json";
  std::ofstream(path) << R"({"hidden": 5})";
  CHECK_THAT(load_error(path.string()), Contains("not a model description"));
  std::ofstream(path) << R"({"schema_version": 1, "name": "x"})";
  CHECK_THAT(load_error(path.string()), Contains("needs \"hf_config\""));
  std::ofstream(path) << R"({"schema_version": 1, "input_shape": [4], "layers": [
      {"type": "Linear", "in_features": 4, "out_features": 2}], "extra": 1})";
  CHECK_THAT(load_error(path.string()), Contains("/extra: unknown key"));
  std::filesystem::remove(path);
}

TEST_CASE("a block's parameter tensors are its modules' weights and biases") {
  // GPT-2 (h 768, f 3072): ln_1 w b, c_attn w (768 x 2304) b, c_proj w b, ln_2 w b,
  // c_fc w (768 x 3072) b, mlp c_proj w b: 12 tensors of 7,087,872 elements.
  const auto gpt2 = load_model("gpt2", kModels);
  const auto& g = *gpt2.transformer;
  const std::vector<std::int64_t> gpt2_tensors{768, 768, 1769472, 2304, 589824,  768,
                                               768, 768, 2359296, 3072, 2359296, 768};
  CHECK(layer_parameter_tensors(g) == gpt2_tensors);
  CHECK(layer_submodules(g).size() == 6);
  // Llama 2 7B (h 4096, f 11008, no biases, RMSNorm): input norm, q, k, v, o, post norm,
  // gate, up, down: 9 tensors of 202,383,360 elements.
  const auto llama = load_model("llama-2-7b", kModels);
  const auto& l = *llama.transformer;
  const auto tensors = layer_parameter_tensors(l);
  CHECK(tensors.size() == 9);
  CHECK(layer_submodules(l).size() == 9);
  std::int64_t sum = 0;
  for (const auto t : tensors)
    sum += t;
  CHECK(sum == count_parameters(l).per_layer);
  CHECK(sum == 202'383'360);
  // Outside the blocks: GPT-2's wte and wpe and ln_f (tied head); Llama's embed_tokens, norm
  // and lm_head.
  const std::vector<std::int64_t> gpt2_root{50257 * 768, 1024 * 768, 768, 768};
  CHECK(root_parameter_tensors(g) == gpt2_root);
  const std::vector<std::int64_t> llama_root{32000 * 4096, 4096, 32000 * 4096};
  CHECK(root_parameter_tensors(l) == llama_root);
}
