// Capture files in the Studio under Xvfb, driven by --script: a live run saved with "Save capture
// as" (save_capture), opened with "Open capture" (open_capture), replayed with the capture's own
// prompt and segments in the prompt panel (not the editor's prompt) and its run and mode controls
// off until the replay is left; the recent-files list (kept under XDG_CONFIG_HOME, here a test
// folder) records both, and a corrupt list neither stops the Studio nor survives the next save.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "viz/png.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = LUKA_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "default";

using luka::test::quote;
using luka::test::read_file;
using luka::test::RunResult;

fs::path work_dir() { return luka::test::test_dir("studio_files"); }

bool have_xvfb() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

// As in test_studio.cpp: Mesa's GL driver leaks a little at exit, so LeakSanitizer is off for the window.
#if defined(__SANITIZE_ADDRESS__)
const std::string kStudioEnv = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" ";
#else
const std::string kStudioEnv;
#endif

// The Studio on `prompt_file` with the recent-files list under `config`.
RunResult studio(const fs::path& prompt_file, const fs::path& config, const std::string& script, const std::string& size = "1280x800") {
  const fs::path s = work_dir() / "actions.script";
  std::ofstream(s) << script;
  return luka::test::run_shell("env -u LUKA_MODEL XDG_CONFIG_HOME=" + quote(config.string()) + " " + kStudioEnv +
                                   "xvfb-run -a -s '-screen 0 " + size + "x24' " + quote(LUKA_CLI_PATH) + " studio --size " + size +
                                   " --prompt-file " + quote(prompt_file.string()) + " --script " + quote(s.string()),
                               work_dir());
}

// A short interwoven prompt whose topic colours appear nowhere else in the Studio's UI.
fs::path write_prompt(const fs::path& dir) {
  const fs::path p = dir / "harbour.json";
  std::ofstream(p) << R"({
  "title": "Harbour and soup",
  "pattern": "ABA",
  "separator": "\n\n",
  "topics": {"A": {"label": "Harbour", "colour": "#2ca02c"}, "B": {"label": "Soup", "colour": "#9467bd"}},
  "segments": [
    {"topic": "A", "text": "The harbour pilot boarded the freighter at dawn and took her through the narrows."},
    {"topic": "B", "text": "Simmer the lentils slowly with onion, cumin and a bay leaf."},
    {"topic": "A", "text": "By noon the pilot had left the ship at the outer buoy."}
  ],
  "question": "Through the narrows the freighter was guided by the"
})";
  return p;
}

using luka::test::count_colour;

#define REQUIRE_STUDIO()                                                                        \
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"; \
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel

TEST(StudioFiles, SavesALiveRunAndReplaysItWithItsOwnPromptAndControlsOff) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir(), config = d / "config", saved = d / "run.h5", shot = d / "replay.png";
  const fs::path prompt = write_prompt(d);
  // A corrupt recent-files list: the Studio starts with an empty list and replaces the file.
  fs::create_directories(config / "luka-studio");
  std::ofstream(config / "luka-studio" / "recent.json") << "{\"recent\": [oops";
  const RunResult r = studio(
      prompt, config,
      "load_model " + kModel.string() + "\nwait_idle 300\nframes 2\nexpect_locked off\n"
      "expect_prompt The harbour pilot boarded\n"
      "run 6\nwait_idle 300\nexpect_steps 5\n"
      "save_capture " + saved.string() + "\nframes 2\nexpect_recent 0 " + saved.string() + "\n"
      // The editor now holds another prompt: the replay must show the capture's, not this one.
      "free_text Completely different words\nframes 2\nexpect_prompt Completely different words\n"
      "open_capture " + saved.string() + "\nwait_idle 60\nframes 2\n"
      "expect_status replaying run.h5\nexpect_steps 5\nexpect_segments 3\n"
      "expect_prompt The harbour pilot boarded the freighter at dawn\nexpect_prompt Simmer the lentils slowly\n"
      "expect_prompt By noon the pilot had left the ship\nexpect_locked on\nexpect_recent 0 " + saved.string() + "\n"
      "frames 3\nscreenshot " + shot.string() + "\n"
      // Leaving the replay: the editor's prompt and the controls come back.
      "leave_replay\nwait_idle 60\nframes 2\nexpect_locked off\nexpect_prompt Completely different words\nquit\n",
      "1280x900");  // tall enough for the prompt panel to show the second segment unscrolled
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The saved file is an ordinary capture of the run: five steps, the prompt's three segments.
  const auto file = luka::capture::CaptureFile::open(saved);
  EXPECT_EQ(file->summary().complete_steps, 5);
  EXPECT_TRUE(file->summary().finished);
  ASSERT_EQ(file->segments().size(), 3u);
  EXPECT_EQ(file->segments()[1].label, "Soup");
  const RunResult inspect = luka::test::run_program(LUKA_CLI_PATH, {"inspect", saved.string()}, work_dir());
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("Harbour"), std::string::npos) << inspect.out;

  // The replay's prompt panel (left column, below the model panel, down to 58% of the window)
  // draws the capture's segments in their topic colours; the free-text editor it replaced draws none.
  const luka::viz::Image img = luka::viz::read_png(shot);
  ASSERT_EQ(img.height, 900);
  EXPECT_GT(count_colour(img, 0x2ca02c, 0, 150, 420, 522), 100u);  // Harbour
  EXPECT_GT(count_colour(img, 0x9467bd, 0, 150, 420, 522), 50u);   // Soup

  // The recent-files list was rewritten whole, with the saved capture first.
  const std::string recent = read_file(config / "luka-studio" / "recent.json");
  EXPECT_NE(recent.find("\"recent\""), std::string::npos) << recent;
  EXPECT_NE(recent.find(saved.string()), std::string::npos) << recent;
}

TEST(StudioFiles, ASaveWithoutARunOrToABadPathSaysWhy) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path d = work_dir();
  const RunResult nothing = studio(write_prompt(d), d / "config", "frames 2\nsave_capture " + (d / "x.h5").string() + "\n");
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.err.find("nothing to save"), std::string::npos) << nothing.err;
  // A capture that cannot be read: the status says why, and it does not join the recent list.
  std::ofstream(d / "notes.h5") << "not a capture\n";
  const RunResult bad = studio(write_prompt(d), d / "config",
                               "open_capture " + (d / "notes.h5").string() + "\nwait_idle 60\nframes 3\nexpect_status notes.h5\nexpect_locked off\nquit\n");
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_FALSE(fs::exists(d / "config" / "luka-studio" / "recent.json"));
}

// A replayed prompt of long segments: each run shows at most two lines ending in an ellipsis, so
// the second segment is in view under the first at 1280x800; "full text" shows every line, and
// then the first segment alone fills the panel.
TEST(StudioFiles, AReplayedLongPromptShowsTwoLinesPerSegmentOrTheFullText) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir(), config = d / "config_long", capture = d / "long.h5";
  const fs::path prompt = d / "long.json";
  const std::string river =
      "The river rises in the hills above the town and runs north through a narrow valley of oak and ash. "
      "In spring the melt swells it until the fords close and the ferry at the mill carries carts across. "
      "By midsummer it falls again, and boys wade out to the gravel bars to fish for trout in the shallows. "
      "The old stone bridge at the market has five arches, and the middle one was rebuilt after a flood. "
      "Below the bridge the water slows, widens into reed beds, and herons stand there in the evening light.";
  std::ofstream(prompt) << R"({
  "title": "River, bread and trains",
  "pattern": "ABC",
  "separator": "\n\n",
  "topics": {"A": {"label": "River", "colour": "#2ca02c"}, "B": {"label": "Bread", "colour": "#9467bd"}, "C": {"label": "Trains", "colour": "#d62728"}},
  "segments": [
    {"topic": "A", "text": ")" + river + R"("},
    {"topic": "B", "text": "Knead the dough for ten minutes, then leave it to rise in a warm place until it has doubled."},
    {"topic": "C", "text": "The night train to the coast leaves at eleven and stops at every town along the valley."}
  ],
  "question": "The herons stand in the reed beds below the"
})";
  const RunResult c = luka::test::run_program(
      LUKA_CLI_PATH, {"capture", "--model", kModel.string(), "--prompt-file", prompt.string(), "--max-new-tokens", "2", "--quiet", "--out", capture.string()},
      work_dir());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const fs::path compact = d / "long-compact.png", full = d / "long-full.png";
  const RunResult r = studio(write_prompt(d), config,
                             "open_capture " + capture.string() + "\nwait_idle 60\nframes 3\n"
                             "expect_prompt herons stand there in the evening light\n"  // the prompt whole
                             "expect_prompt_drawn \xE2\x80\xA6\nframes 2\nscreenshot " + compact.string() + "\n"
                             "replay_full_text on\nframes 2\nexpect_prompt_drawn herons stand there in the evening light\nframes 2\n"
                             "screenshot " + full.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The prompt panel (left column, between the model and layers panels): the first segment's
  // swatch in both, the second's only when the runs are two lines each.
  const luka::viz::Image a = luka::viz::read_png(compact), b = luka::viz::read_png(full);
  EXPECT_GT(count_colour(a, 0x2ca02c, 0, 150, 420, 470), 50u);  // River
  EXPECT_GT(count_colour(a, 0x9467bd, 0, 150, 420, 470), 50u);  // Bread, under it
  EXPECT_GT(count_colour(b, 0x2ca02c, 0, 150, 420, 470), 50u);
  EXPECT_EQ(count_colour(b, 0x9467bd, 0, 150, 420, 470), 0u);  // pushed below the panel by River's lines
}

}  // namespace
