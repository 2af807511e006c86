// The live run's resource estimate against hand-computed numbers, the refusal it leads to, and a
// run recording what RunRequest::record asks for (the Studio's "record" field and the refusal's
// "record fewer layers / smaller maps" buttons).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "app/studio/data/run_budget.h"
#include "app/studio/data/run_controller.h"
#include "tests/process_util.h"

namespace luka::studio {
namespace {

namespace fs = std::filesystem;

TEST(RunBudget, EstimateAddsKvPrefillAndEncodedMapsByHand) {
  capture::Layout lay;
  lay.layers = {0, 1};
  lay.heads = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  lay.levels = {0, 1};
  const RunBudget b = estimate_run(lay, 9, 100, 20, 1000, 100000);
  EXPECT_EQ(b.kv, 1000u * 120);
  EXPECT_EQ(b.prefill, 9u * 100 * 100 * 6);
  // Lower triangles of 100 and 50 rows in halves, 2 layers x 9 heads, halved by the encoder.
  const std::uint64_t raw = (100u * 101 / 2 + 50u * 51 / 2) * 2 * 2 * 9;
  EXPECT_EQ(b.maps, raw / 2);
  EXPECT_EQ(b.map_memory, 100000u);
  EXPECT_EQ(b.map_spill, raw / 2 - 100000);
  EXPECT_EQ(b.memory(), b.kv + b.prefill + 100000);
}

TEST(RunBudget, RefusesOnlyWhatDoesNotFitAndSaysWhatToChange) {
  RunBudget b;
  b.kv = 1'000'000'000;
  b.map_memory = 500'000'000;
  b.map_spill = 3'000'000'000;
  EXPECT_EQ(check_budget(b, 8'000'000'000, 10'000'000'000, "/var/tmp"), "");
  const std::string memory = check_budget(b, 1'200'000'000, 10'000'000'000, "/var/tmp");
  EXPECT_NE(memory.find("1.5 GB of memory (1.2 GB free)"), std::string::npos) << memory;
  EXPECT_NE(memory.find("record fewer layers or smaller maps"), std::string::npos) << memory;
  const std::string disk = check_budget(b, 8'000'000'000, 2'000'000'000, "/var/tmp");
  EXPECT_NE(disk.find("3.0 GB of temporary disk in /var/tmp (2.0 GB free)"), std::string::npos) << disk;
  EXPECT_EQ(check_budget(b, 0, 0, "/var/tmp"), "") << "unknown free space refuses nothing";
  EXPECT_GT(available_memory(), 0u);
  EXPECT_GT(free_disk("/tmp"), 0u);
}

using luka::test::wait_for;

TEST(RunBudget, ARunRecordsWhatItsRequestAsks) {
  const fs::path model = fs::path(LUKA_SOURCE_DIR) / "models" / "default";
  if (!fs::exists(model)) GTEST_SKIP() << "no model at " << model << " (scripts/setup.sh installs the default one)";
  RunController s;
  s.load_model(model, LoadOptions{}, parse_device("cpu"));
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << "load timed out";
  RunRequest r;
  r.free_text = "The lighthouse keeper wrote in his log that the fog rolled in from the sound after midnight.";
  r.max_new_tokens = 3;
  r.record = "layers=3,7;map_cap=8;map_min=4";
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120));
  ASSERT_EQ(s.status().state, RunState::kReady) << s.status().message;
  const capture::Summary sum = s.view()->summary();
  EXPECT_EQ(sum.layout.layers, (std::vector<int>{3, 7}));
  ASSERT_FALSE(sum.layout.levels.empty());
  EXPECT_LE(capture::level_size(sum.layout.prompt_tokens, sum.layout.levels.front()), 8);
  EXPECT_GT(sum.layout.prompt_tokens, 8);
  EXPECT_FALSE(s.status().refused_for_resources);
}

}  // namespace
}  // namespace luka::studio
