// The Studio's panels under Xvfb, driven by --script, checked against the capture they show: the
// map refits for a new run and keeps a zoom within one; the layers panel names the mode whose
// parameters it shows, says how much of a short prompt a clustered layer pages and why, and its
// ms column is the mean of the capture's last steps, at the step the replay selects; the dense
// shadow switch is off in a replay.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "tests/studio/studio_script.h"

namespace fs = std::filesystem;

namespace {

const fs::path kModel = fs::path(LUKA_SOURCE_DIR) / "models" / "default";

using luka::test::RunResult;

#define REQUIRE_STUDIO()                                                                                 \
  if (!luka::test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"; \
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel

fs::path work_dir(const std::string& name) {
  const fs::path d = luka::test::test_dir("studio_panels") / name;
  fs::create_directories(d);
  return d;
}

// The values of print_geometry's "geometry" lines, in order: {keys_per_pixel, width}.
std::vector<std::pair<double, double>> geometries(const std::string& out) {
  std::vector<std::pair<double, double>> g;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("geometry ", 0) != 0) continue;
    double width = 0, kpp = 0;
    const auto value = [&](const std::string& key) {
      const auto at = line.find(" " + key + " ");
      return at == std::string::npos ? NAN : std::stod(line.substr(at + key.size() + 2));
    };
    width = value("width");
    kpp = value("keys_per_pixel");
    g.emplace_back(kpp, width);
  }
  return g;
}

// The text print_geometry printed for a drawn rect NAME ("rect NAME ... text TEXT").
std::string drawn_text(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  std::string found;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("rect " + name + " ", 0) == 0) {
      const auto at = line.find(" text ");
      found = at == std::string::npos ? "" : line.substr(at + 6);
    }
  return found;
}

// The map is fitted to the whole run, not to the prefill it was first shown at; a zoom set on that
// run is kept; the next run is fitted again, to all of its keys.
TEST(StudioPanels, TheMapRefitsForANewRunAndKeepsTheZoomWithinOne) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir("refit"), second = d / "second.h5";
  const RunResult r = luka::test::run_studio(
      d, "",
      "load_model " + kModel.string() + "\nwait_idle 300\nlayout full\n"
      "free_text The river runs north\nrun 4 ignore_eos\nwait_idle 300\nframes 3\nprint_geometry\n"
      "zoom 4\nframes 3\nprint_geometry\n"
      "free_text In the spring the melt swells the river until the fords close and the ferry carries carts across it\n"
      "run 4 ignore_eos\nwait_idle 300\nframes 3\nprint_geometry\nsave_capture " + second.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto g = geometries(r.out);
  ASSERT_EQ(g.size(), 3u) << r.out;
  const double first_keys = g[0].first * g[0].second;  // the first run's map, fitted: all its keys across
  EXPECT_NEAR(g[1].first * g[1].second, first_keys / 4, 1e-6 * first_keys);  // zoomed in 4x
  const auto sum = luka::capture::CaptureFile::open(second)->summary();
  const double second_keys = static_cast<double>(sum.layout.prompt_tokens + sum.complete_steps);
  EXPECT_NEAR(g[2].first * g[2].second, second_keys, 0.5) << "the new run's map is not fitted to the panel";
}

// The layers panel names the mode it shows parameters of, says what clustered pages on a short
// prompt, and averages its ms column at the selected step; the cover timeline outlines that step.
TEST(StudioPanels, TheLayersPanelNamesTheModeExplainsPagingAndAveragesMsAtTheSelectedStep) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir("layers"), saved = d / "run.h5";
  const RunResult r = luka::test::run_studio(
      d, "",
      "load_model " + kModel.string() + "\nwait_idle 300\nset layer=3,mode=clustered,page_size=16,tail=64\n"
      "free_text The capital of France is\nrun 10 ignore_eos\nwait_idle 300\nselect 3 0\nframes 3\n"
      "expect_drawn layer_params_heading layer 3 runs clustered\n"
      "expect_drawn layer_paged 0 of\nexpect_drawn layer_paged the last 64 tokens (tail) stay raw\n"
      "print_geometry\nsave_capture " + saved.string() + "\n"
      "open_capture " + saved.string() +
      "\nwait_idle 60\nselect 3 0\nselect_step 4\nshow_timeline\nframes 3\nexpect_drawn layer_ms/3\n"
      "expect_drawn timeline_step 4\nprint_geometry\n"
      "select 2 0\nframes 3\nexpect_drawn layer_params_heading layer 2 runs dense\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The ms column: the mean attention time of the 8 steps up to the one shown, from the capture.
  const auto file = luka::capture::CaptureFile::open(saved);
  const std::int64_t last = file->summary().complete_steps;
  ASSERT_EQ(last, 9);
  const auto mean_ms = [&](std::int64_t step) {
    double s = 0;
    std::int64_t n = 0;
    for (std::int64_t k = std::max<std::int64_t>(1, step - 7); k <= step; ++k, ++n) s += file->metrics(k, 3).seconds;
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", 1e3 * s / static_cast<double>(n));
    return std::string(text);
  };
  // The two print_geometry outputs: the live run at its last step, the replay at step 4.
  const auto split = r.out.find("print_geometry frame", r.out.find("print_geometry frame") + 1);
  ASSERT_NE(split, std::string::npos) << r.out;
  EXPECT_EQ(drawn_text(r.out.substr(0, split), "layer_ms/3"), mean_ms(last));
  EXPECT_EQ(drawn_text(r.out.substr(split), "layer_ms/3"), mean_ms(4));
  // The cover timeline follows the step too: step 4's row of the 9 is outlined.
  const auto rects = luka::test::drawn_rects(r.out);
  ASSERT_EQ(rects.size(), 2u);
  ASSERT_TRUE(rects[1].count("timeline_step") && rects[1].count("timeline")) << r.out;
  const luka::test::Rect &row = rects[1].at("timeline_step"), &raster = rects[1].at("timeline");
  const double h = raster.y1 - raster.y0;
  EXPECT_NEAR((row.y0 - raster.y0) / h, 3.0 / 9, 0.02);
  EXPECT_NEAR((row.y1 - raster.y0) / h, 4.0 / 9, 0.02);
}

}  // namespace
