// The Studio under Xvfb (llvmpipe), driven by --script: a live run with a layer switched
// mid-generation (checked in the run's capture), replay of a capture file, screenshots that show
// heatmap pixels in the colormap and the cover timeline's states, axes and topic bands, and clear
// errors for a missing display, an unreadable capture and a model that fails to load.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "tests/studio/studio_script.h"
#include "viz/colormap.h"
#include "viz/png.h"
#include "viz/state_colours.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = LUKA_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "default";

using luka::test::read_file;
using luka::test::RunResult;

fs::path work_dir() { return luka::test::test_dir("studio"); }

RunResult sh(const std::string& command) { return luka::test::run_shell(command, work_dir()); }

using luka::test::have_xvfb;

RunResult studio(const std::string& args, const std::string& script) { return luka::test::run_studio(work_dir(), args, script); }

// A screenshot is a real frame: the window's size, many colours, and a heatmap drawn in the
// ember colormap (thousands of pixels exactly equal to its entries).
void expect_heatmap_screenshot(const fs::path& png) {
  const luka::viz::Image img = luka::viz::read_png(png);
  EXPECT_EQ(img.width, 1280);
  EXPECT_EQ(img.height, 800);
  const auto& table = luka::viz::Colormap::get(luka::viz::ColormapId::kEmber).table();
  std::set<std::uint32_t> ember, colours;
  for (const auto& c : table) ember.insert((std::uint32_t{c.r} << 16) | (c.g << 8) | c.b);
  std::size_t in_map = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const auto p = img.pixel(x, y);
      const std::uint32_t key = (std::uint32_t{p.r} << 16) | (p.g << 8) | p.b;
      colours.insert(key);
      in_map += ember.count(key);
    }
  EXPECT_GT(colours.size(), 100u) << png;
  EXPECT_GT(in_map, 20000u) << png;  // the map covers a few hundred pixels squared
}

#define REQUIRE_STUDIO()                                                                   \
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"; \
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel

TEST(Studio, LiveRunSwitchesALayerMidGenerationAndShowsTheMap) {
  REQUIRE_STUDIO();
  const fs::path shot = work_dir() / "live.png", zoomed = work_dir() / "zoomed.png";
  const RunResult r = studio("", "load_model " + kModel.string() +
                                     "\nwait_idle 300\nrun 10 paused\nwait_paused 300\nstep\nstep\nwait_steps 2 120\n"
                                     "set_mode 5 clustered\nset_mode 6 lined\nset layer=7,mode=clustered,top_k=0,page_size=8,tail=16\n"
                                     "set layer=8,mode=clustered,top_k=2,page_size=8,tail=16\nshadow on\nstep\nwait_steps 3 120\n"
                                     "expect_fidelity 3 5\nexpect_fidelity 3 6\nexpect_refined 3 7 0 0\nexpect_refined 3 8 0 2\n"
                                     "show_fidelity\n"
                                     "expect_mode 2 5 dense\nexpect_mode 3 5 clustered\nexpect_mode 3 6 lined\nexpect_mode 3 7 clustered\n"
                                     "expect_mode 3 9 dense\n"
                                     "resume\nwait_idle 300\nexpect_steps 9\nexpect_status done\nselect 3 1\nframes 3\n"
                                     "screenshot " + shot.string() + "\nzoom 4\nscale linear\nframes 2\nscreenshot " + zoomed.string() +
                                     "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_heatmap_screenshot(shot);
  ASSERT_TRUE(fs::exists(zoomed));
  EXPECT_GT(luka::viz::read_png(zoomed).width, 0);
}

TEST(Studio, FreeTextRunsWithoutSegments) {
  REQUIRE_STUDIO();
  const RunResult r = studio("", "load_model " + kModel.string() +
                                     "\nwait_idle 300\nfree_text The capital of France is\nrun 4\nwait_idle 300\nexpect_steps 3\n"
                                     "expect_segments 0\nframes 2\nquit\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const RunResult demo = studio("", "load_model " + kModel.string() + "\nwait_idle 300\nrun 3\nwait_idle 300\nexpect_segments 3\nquit\n");
  EXPECT_EQ(demo.exit_code, 0) << demo.err;  // the demo prompt: A/B/A segments
}

// The model panel's weights choice (luka studio --weights): a GGUF model loads with its blocks kept
// quantized, says so, and runs.
TEST(Studio, LoadsAGgufWithQuantizedWeights) {
  REQUIRE_STUDIO();
  const RunResult r = studio("", "weights quantized\nload_model " + kModel.string() +
                                     "\nwait_idle 300\nexpect_ui weights quantized\nfree_text The capital of France is\nrun 4\nwait_idle 300\n"
                                     "expect_steps 3\nweights dequantized\nload_model " + kModel.string() +
                                     "\nwait_idle 300\nexpect_ui weights dequantized\nquit\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A script that switches to a grid before the map was ever shown still gets its screenshot: the
// map's read, which nothing takes while a grid is drawn, does not hold it.
TEST(Studio, AGridScreenshotBeforeAnyMapIsTaken) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "grid-first.h5", shot = work_dir() / "grid-first.png";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset 'mixed(2,2)' --max-new-tokens 4 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  for (const char* grid : {"layers", "heads"}) {
    SCOPED_TRACE(grid);
    fs::remove(shot);
    const RunResult r = studio("--capture '" + cap.string() + "'", std::string("wait_idle 60\ngrid ") + grid + "\nframes 3\nscreenshot " +
                                                                       shot.string() + "\nquit\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(fs::exists(shot)) << r.err;
    const luka::viz::Image img = luka::viz::read_png(shot);
    EXPECT_GT(img.width, 100);
    EXPECT_GT(img.height, 100);
  }
}

// The page grid marks a layer's pages where it ran clustered, not on the lined layers of the same
// run (which keep pages only to switch at once): paper's layers 0-7 lined, 8-21 clustered.
TEST(Studio, PageGridOnlyOnClusteredLayers) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "paper-grid.h5";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset paper --max-new-tokens 4 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string look = "\nzoom 4\nframes 3\nwait_idle 60\nframes 3\nprint_geometry\n";
  const RunResult r = studio("--capture '" + cap.string() + "'", "wait_idle 60\nselect 0 0" + look + "select 8 0" + look + "quit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto drawn = luka::test::drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 2u) << r.out;
  EXPECT_EQ(drawn[0].count("page_grid"), 0u) << "a grid on lined layer 0";
  ASSERT_EQ(drawn[1].count("page_grid"), 1u) << r.out;
  EXPECT_GT(std::stoi(drawn[1].at("page_grid").text), 10);  // a page of 16 tokens every 16 tokens of the prompt
}

// The related methods on the map and the layer strip: Kascade's reuse as arrows from each anchor
// to the layers that reused it (bold for the selected layer's), its top-k keys on the selected
// step's row; a SemantiCache capture's refined clusters as the runs of tokens they hold.
TEST(Studio, KascadeReuseArrowsAndTopKKeysAreDrawn) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "kascade.h5", strip = work_dir() / "kascade-strip.png", map = work_dir() / "kascade-map.png";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset kascade --set kascade_top_frac=0,kascade_top_k=48 --max-new-tokens 4 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult r = studio("--capture '" + cap.string() + "'", "wait_idle 60\nselect 3 0\ngrid layers\nframes 3\nwait_idle 60\nframes 3\n"
                                                                 "print_geometry\nscreenshot " + strip.string() +
                                                                 "\ngrid map\nframes 3\nwait_idle 60\nframes 3\nprint_geometry\nscreenshot " + map.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The preset's anchors on the default model's 30 layers: 0, 2, 6, 12, 19; layer 3 reuses 2,
  // layer 27 reuses 19.
  EXPECT_NE(r.out.find("rect reuse_arrow/2->3 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rect reuse_arrow/19->27 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("rect reuse_arrow/2->6 "), std::string::npos) << "a layer drawn as reusing an anchor before the last one";
  EXPECT_EQ(r.out.find("rect reuse_arrow/2->2 "), std::string::npos) << "an anchor drew an arrow to itself";
  EXPECT_EQ(r.out.find("rect reuse_arrow/0->2 "), std::string::npos) << "an anchor drawn as reusing";
  const auto text_of = [&](const std::string& name) {
    const std::size_t at = r.out.find("rect " + name + " ");
    if (at == std::string::npos) return std::string();
    const std::size_t t = r.out.find(" text ", at), end = r.out.find('\n', at);
    return t < end ? r.out.substr(t + 6, end - t - 6) : std::string();
  };
  EXPECT_EQ(text_of("reuse_arrow/2->3"), "bold");    // the selected layer's
  EXPECT_EQ(text_of("reuse_arrow/2->4"), "faint");
  EXPECT_EQ(text_of("kascade_keys"), "48");          // layer 3's reused top-k set on the last step's row
  expect_heatmap_screenshot(map);
}

TEST(Studio, ReplaysACaptureWithoutAModel) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "run.h5", shot = work_dir() / "replay.png", timeline = work_dir() / "timeline.png";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset 'mixed(2,2)' --max-new-tokens 6 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "wait_idle 60\nexpect_steps 5\nexpect_mode 5 0 lined\nexpect_mode 5 10 clustered\nselect 10 2\nframes 3\n"
                             "screenshot " + shot.string() + "\nshow_timeline\nframes 3\nscreenshot " + timeline.string() +
                             "\nprint_geometry\nexport " + (work_dir() / "fig.pdf").string() + "\nexport " + (work_dir() / "fig.png").string() +
                             "\ngrid heads\nframes 3\nscreenshot " + (work_dir() / "grid.png").string() +
                             "\nexport " + (work_dir() / "grid.pdf").string() +
                             "\ngrid layers\nview difference\nframes 3\nscreenshot " + (work_dir() / "strip.png").string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_heatmap_screenshot(shot);
  // The cover timeline of a clustered layer: summarized pages and the raw tail, in their colours.
  const luka::viz::Image img = luka::viz::read_png(timeline);
  std::size_t summarized = 0, raw = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const auto p = img.pixel(x, y);
      summarized += p == luka::viz::kCoverStateColours[1].rgb;
      raw += p == luka::viz::kCoverStateColours[3].rgb;
    }
  EXPECT_GT(summarized, 5000u);
  EXPECT_GT(raw, 500u);
  // Its axes and topic bands: step numbers left of the raster, token positions under it, and over
  // it each segment's band in its topic's colour.
  const auto drawn = luka::test::drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 1u) << r.out;
  ASSERT_TRUE(drawn[0].count("timeline") && drawn[0].count("timeline_bands")) << r.out;
  const luka::test::Rect raster = drawn[0].at("timeline"), bands = drawn[0].at("timeline_bands");
  const auto file = luka::capture::CaptureFile::open(cap);
  const auto tokens = static_cast<double>(file->summary().layout.prompt_tokens + file->summary().complete_steps);
  const auto segments = file->segments();
  ASSERT_EQ(segments.size(), 3u);
  for (const auto& seg : segments) {
    const double mid = raster.x0 + (static_cast<double>(seg.begin + seg.end) / 2) / tokens * (raster.x1 - raster.x0);
    EXPECT_EQ(luka::test::rgb_of(img.pixel(static_cast<int>(mid), static_cast<int>((bands.y0 + bands.y1) / 2))), std::stoul(seg.colour.substr(1), nullptr, 16))
        << "segment " << seg.label << " at token " << (seg.begin + seg.end) / 2;
  }
  const auto text_pixels = [&](double x0, double y0, double x1, double y1) {
    std::size_t n = 0;
    for (int y = static_cast<int>(y0); y < static_cast<int>(y1); ++y)
      for (int x = static_cast<int>(x0); x < static_cast<int>(x1); ++x) {
        const auto p = img.pixel(x, y);
        n += p.r > 110 && p.g > 110 && p.b > 110;
      }
    return n;
  };
  EXPECT_GT(text_pixels(raster.x0 - 40, raster.y0, raster.x0 - 2, raster.y1), 30u) << "no step numbers left of the cover timeline";
  EXPECT_GT(text_pixels(raster.x0, raster.y1 + 1, raster.x1, raster.y1 + 16), 150u) << "no token positions under the cover timeline";
  expect_heatmap_screenshot(work_dir() / "grid.png");  // nine heads of layer 10
  EXPECT_TRUE(fs::exists(work_dir() / "strip.png"));
  EXPECT_EQ(read_file(work_dir() / "grid.pdf").rfind("%PDF-", 0), 0u);  // the head grid exported as one figure
  // The export button's figures.
  EXPECT_EQ(read_file(work_dir() / "fig.pdf").rfind("%PDF-", 0), 0u);
  EXPECT_EQ(luka::viz::read_png(work_dir() / "fig.png").width, 1520);
}

TEST(Studio, PromptBuilderRelaysSavesAndLoadsWikiSalad) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path saved = work_dir() / "saved.json";
  // The pattern field follows the prompt: the demo's ABA at start (it said ABAB), then each change.
  std::string script = "frames 2\nexpect_pattern ABA\npattern AAB\nframes 2\nexpect_pattern AAB\nsave_prompt " + saved.string() + "\n";
  const fs::path salad = fs::path(LUKA_SHARED_DATA) / "wikisalad" / "hard_3topic_short.json";
  if (fs::exists(salad)) script += "wikisalad " + salad.string() + " 2\nframes 2\nexpect_pattern ABCABC\n";
  // Fonts: Latin, Greek, Cyrillic, CJK (Chinese, kana, Hangul) and symbols render.
  if (fs::exists("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"))
    script += "expect_glyph 706F\nexpect_glyph 30D1\nexpect_glyph AC00\n";
  script += "expect_glyph 00E9\nexpect_glyph 03B2\nexpect_glyph 0416\nexpect_glyph 2192\nframes 2\nquit\n";
  const RunResult r = studio("", script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The saved file is a prompt file in the new order: the demo's two A segments, then B.
  const std::string text = read_file(saved);
  EXPECT_NE(text.find("\"pattern\": \"AAB\""), std::string::npos) << text.substr(0, 200);
  const RunResult bad = studio("", "pattern AAAB\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("needs more segments of topic A"), std::string::npos) << bad.err;
}

TEST(Studio, ClearErrorsNoCrash) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path script = work_dir() / "quit.script";
  std::ofstream(script) << "quit\n";
  const RunResult no_display = sh("env -u DISPLAY -u WAYLAND_DISPLAY '" + std::string(LUKA_CLI_PATH) + "' studio --script '" + script.string() + "'");
  EXPECT_EQ(no_display.exit_code, 1);
  EXPECT_NE(no_display.err.find("no display"), std::string::npos) << no_display.err;
  EXPECT_EQ(std::count(no_display.err.begin(), no_display.err.end(), '\n'), 1) << no_display.err;

  std::ofstream(work_dir() / "notes.h5") << "not a capture\n";
  const RunResult bad_capture = studio("--capture '" + (work_dir() / "notes.h5").string() + "'", "quit\n");
  EXPECT_EQ(bad_capture.exit_code, 1);
  EXPECT_NE(bad_capture.err.find("notes.h5: not an HDF5 file"), std::string::npos) << bad_capture.err;

  // A model that fails to load: the status says why, the window stays up.
  const RunResult bad_model = studio("", "load_model /nonexistent/model.gguf\nwait_idle 60\nexpect_status /nonexistent/model.gguf\n"
                                         "frames 2\nquit\n");
  EXPECT_EQ(bad_model.exit_code, 0) << bad_model.err;

  const RunResult bad_script = studio("", "frobnicate\n");
  EXPECT_EQ(bad_script.exit_code, 1);
  EXPECT_NE(bad_script.err.find("unknown command 'frobnicate'"), std::string::npos) << bad_script.err;
}

// Quitting does not wait for a model load that never returns. A load blocked in the kernel (a FIFO
// in the weights' place, a hung network mount) cannot be interrupted; `hold_load` makes the next
// load wait like one, deaf to quit and cancel. `timeout` ends a Studio that waits for it (exit 124).
TEST(Studio, QuittingDoesNotWaitForALoadThatNeverReturns) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path d = work_dir() / "held_load";
  fs::create_directories(d);
  const fs::path s = d / "quit.script";
  std::ofstream(s) << "hold_load\nload_model " << kModel.string() << "\nframes 10\nexpect_ui state loading\nquit\n";
  const RunResult r = luka::test::run_shell("env -u LUKA_MODEL " + luka::test::kStudioEnv + "timeout 120 xvfb-run -a -s '-screen 0 1280x800x24' '" +
                                                std::string(LUKA_CLI_PATH) + "' studio --size 1280x800 --script '" + s.string() + "'",
                                            d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The case the load above stands for: a model folder whose model.safetensors is a FIFO. The
// Studio refuses it or is still loading it when the script quits; either way it exits.
TEST(Studio, QuittingWhileLoadingAFolderWhoseWeightsAreAFifoExits) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path tokenizer = fs::path(LUKA_SHARED_DATA) / "qwen3-tokenizer" / "tokenizer.json";
  if (!fs::exists(tokenizer)) GTEST_SKIP() << "no Qwen3 tokenizer at " << tokenizer << " (../shared/data)";
  const fs::path d = work_dir() / "fifo_model";
  fs::remove_all(d);
  fs::create_directories(d);
  fs::copy_file(tokenizer, d / "tokenizer.json");
  std::ofstream(d / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu"})";
  ASSERT_EQ(sh("mkfifo '" + (d / "model.safetensors").string() + "'").exit_code, 0);
  const fs::path s = d / "quit.script";
  std::ofstream(s) << "load_model " << d.string() << "\nframes 60\nquit\n";
  const RunResult r = luka::test::run_shell("env -u LUKA_MODEL " + luka::test::kStudioEnv + "timeout 120 xvfb-run -a -s '-screen 0 1280x800x24' '" +
                                                std::string(LUKA_CLI_PATH) + "' studio --size 1280x800 --script '" + s.string() + "'",
                                            d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
