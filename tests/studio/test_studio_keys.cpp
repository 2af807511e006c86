// The Studio's keyboard shortcuts, pressed through the script's `key` command under Xvfb: run,
// pause, resume and step a live run; move through layers and heads; switch the colour scale and
// the views; fit a zoomed map; open and close the help overlay. Replay ignores the run keys.
// Also the layers panel at the default and a wide window (its error line wraps inside the panel,
// the mixed(a,b) button fits in it), the fonts merged for Arabic, Hebrew and the BMP's emoji-like
// symbols, and Arabic prompt text shown joined and right to left.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "tests/studio/studio_script.h"
#include "viz/png.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = LUKA_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "default";

using luka::test::RunResult;

fs::path work_dir() { return luka::test::test_dir("studio_keys"); }

using luka::test::have_xvfb;

RunResult studio(const fs::path& dir, const std::string& args, const std::string& script, const std::string& size = "1280x800") {
  return luka::test::run_studio(dir, args, script, size, "keys.script");
}

using luka::test::differing_pixels;

// The selection, scale, view and help keys.
const std::string kViewKeys =
    "select 0 0\nframes 2\n"
    "key up\nexpect_ui layer 0\n"  // stays at the first layer
    "key down\nexpect_ui layer 1\nkey ]\nkey ]\nexpect_ui layer 3\nkey [\nkey up\nexpect_ui layer 1\n"
    "key left\nexpect_ui head 0\nkey right\nkey .\nexpect_ui head 2\nkey ,\nexpect_ui head 1\n"
    "key l\nexpect_ui scale linear\nkey l\nexpect_ui scale log\n"
    "key 3\nexpect_ui view difference\nkey 2\nexpect_ui view dense\nkey 1\nexpect_ui view effective\n"
    "key f1\nexpect_ui help shown\nkey escape\nexpect_ui help hidden\nkey ?\nexpect_ui help shown\nkey f1\nexpect_ui help hidden\n";

#define REQUIRE_XVFB() \
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"

TEST(StudioKeys, SpaceAndSDriveALiveRun) {
  REQUIRE_XVFB();
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  const fs::path dir = work_dir();
  const RunResult r = studio(dir, "",
                             "load_model " + kModel.string() + "\nwait_idle 300\n"
                             "free_text The capital of France is\n"  // a short prefill: the test is about the keys
                             // Past end-of-sequence: the resumed run lasts long enough for the second Space to pause it.
                             "run 4000 paused ignore_eos\nwait_paused 300\nexpect_steps 0\n"
                             "key s\nwait_steps 1 120\nwait_paused 60\nexpect_steps 1\n"  // one step, then paused again
                             "key s\nwait_steps 2 120\nwait_paused 60\nexpect_steps 2\n"
                             "key space\nwait_steps 4 120\nexpect_ui state running\n"  // resumed
                             "key space\nwait_paused 60\nexpect_ui state paused\n"     // paused mid-run
                             "stop\nwait_idle 120\nexpect_status stopped after\n"
                             // Space when idle runs the prompt again (to its end: "done", not "stopped").
                             "key space\nwait_idle 300\nexpect_status done:\nquit\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(StudioKeys, ViewKeysInReplayAndFitUndoesAZoom) {
  REQUIRE_XVFB();
  const fs::path dir = work_dir(), cap = dir / "run.h5";
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  const RunResult c = luka::test::run_shell("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" +
                                                (kRoot / "assets/prompts/demo.json").string() +
                                                "' --preset clustered --max-new-tokens 6 --quiet --out '" + cap.string() + "'",
                                            dir);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const fs::path fitted = dir / "fitted.png", zoomed = dir / "zoomed.png", refitted = dir / "refitted.png";
  const RunResult r = studio(dir, "--capture '" + cap.string() + "'",
                             "wait_idle 60\nexpect_steps 5\n" + kViewKeys +
                                 "key space\nframes 3\nexpect_steps 5\n"  // replay: no run starts
                                 "key s\nframes 3\nexpect_steps 5\n"
                                 "select 4 1\nframes 3\nscreenshot " + fitted.string() +
                                 "\nzoom 4\nframes 3\nscreenshot " + zoomed.string() +
                                 "\nkey f\nframes 3\nscreenshot " + refitted.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(differing_pixels(fitted, zoomed), 20000u);  // the zoom changed the map
  EXPECT_EQ(differing_pixels(fitted, refitted), 0u);    // and F put it back
}

TEST(StudioLayersPanel, ErrorLineWrapsInsideThePanel) {
  REQUIRE_XVFB();
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  for (const auto& [w, h] : {std::pair{1280, 800}, std::pair{1600, 1000}}) {
    const fs::path dir = work_dir(), shot = dir / "error.png";
    const std::string size = std::to_string(w) + "x" + std::to_string(h);
    // mixed(20,20) on 30 layers: refused, with a message longer than the panel is wide.
    const RunResult r = studio(dir, "", "load_model " + kModel.string() + "\nwait_idle 300\nmixed 20 20\nframes 3\nscreenshot " + shot.string() + "\nquit\n", size);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The layers panel: the lower left, 420 px wide. The error is the only red text there.
    const luka::viz::Image img = luka::viz::read_png(shot);
    ASSERT_EQ(img.width, w);
    int top = h, bottom = -1, right = -1;
    std::size_t red = 0;
    for (int y = static_cast<int>(h * 0.58f); y < h; ++y)
      for (int x = 0; x < 420; ++x) {
        const auto p = img.pixel(x, y);
        if (p.r > 120 && p.r - p.g > 50 && p.r - p.b > 70) {
          ++red;
          top = std::min(top, y);
          bottom = std::max(bottom, y);
          right = std::max(right, x);
        }
      }
    EXPECT_GT(red, 300u) << size;
    EXPECT_GT(bottom - top, 18) << size << ": on two lines";  // one line is 17 px
    EXPECT_LT(right, 412) << size << ": inside the panel's padding";
  }
}

// The mixed(a,b) button sits inside the layers panel, at the default and a wide window, with
// one-digit and two-digit numbers (a longer label).
TEST(StudioLayersPanel, MixedButtonFitsInsideThePanel) {
  REQUIRE_XVFB();
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  for (const auto& [w, h] : {std::pair{1280, 800}, std::pair{1600, 1000}}) {
    const std::string size = std::to_string(w) + "x" + std::to_string(h);
    const RunResult r = studio(work_dir(), "", "load_model " + kModel.string() + "\nwait_idle 300\nframes 3\nprint_geometry\nmixed 10 12\nframes 3\nprint_geometry\nquit\n", size);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto drawn = luka::test::drawn_rects(r.out);
    ASSERT_EQ(drawn.size(), 2u) << r.out;
    for (const auto& d : drawn) {
      ASSERT_TRUE(d.count("mixed_button") && d.count("layers_panel")) << r.out;
      const luka::test::Rect b = d.at("mixed_button"), panel = d.at("layers_panel");
      EXPECT_GT(b.x1 - b.x0, 60) << size;  // "mixed(2,2)" at least
      EXPECT_GE(b.x0, panel.x0) << size;
      EXPECT_LE(b.x1, panel.x1) << size << ": the button reaches past the panel's right edge";
      EXPECT_GE(b.y0, panel.y0) << size;
      EXPECT_LE(b.y1, panel.y1) << size;
    }
    EXPECT_GT(drawn[1].at("mixed_button").x1 - drawn[1].at("mixed_button").x0, drawn[0].at("mixed_button").x1 - drawn[0].at("mixed_button").x0)
        << "mixed(10,12) has the longer label";
  }
}

// The model panel shows all it draws without scrolling: the status line, which is the progress
// bar's label during a run, at the default window size and a larger one, at the same panel height
// paused and done; and a load error longer than the panel is wide, in red, wrapped onto more lines.
TEST(StudioModelPanel, StatusProgressAndLongErrorsFitInsideThePanel) {
  REQUIRE_XVFB();
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  const auto inside = [](const luka::test::Rect& r, const luka::test::Rect& panel, const std::string& what) {
    EXPECT_GE(r.y0, panel.y0) << what;
    EXPECT_LE(r.y1, panel.y1) << what << ": below the panel's visible content";
    EXPECT_LE(r.x1, panel.x1 + 0.5) << what << ": past the panel's right edge";
  };
  for (const auto& [w, h] : {std::pair{1280, 800}, std::pair{1600, 1000}}) {
    const std::string size = std::to_string(w) + "x" + std::to_string(h);
    const RunResult r = studio(work_dir(), "",
                               "load_model " + kModel.string() + "\nwait_idle 300\nrun 6 paused\nwait_paused 300\nframes 3\nprint_geometry\n"
                               "resume\nwait_idle 300\nframes 3\nprint_geometry\nquit\n",
                               size);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto drawn = luka::test::drawn_rects(r.out);
    ASSERT_EQ(drawn.size(), 2u) << r.out;
    for (const auto& d : drawn) {
      ASSERT_TRUE(d.count("model_status") && d.count("model_panel")) << r.out;
      inside(d.at("model_status"), d.at("model_panel"), size + " status");
    }
    EXPECT_EQ(drawn[0].at("model_status").text, "[paused]") << r.out;
    EXPECT_EQ(drawn[1].at("model_status").text, "[ready]") << r.out;
    EXPECT_EQ(drawn[0].at("model_panel").y1, drawn[1].at("model_panel").y1) << size << ": the panel changed height when the run ended";
  }
  // A path longer than the panel is wide: its error, in red, wraps and stays inside the panel.
  const std::string missing = "/nonexistent/models/qwen3-4b-instruct-2507-q4_k_m/snapshots/0123456789abcdef0123/model.gguf";
  const RunResult bad = studio(work_dir(), "", "load_model " + missing + "\nwait_idle 60\nexpect_status " + missing + "\nframes 3\nprint_geometry\nquit\n");
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  const auto drawn = luka::test::drawn_rects(bad.out);
  ASSERT_EQ(drawn.size(), 1u) << bad.out;
  const auto& d = drawn[0];
  ASSERT_TRUE(d.count("model_status") && d.count("model_panel")) << bad.out;
  EXPECT_EQ(d.at("model_status").text, "[no model] red") << bad.out;
  EXPECT_GT(d.at("model_status").y1 - d.at("model_status").y0, 40) << "the error is not wrapped onto three lines";  // a line is 15 px
  inside(d.at("model_status"), d.at("model_panel"), "the wrapped error");
}

// Read-only text with Arabic: the free-text prompt's preview (the editor keeps the text as typed)
// and a replayed capture's prompt show the letters joined and right to left, as the presentation
// forms the font atlas holds.
TEST(StudioFonts, ArabicPromptTextIsShownJoinedAndRightToLeft) {
  REQUIRE_XVFB();
  if (!fs::exists("/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf")) GTEST_SKIP() << "fonts-noto-core is not installed";
  // في البيت (in the house), drawn: final teh, medial yeh, medial beh, initial lam, alef, space,
  // final yeh, initial feh.
  const std::string text = "\xD9\x81\xD9\x8A \xD8\xA7\xD9\x84\xD8\xA8\xD9\x8A\xD8\xAA";
  const std::string drawn = "\xEF\xBA\x96\xEF\xBB\xB4\xEF\xBA\x92\xEF\xBB\x9F\xEF\xBA\x8D \xEF\xBB\xB2\xEF\xBB\x93";
  std::string glyphs;
  for (const char* cp : {"FE96", "FEF4", "FE92", "FEDF", "FE8D", "FEF2", "FED3"}) glyphs += "expect_glyph " + std::string(cp) + "\n";
  const RunResult r = studio(work_dir(), "", "free_text " + text + "\nframes 3\nexpect_prompt " + text + "\nexpect_prompt_drawn " + drawn + "\n" + glyphs + "quit\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (!fs::exists(kModel)) return;
  const fs::path cap = work_dir() / "arabic.h5";
  const RunResult c = luka::test::run_shell("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt '" + text + "' --max-new-tokens 2 --quiet --out '" + cap.string() + "'",
                                            work_dir());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult replay = studio(work_dir(), "--capture '" + cap.string() + "'", "wait_idle 60\nframes 3\nexpect_prompt " + text + "\nexpect_prompt_drawn " + drawn + "\nquit\n");
  EXPECT_EQ(replay.exit_code, 0) << replay.err;
}

TEST(StudioFonts, ArabicHebrewAndSymbolGlyphs) {
  REQUIRE_XVFB();
  std::string script;
  // Noto Sans Arabic (fonts-noto-core): letters and the joined presentation forms, lam-alef.
  if (fs::exists("/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf")) script += "expect_glyph 0627\nexpect_glyph FE91\nexpect_glyph FEFB\n";
  if (fs::exists("/usr/share/fonts/truetype/noto/NotoSansHebrew-Regular.ttf")) script += "expect_glyph 05D0\nexpect_glyph 05E9\n";
  // Symbola (fonts-symbola) fills what DejaVu lacks: white heavy check mark, cross mark, star.
  if (fs::exists("/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf")) script += "expect_glyph 2705\nexpect_glyph 274C\nexpect_glyph 2B50\n";
  if (script.empty()) GTEST_SKIP() << "fonts-noto-core and fonts-symbola are not installed (scripts/setup.sh installs them)";
  const RunResult r = studio(work_dir(), "", script + "expect_glyph 2764\nframes 1\nquit\n");  // heavy black heart: DejaVu
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(StudioKeys, UnknownKeyNameFailsTheScript) {
  REQUIRE_XVFB();
  const RunResult r = studio(work_dir(), "", "key hyperspace\nquit\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown key 'hyperspace'"), std::string::npos) << r.err;
}

}  // namespace
