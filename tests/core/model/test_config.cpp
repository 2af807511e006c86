// config.json variants: transformers 5 rope_parameters, defaults, eos lists, rejected settings.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/model/config.h"
#include "core/util/error.h"
#include "tests/core/model/test_util.h"

namespace luka {
namespace {

nlohmann::json base() {
  return {{"model_type", "qwen3"}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"vocab_size", 100}, {"max_position_embeddings", 64}};
}

ModelConfig parse(const nlohmann::json& j) {
  const auto path = test::scratch("config") / "config.json";
  std::ofstream(path) << j.dump();
  return ModelConfig::from_json_file(path);
}

std::string error_of(const nlohmann::json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, Defaults) {
  const ModelConfig c = parse(base());
  EXPECT_EQ(c.arch, Architecture::kQwen3);
  EXPECT_EQ(c.num_kv_heads, 4);  // defaults to num_attention_heads
  EXPECT_EQ(c.head_dim, 16);     // hidden / heads
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope.type, "default");
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(Config, RopeParametersAndEosList) {
  auto j = base();
  j["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "default"}};
  j["eos_token_id"] = {151645, 151643};
  j["dtype"] = "bfloat16";
  j["num_key_value_heads"] = nullptr;
  const ModelConfig c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{151645, 151643}));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.num_kv_heads, 4);
}

TEST(Config, LlamaAndQwen2Flags) {
  auto j = base();
  j["model_type"] = "llama";
  j["attention_bias"] = true;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  ModelConfig c = parse(j);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_EQ(c.rope.type, "linear");
  EXPECT_DOUBLE_EQ(c.rope.factor, 4.0);
  j = base();
  j["model_type"] = "qwen2";
  c = parse(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_bias);
}

TEST(Config, Rejections) {
  auto j = base();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error_of(j).find("unsupported rope_scaling.rope_type 'yarn'"), std::string::npos) << error_of(j);
  j = base();
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of(j).find("unsupported hidden_act 'gelu'"), std::string::npos);
  j = base();
  j["model_type"] = "gpt2";
  EXPECT_NE(error_of(j).find("unsupported model_type 'gpt2'"), std::string::npos);
  j = base();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("not a multiple of num_key_value_heads 3"), std::string::npos);
  j = base();
  j["vocab_size"] = "many";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'vocab_size' must be an integer"), std::string::npos) << e;
}

// llama3's original_max_position_embeddings becomes an integer: 1e300 (or -1) was converted as it
// stood, which is undefined behaviour past int64's range.
TEST(Config, Llama3OriginalMaxPositionMustBeAPositionCount) {
  for (const double bad : {1e300, -1.0, 0.0}) {
    auto j = base();
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", bad}};
    EXPECT_NE(error_of(j).find("rope_scaling.original_max_position_embeddings must be a positive number of positions"),
              std::string::npos)
        << bad << ": " << error_of(j);
  }
}

// rope_scaling carries the fields transformers requires of its type (modeling_rope_utils raises
// KeyError without them): a missing one is an error naming it, not a made-up default.
TEST(Config, RopeScalingFieldsAreRequiredAsTransformersRequiresThem) {
  const nlohmann::json llama3 = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 32}};
  for (const char* scaling_key : {"rope_scaling", "rope_parameters"}) {
    auto j = base();
    j[scaling_key] = llama3;
    const ModelConfig c = parse(j);
    EXPECT_EQ(c.rope.type, "llama3");
    EXPECT_DOUBLE_EQ(c.rope.low_freq_factor, 1.0);
    EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
    EXPECT_EQ(c.rope.original_max_position, 32);
    for (const char* field : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      for (const bool null : {false, true}) {
        j[scaling_key] = llama3;
        if (null) j[scaling_key][field] = nullptr; else j[scaling_key].erase(field);
        const std::string e = error_of(j);
        EXPECT_NE(e.find(std::string("missing field '") + scaling_key + "." + field + "'"), std::string::npos) << e;
        EXPECT_NE(e.find("config.json"), std::string::npos) << e;
      }
    }
  }
  auto j = base();
  j["rope_scaling"] = {{"rope_type", "linear"}};
  std::string e = error_of(j);
  EXPECT_NE(e.find("missing field 'rope_scaling.factor' (rope_type 'linear' requires factor"), std::string::npos) << e;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_DOUBLE_EQ(parse(j).rope.factor, 2.0);
}

// A file nested 100,000 arrays deep parses, and then overflowed the stack when the field's value
// was printed in the error message; it is refused as too deep.
TEST(Config, DeeplyNestedJsonIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    ModelConfig::from_json_text(R"({"model_type": "qwen3", "hidden_size": )" + deep + "}", "deep/config.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "deep/config.json: config file: JSON nested deeper than 256 levels");
  }
}

}  // namespace
}  // namespace luka
