// The automatic layer config (core/luka/auto_config.h): the optimizer against brute force over
// every choice on up to 6 layers, and a config built from a hand-made calibration file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "core/luka/auto_config.h"
#include "core/util/error.h"

namespace fs = std::filesystem;
using luka::LayerOption;

namespace {

// The least total loss over every combination within the budget (infinity when none fits).
double brute_force(const std::vector<std::vector<LayerOption>>& o, std::int64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> pick(o.size(), 0);
  for (;;) {
    std::int64_t cost = 0;
    double loss = 0;
    for (std::size_t l = 0; l < o.size(); ++l) cost += o[l][pick[l]].cost, loss += o[l][pick[l]].loss;
    if (cost <= budget) best = std::min(best, loss);
    std::size_t l = 0;
    while (l < o.size() && ++pick[l] == o[l].size()) pick[l++] = 0;
    if (l == o.size()) return best;
  }
}

}  // namespace

TEST(AutoConfig, OptimizerEqualsBruteForce) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 400; ++trial) {
    const int layers = 1 + trial % 6;
    std::vector<std::vector<LayerOption>> o(static_cast<std::size_t>(layers));
    std::int64_t cheapest = 0, dearest = 0;
    for (auto& l : o) {
      const int n = 1 + static_cast<int>(rng() % 5);
      std::int64_t lo = 1 << 30, hi = 0;
      for (int k = 0; k < n; ++k) {
        l.push_back({static_cast<std::int64_t>(rng() % 40), static_cast<double>(rng() % 1000) / 100.0});
        lo = std::min(lo, l.back().cost), hi = std::max(hi, l.back().cost);
      }
      cheapest += lo, dearest += hi;
    }
    const std::int64_t budget = cheapest + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(dearest - cheapest + 1));
    const std::vector<int> choice = luka::choose_layer_options(o, budget);
    ASSERT_EQ(choice.size(), o.size());
    std::int64_t cost = 0;
    double loss = 0;
    for (std::size_t l = 0; l < o.size(); ++l) {
      ASSERT_GE(choice[l], 0);
      ASSERT_LT(static_cast<std::size_t>(choice[l]), o[l].size());
      cost += o[l][static_cast<std::size_t>(choice[l])].cost;
      loss += o[l][static_cast<std::size_t>(choice[l])].loss;
    }
    EXPECT_LE(cost, budget) << "trial " << trial;
    EXPECT_NEAR(loss, brute_force(o, budget), 1e-9) << "trial " << trial;
  }
  EXPECT_THROW(luka::choose_layer_options({{{5, 0.0}}, {{5, 0.0}}}, 9), luka::Error);  // nothing fits
}

TEST(AutoConfig, FromACalibrationFile) {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "auto_config";
  fs::create_directories(dir);
  // Three layers, dense costs 100 each; candidates lined (cost 20) and clustered (cost 30).
  // Layer 0 is cheap to approximate with lined, layer 1 with clustered, layer 2 with neither.
  nlohmann::json cal = {{"calibration", 1}, {"num_layers", 3}, {"num_heads", 2},
                        {"candidates", {{{"name", "lined"}, {"config", {{"mode", "lined"}, {"rho", 0.125}}}},
                                        {{"name", "clustered"}, {"config", {{"mode", "clustered"}, {"top_k", 3}}}}}}};
  const double kl[3][2] = {{0.01, 0.5}, {0.6, 0.02}, {2.0, 1.5}};
  const double out[3][2] = {{0.3, 0.1}, {0.2, 0.4}, {0.5, 0.6}};  // output error ranks them the other way
  for (int l = 0; l < 3; ++l)
    cal["layers"].push_back({{"layer", l}, {"dense_entries", 100.0},
                             {"candidates", {{{"kl", kl[l][0]}, {"rel_l2", out[l][0]}, {"entries", 20.0}},
                                             {{"kl", kl[l][1]}, {"rel_l2", out[l][1]}, {"entries", 30.0}}}}});
  std::ofstream(dir / "cal.json") << cal.dump();
  // Budget 150 of 300 entries: lined 0, clustered 1, dense 2 (150) is the only choice keeping layer 2 exact.
  const luka::LukaConfig c = luka::LukaConfig::preset("auto:" + (dir / "cal.json").string() + ",budget=0.5,loss=kl", 3);
  EXPECT_EQ(c.layers[0].mode, luka::AttentionMode::kLined);
  EXPECT_EQ(c.layers[1].mode, luka::AttentionMode::kClustered);
  EXPECT_EQ(c.layers[2].mode, luka::AttentionMode::kDense);
  EXPECT_DOUBLE_EQ(c.layers[0].lined.rho, 0.125);
  EXPECT_EQ(c.layers[1].clustered.top_k, 3);
  // A budget of 0.25 (75 entries) cannot keep any layer dense: the cheapest-loss mix.
  const luka::LukaConfig tight = luka::LukaConfig::preset("auto:" + (dir / "cal.json").string() + ",loss=kl,budget=0.25", 3);
  EXPECT_EQ(tight.layers[0].mode, luka::AttentionMode::kLined);
  EXPECT_EQ(tight.layers[1].mode, luka::AttentionMode::kClustered);
  EXPECT_EQ(tight.layers[2].mode, luka::AttentionMode::kLined);  // 20 + 30 + 20 = 70; clustered would be 80
  EXPECT_THROW(luka::LukaConfig::preset("auto:" + (dir / "cal.json").string(), 4), luka::Error);       // another model
  EXPECT_THROW(luka::LukaConfig::preset("auto:" + (dir / "cal.json").string() + ",budget=0.1", 3), luka::Error);  // too tight
  EXPECT_THROW(luka::LukaConfig::preset("auto:" + (dir / "cal.json").string() + ",budget=2", 3), luka::Error);
  EXPECT_THROW(luka::LukaConfig::preset("auto:", 3), luka::Error);
  // loss=output minimizes the output error instead: clustered 0, lined 1, dense 2 (loss 0.3).
  const luka::LukaConfig by_output = luka::LukaConfig::preset("auto:" + (dir / "cal.json").string() + ",loss=output,budget=0.5", 3);
  EXPECT_EQ(by_output.layers[0].mode, luka::AttentionMode::kClustered);
  EXPECT_EQ(by_output.layers[1].mode, luka::AttentionMode::kLined);
  EXPECT_EQ(by_output.layers[2].mode, luka::AttentionMode::kDense);
  EXPECT_THROW(luka::LukaConfig::preset("auto:" + (dir / "cal.json").string() + ",loss=mse", 3), luka::Error);
  // Options come off the end in either order; the file name keeps its own commas.
  const luka::AutoSpec spec = luka::parse_auto_spec("a,b.json,budget=0.25,loss=output");
  EXPECT_EQ(spec.file, "a,b.json");
  EXPECT_DOUBLE_EQ(spec.budget, 0.25);
  EXPECT_EQ(spec.loss, luka::AutoLoss::kOutput);
  EXPECT_EQ(luka::parse_auto_spec("c.json").loss, luka::AutoLoss::kOutput);  // the default
  EXPECT_EQ(luka::parse_auto_spec("c.json,loss=kl").loss, luka::AutoLoss::kKl);
  EXPECT_THROW(luka::LukaConfig::preset("auto:" + (dir / "absent.json").string(), 3), luka::Error);
}

// A negative entry count was a cost the optimizer took for free, and its error ("auto config: a
// negative cost") named neither the file nor the field; now both are named.
TEST(AutoConfig, NegativeEntryCountsAreRefusedNamingTheFileAndTheField) {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "auto_config";
  fs::create_directories(dir);
  const auto error_of = [&](const nlohmann::json& cal) -> std::string {
    std::ofstream(dir / "negative.json") << cal.dump();
    try {
      luka::LukaConfig::preset("auto:" + (dir / "negative.json").string() + ",budget=0.5", 2);
      return "accepted";
    } catch (const luka::Error& e) {
      return e.what();
    }
  };
  nlohmann::json cal = {{"calibration", 1}, {"num_layers", 2}, {"num_heads", 1},
                        {"candidates", {{{"name", "lined"}, {"config", {{"mode", "lined"}}}}}}};
  for (int l = 0; l < 2; ++l)
    cal["layers"].push_back({{"layer", l}, {"dense_entries", 100.0},
                             {"candidates", {{{"kl", 0.1}, {"rel_l2", 0.2}, {"entries", 20.0}}}}});
  EXPECT_EQ(error_of(cal), "accepted");
  const std::string file = (dir / "negative.json").string();
  nlohmann::json bad = cal;
  bad["layers"][1]["candidates"][0]["entries"] = -5;
  EXPECT_EQ(error_of(bad), file + ": calibration field 'layers[1].candidates[0].entries' is -5, not a count of entries (0 or more)");
  bad = cal;
  bad["layers"][0]["dense_entries"] = -100.0;
  EXPECT_EQ(error_of(bad), file + ": calibration field 'layers[0].dense_entries' is -100.0, not a count of entries (0 or more)");
}
