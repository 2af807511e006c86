// The calibration reader (core/eval/calibration.h) on hand-written files: every number lands in
// its layer, head and candidate; the best candidate is the lowest output error; a file with a
// missing field, a wrong count, a number out of range or a value of the wrong type is refused with
// a message naming the file and the field.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/eval/calibration.h"
#include "core/util/error.h"

namespace {

using luka::eval::parse_calibration;
using nlohmann::json;

// 2 layers x 2 heads x 2 candidates; a number encodes where it sits: layer l, head h, candidate k.
json two_by_two() {
  json layers = json::array();
  for (int l = 0; l < 2; ++l) {
    json heads = json::array(), cands = json::array();
    for (int h = 0; h < 2; ++h)
      heads.push_back({{"head", h}, {"sink", 0.1 * l + 0.01 * h}, {"entropy", 1.0 + l}, {"locality", 10.0 * h}, {"cross_topic", l == 0 ? json() : json(0.5)}});
    for (int k = 0; k < 2; ++k) {
      json ph = json::array();
      // Output error: candidate 1 is better for head 0, candidate 0 for head 1.
      for (int h = 0; h < 2; ++h) ph.push_back({{"kl", 0.1 * k + l}, {"recall", 0.9}, {"rel_l2", h == 0 ? 0.5 - 0.25 * k : 0.1 + 0.3 * k}, {"entries", 30.0 + k}});
      cands.push_back({{"name", k ? "clustered:top_k=1" : "lined:rho=0.25"}, {"kl", 0}, {"heads", ph}});
    }
    layers.push_back({{"layer", l}, {"dense_entries", 90.0}, {"heads", heads}, {"candidates", cands}});
  }
  return {{"calibration", 1},   {"model", "/m"},     {"source", "demo"}, {"tokens", 120},
          {"prompt_tokens", 60}, {"decode_steps", 59}, {"num_layers", 2},  {"num_heads", 2},
          {"topics", true},      {"candidates", json::array({{{"name", "lined:rho=0.25"}}, {{"name", "clustered:top_k=1"}}})},
          {"layers", layers}};
}

std::string refused(const json& j) {
  try {
    parse_calibration(j.dump(), "calib.json");
  } catch (const luka::Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Calibration, EveryNumberLandsInItsLayerHeadAndCandidate) {
  const auto c = parse_calibration(two_by_two().dump(), "calib.json");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.source, "demo");
  EXPECT_EQ(c.decode_steps, 59);
  EXPECT_TRUE(c.topics);
  ASSERT_EQ(c.candidates.size(), 2u);
  EXPECT_EQ(c.candidates[1], "clustered:top_k=1");
  ASSERT_EQ(c.heads.size(), 4u);
  ASSERT_EQ(c.dense_entries.size(), 2u);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) {
      const auto& r = c.heads[static_cast<std::size_t>(l * 2 + h)];
      EXPECT_EQ(r.layer, l);
      EXPECT_EQ(r.head, h);
      EXPECT_DOUBLE_EQ(r.sink, 0.1 * l + 0.01 * h);
      EXPECT_DOUBLE_EQ(r.entropy, 1.0 + l);
      EXPECT_DOUBLE_EQ(r.locality, 10.0 * h);
      if (l == 0) EXPECT_TRUE(std::isnan(r.cross_topic)) << "null: no topic";
      else EXPECT_DOUBLE_EQ(r.cross_topic, 0.5);
      ASSERT_EQ(r.candidates.size(), 2u);
      for (int k = 0; k < 2; ++k) {
        EXPECT_DOUBLE_EQ(r.candidates[static_cast<std::size_t>(k)].kl, 0.1 * k + l);
        EXPECT_DOUBLE_EQ(r.candidates[static_cast<std::size_t>(k)].entries, 30.0 + k);
      }
      EXPECT_EQ(r.best, h == 0 ? 1 : 0) << "the lowest output error";
    }
}

TEST(Calibration, MalformedFilesAreRefusedNamingTheField) {
  EXPECT_NE(refused(two_by_two()).find("accepted"), std::string::npos);
  {
    json j = two_by_two();
    j.erase("num_heads");
    EXPECT_EQ(refused(j), "calib.json: not a calibration from luka calibrate (the file has no \"num_heads\")");
  }
  {
    json j = two_by_two();
    j["num_layers"] = 3;
    EXPECT_NE(refused(j).find("layers has 2 entries, expected 3"), std::string::npos) << refused(j);
  }
  {
    json j = two_by_two();
    j["layers"][1]["candidates"][0]["heads"].erase(1);
    EXPECT_NE(refused(j).find("layer 1 candidate 0.heads has 1 entries, expected 2"), std::string::npos) << refused(j);
  }
  {
    json j = two_by_two();
    j["layers"][0]["heads"][1]["sink"] = "high";
    EXPECT_NE(refused(j).find("layer 0 head 1.sink is not a number"), std::string::npos) << refused(j);
  }
  {
    json j = two_by_two();
    j["layers"][0]["candidates"][1]["heads"][0]["entries"] = -1;
    EXPECT_NE(refused(j).find("entries is negative"), std::string::npos) << refused(j);
  }
  {
    json j = two_by_two();
    j["num_heads"] = 18446744073709551615ull;  // 2^64 - 1: out of range, not wrapped to -1
    EXPECT_NE(refused(j).find("num_heads is 18446744073709551615, outside 1..4096"), std::string::npos) << refused(j);
  }
  {
    json j = two_by_two();
    j["layers"][1]["layer"] = 0;
    EXPECT_NE(refused(j).find("layer 1"), std::string::npos) << refused(j);
  }
  {
    json j = two_by_two();
    j["calibration"] = 2;
    EXPECT_NE(refused(j).find("calibration is 2, outside 1..1"), std::string::npos) << refused(j);
  }
  EXPECT_NE(refused(json::array()).find("is not an object"), std::string::npos);
  try {
    parse_calibration("{\"calibration\": ", "calib.json");
    FAIL() << "truncated JSON accepted";
  } catch (const luka::Error& e) {
    EXPECT_NE(std::string(e.what()).find("calib.json"), std::string::npos) << e.what();
  }
}

}  // namespace
