// The dense stack dtplan-run executes: parameter counts and shapes derived by hand.
#include <catch2/catch.hpp>

#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/model/model_desc.hpp"

using namespace dtplan;

TEST_CASE("dense stack of GPT-2 at scale 1 is GPT-2 without norms and position embeddings") {
  const auto m = load_model("gpt2", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 1.0, 1024);
  // GPT-2 small has 124,439,808 parameters (Hugging Face gpt2); minus the learned positions
  // 1024 x 768 = 786,432 and the 25 LayerNorms 25 x 2 x 768 = 38,400: 123,614,976.
  CHECK(cost::params_of(s) == 124439808 - 786432 - 38400);
  // Per block: QKV 768 x 2304 + 2304, out 768 x 768 + 768, MLP 2 x 768 x 3072 + 3072 + 768.
  CHECK(cost::units_of(s).at(1).params == 1771776 + 590592 + 2362368 + 2360064);
  // 6 x matrix elements per token: 12 blocks x 7,077,888 (weights only) + head 38,597,376.
  CHECK(cost::flops_per_token(s) == Approx(6.0 * (12 * 7077888.0 + 38597376.0)));
}

TEST_CASE("scale shrinks head dimension, MLP and vocabulary, keeps heads and layers") {
  const auto m = load_model("llama-2-7b", std::string(DTPLAN_DATA_DIR) + "/models");
  const auto s = cost::dense_stack_of(*m.transformer, 0.05, 64);
  CHECK(s.head_dim == 6);  // round(128 x 0.05 = 6.4)
  CHECK(s.heads == 32);
  CHECK(s.hidden == 192);
  CHECK(s.ffn == 550);     // round(11008 x 0.05 = 550.4)
  CHECK(s.vocab == 1600);  // 32000 x 0.05
  CHECK(s.layers == 32);
  CHECK(s.gated);
  CHECK_FALSE(s.tied);
  CHECK_THROWS_WITH(cost::dense_stack_of(*m.transformer, 1.5, 64),
                    Catch::Contains("scale: 1.5") && Catch::Contains("is not in (0, 1]"));
}
