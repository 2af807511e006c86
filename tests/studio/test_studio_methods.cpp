// kvpress's methods and Quest in the Studio under Xvfb, driven by --script: the layers panel lists
// their presets and names the press method a layer runs; a live run under them records each
// step's mode and the tokens each layer kept and evicted, which the saved capture holds (checked
// here against kvpress's budget and Quest's window), and the map's overlay ticks the kept keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "tests/studio/studio_script.h"

namespace fs = std::filesystem;

namespace {

const fs::path kModel = fs::path(LUKA_SOURCE_DIR) / "models" / "default";

#define REQUIRE_STUDIO()                                                                                 \
  if (!luka::test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"; \
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel

TEST(StudioMethods, PressAndQuestLayersRunLiveAndTheirCapturesHoldWhatTheyKept) {
  REQUIRE_STUDIO();
  const fs::path d = luka::test::test_dir("studio_methods"), saved = d / "run.h5";
  // SnapKV on every layer (half the prompt, a window of 8 queries), Quest on layers 20-29 (pages
  // of 4, 2 pages and a window of 8); then layer 3 switched to quest and layer 21 to press from
  // the panel's modes, which the next run uses.
  const luka::test::RunResult r = luka::test::run_studio(
      d, "",
      "load_model " + kModel.string() + "\nwait_idle 300\npreset snapkv\nset layers=all,press_window=8,compression_ratio=0.5\n"
      "set layers=20-29,mode=quest,quest_page_size=4,quest_pages=2,quest_window=8\n"
      "free_text The lighthouse keeper wrote in the log that the fog rolled in over the harbour before dawn, and the ships waited.\n"
      "run 6 ignore_eos\nwait_idle 300\nselect 4 0\nframes 3\n"
      "expect_drawn layer_params_heading layer 4 runs press (snapkv)\nexpect_drawn method_presets\n"
      "expect_mode 3 4 press\nexpect_mode 3 22 quest\n"
      "set_mode 3 quest\nset_mode 21 press\nrun 6 ignore_eos\nwait_idle 300\nselect 3 0\nframes 3\n"
      "expect_drawn layer_params_heading layer 3 runs quest\nexpect_mode 2 3 quest\nexpect_mode 2 21 press\n"
      "select 21 0\nselect_step 3\nlayout full\nframes 5\nprint_geometry\n"
      "save_capture " + saved.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  using namespace luka::capture;
  const auto file = CaptureFile::open(saved);
  const Summary s = file->summary();
  const std::int64_t n = s.layout.prompt_tokens;
  ASSERT_EQ(s.complete_steps, 5);
  for (std::int64_t step = 1; step <= s.complete_steps; ++step)
    for (const int layer : {3, 4, 21, 22}) {
      const StepMetrics m = file->metrics(step, layer);
      const bool quest = layer == 3 || layer == 22;
      EXPECT_EQ(m.mode, quest ? kModeQuest : kModePress) << "step " << step << " layer " << layer;
      for (const int head : {0, 4}) {
        const auto cover = file->cover(step, layer, head);
        std::int64_t kept = 0, kept_prompt = 0;
        for (std::size_t t = 0; t < cover.size(); ++t) {
          ASSERT_TRUE(cover[t] == kRaw || cover[t] == kDropped) << "step " << step << " layer " << layer << " token " << t;
          kept += cover[t] == kRaw;
          kept_prompt += cover[t] == kRaw && static_cast<std::int64_t>(t) < n;
        }
        if (quest) {  // layer 22: the window of 8 and at most 2 pages of 4; layer 3: Quest's defaults, a window of 16
          const std::int64_t window = layer == 22 ? 8 : 16;
          for (std::int64_t t = m.tokens - window; t < m.tokens; ++t) EXPECT_EQ(cover[static_cast<std::size_t>(t)], kRaw) << "window token " << t;
          if (layer == 22) EXPECT_LE(kept, 8 + 2 * 4);
        } else {  // kvpress's budget: floor(n (1 - ratio)) of the prompt, and every token after it
          EXPECT_EQ(kept_prompt, n / 2) << "step " << step << " layer " << layer;
          EXPECT_EQ(kept - kept_prompt, step);
        }
        EXPECT_EQ(m.cover_size[static_cast<std::size_t>(head)], kept);
      }
    }
  // The map's overlay at step 3 of layer 21 (press), head 0: a tick for every key the press kept.
  const auto drawn = luka::test::drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 1u) << r.out;
  ASSERT_TRUE(drawn[0].count("kascade_keys")) << r.out;
  const auto cover = file->cover(3, 21, 0);
  EXPECT_EQ(drawn[0].at("kascade_keys").text, std::to_string(std::count(cover.begin(), cover.end(), kRaw)));
}

// Query-agnostic from the prompt builder: the demo prompt's segments are prefilled before its
// question, so Knorm keeps half of the context alone and every token from the question on; the
// saved capture's manifest says where the context ended.
TEST(StudioMethods, AQueryAgnosticRunCompressesTheSegmentsBeforeTheQuestion) {
  REQUIRE_STUDIO();
  const fs::path d = luka::test::test_dir("studio_methods_agnostic"), saved = d / "run.h5";
  const fs::path demo = fs::path(LUKA_SOURCE_DIR) / "assets" / "prompts" / "demo.json";
  const luka::test::RunResult r = luka::test::run_studio(
      d, "",
      "load_model " + kModel.string() + "\nwait_idle 300\nprompt_file " + demo.string() +
          "\npreset knorm\nset layers=all,compression_ratio=0.5\nquery_agnostic on\n"
          "run 3 ignore_eos\nwait_idle 300\nsave_capture " + saved.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  using namespace luka::capture;
  const auto file = CaptureFile::open(saved);
  const Summary s = file->summary();
  const std::int64_t n = s.layout.prompt_tokens;
  const nlohmann::json generation = nlohmann::json::parse(s.manifest.generation);
  ASSERT_TRUE(generation.contains("query_agnostic_context_tokens")) << s.manifest.generation;
  const std::int64_t context = generation["query_agnostic_context_tokens"].get<std::int64_t>();
  EXPECT_GT(context, n / 2);
  EXPECT_LT(context, n - 10);  // the question and the chat template's tail come after it
  for (const int layer : {0, 15, 29})
    for (const int head : {0, 8}) {
      const auto cover = file->cover(1, layer, head);
      std::int64_t kept_context = 0;
      for (std::size_t t = 0; t < cover.size(); ++t) {
        if (static_cast<std::int64_t>(t) < context)
          kept_context += cover[t] == kRaw;
        else
          EXPECT_EQ(cover[t], kRaw) << "layer " << layer << " token " << t << " after the context";
      }
      EXPECT_EQ(kept_context, context / 2) << "layer " << layer << " head " << head;
    }
}

// A needle-in-a-haystack capture (luka eval niah --capture-dir) in the Studio: the cover
// timeline's needle button tracks exactly the needle the capture marks.
TEST(StudioMethods, TheNeedleButtonTracksTheNeedleOfAHaystackCapture) {
  const fs::path checkpoint = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-tok";
  const fs::path emma = fs::path(LUKA_SHARED_DATA) / "texts" / "emma.txt";
  if (!luka::test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)";
  if (!fs::exists(checkpoint / "config.json") || !fs::exists(emma))
    GTEST_SKIP() << "needs the qwen3-tok checkpoint at " << checkpoint << " and " << emma << " (../shared/data is absent)";
  const fs::path d = luka::test::test_dir("studio_methods_needle");
  const luka::test::RunResult made = luka::test::run_program(
      LUKA_CLI_PATH,
      {"eval", "niah", "--model", checkpoint.string(), "--haystack", emma.string(), "--lengths", "128", "--depths", "50",
       "--presets", "clustered", "--max-new-tokens", "3", "--device", "cpu", "--threads", "1", "--quiet", "--out",
       (d / "run").string(), "--capture-dir", (d / "caps").string()},
      d);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const fs::path capture = d / "caps" / "clustered" / "niah-128-d50-s0.h5";
  const auto segments = luka::capture::CaptureFile::open(capture)->segments();
  ASSERT_EQ(segments.size(), 1u);
  const luka::test::RunResult r = luka::test::run_studio(
      d, "",
      "open_capture " + capture.string() + "\nwait_idle 60\nshow_timeline\nframes 3\nclick track_needle\nframes 2\n"
      "expect_track " + std::to_string(segments[0].begin) + " " + std::to_string(segments[0].end - 1) + "\nquit\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
