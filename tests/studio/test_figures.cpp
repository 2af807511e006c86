// Exported maps ready for a paper, checked on `luka export`'s files against the capture drawn: a
// legend of the topics (their colours above the map), a dashed line where decoding starts, the
// layer's modes over the run in the title (a live switch shows as two phrases), and a map that
// stays in crisp cells in every renderer (vector cells for a small map, or an image marked
// pixelated); the grid figures get the topic bands and the modes too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/figures/capture_figure.h"
#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "viz/png.h"

namespace fs = std::filesystem;

namespace {

const fs::path kModel = fs::path(LUKA_SOURCE_DIR) / "models" / "default";

using luka::test::RunResult;

fs::path write_prompt(const fs::path& dir) {
  const fs::path p = dir / "harbour.json";
  std::ofstream(p) << R"({
  "pattern": "ABA",
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

TEST(Figures, AnExportedMapHasTheLegendTheDecodeLineTheModesOverTheRunAndCrispCells) {
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  const fs::path d = luka::test::test_dir("figures"), capture = d / "run.h5";
  const RunResult c = luka::test::run_program(
      LUKA_CLI_PATH,
      {"capture", "--model", kModel.string(), "--prompt-file", write_prompt(d).string(), "--max-new-tokens", "7", "--ignore-eos",
       "--schedule", "step=4:layers=5:mode=lined", "--quiet", "--out", capture.string()},
      d);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  for (const char* ext : {".png", ".svg"}) {
    const fs::path out = d / (std::string("map") + ext);
    const RunResult e = luka::test::run_program(
        LUKA_CLI_PATH, {"export", "--capture", capture.string(), "--layer", "5", "--head", "0", "--step", "6", "--out", out.string()}, d);
    ASSERT_EQ(e.exit_code, 0) << e.err;
  }
  // The legend: both topics' colours above the map's top band (the figure's first 42 points;
  // the PNG has two pixels a point).
  const luka::viz::Image png = luka::viz::read_png(d / "map.png");
  EXPECT_GT(luka::test::count_colour(png, 0x2ca02c, 0, 56, png.width, 84), 40u) << "no Harbour swatch in the legend";
  EXPECT_GT(luka::test::count_colour(png, 0x9467bd, 0, 56, png.width, 84), 40u) << "no Soup swatch in the legend";
  const std::string svg = luka::test::read_file(d / "map.svg");
  // The title, modes over the run: dense to step 3, then lined (the schedule's switch at step 4).
  EXPECT_NE(svg.find("dense to step 3, lined from step 4"), std::string::npos) << svg.substr(0, 400);
  // The decode line is dashed; nothing else in the figure is.
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  // Crisp cells: no image left to a renderer's smoothing.
  for (std::size_t at = svg.find("<image"); at != std::string::npos; at = svg.find("<image", at + 1))
    EXPECT_NE(svg.substr(at, svg.find('>', at) - at).find("pixelated"), std::string::npos)
        << "an <image> not marked pixelated";

  // The grid of every layer: each panel has the topic bands.
  const fs::path grid_png = d / "grid.png";
  const RunResult g = luka::test::run_program(
      LUKA_CLI_PATH,
      {"export", "--capture", capture.string(), "--grid", "layers", "--head", "0", "--step", "6", "--out", grid_png.string()}, d);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const luka::viz::Image gp = luka::viz::read_png(grid_png);
  EXPECT_GT(luka::test::count_colour(gp, 0x9467bd, 0, 100, gp.width, gp.height), 200u)
      << "no topic bands on the grid's panels";
}

// luka export --compare (and the Studio's export while comparing): B − A of two captures of the
// same prompt, each cell the difference of the two captures' rows at level 0 (checked against the
// files' own decode rows), on a symmetric scale, titled B − A with both runs' modes; captures of
// different prompts are refused, and --compare takes neither --grid nor another --view.
TEST(Figures, TheComparisonFigureIsBMinusAOfTheTwoCapturesRows) {
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel;
  const fs::path d = luka::test::test_dir("figures_compare"), a = d / "a.h5", b = d / "b.h5", other = d / "other.h5";
  const fs::path prompt = write_prompt(d);
  const auto capture = [&](const fs::path& out, std::vector<std::string> extra, const std::string& prompt_file) {
    std::vector<std::string> args = {"capture", "--model", kModel.string(), "--prompt-file", prompt_file, "--max-new-tokens", "7",
                                     "--ignore-eos", "--quiet", "--out", out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = luka::test::run_program(LUKA_CLI_PATH, args, d);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  capture(a, {}, prompt.string());
  capture(b, {"--preset", "clustered", "--set", "page_size=8,tail=8,top_k=1"}, prompt.string());
  const fs::path other_prompt = d / "other.json";
  std::ofstream(other_prompt) << R"({"pattern": "A", "topics": {"A": {"label": "X", "colour": "#111111"}},
    "segments": [{"topic": "A", "text": "Something else entirely, and shorter."}], "question": "What?"})";
  capture(other, {}, other_prompt.string());

  const auto fa = luka::capture::CaptureFile::open(a), fb = luka::capture::CaptureFile::open(b);
  const int layer = 5, head = 0;
  const std::int64_t steps = 6, n = fa->summary().layout.prompt_tokens;
  const luka::viz::Figure f = luka::figures::comparison_figure(*fa, *fb, layer, head, 0, steps);
  ASSERT_EQ(f.rows, n + steps);
  ASSERT_EQ(f.cols, n + steps);
  double largest = 0;
  for (std::int64_t s = 1; s <= steps; ++s) {
    const std::vector<float> ra = fa->row(s, layer, head), rb = fb->row(s, layer, head);
    for (std::int64_t k = 0; k < n + s; ++k) {
      const float want = rb[static_cast<std::size_t>(k)] - ra[static_cast<std::size_t>(k)];
      const float got = f.values[static_cast<std::size_t>((n + s - 1) * f.cols + k)];
      ASSERT_FLOAT_EQ(got, want) << "step " << s << " key " << k;
      largest = std::max(largest, std::abs(static_cast<double>(want)));
    }
  }
  EXPECT_GT(largest, 1e-3) << "clustered attends otherwise than dense: the difference is not all zero";
  EXPECT_NEAR(f.options.scale.vmax, largest, 1e-6 + 1e-6 * largest);  // symmetric, as wide as the largest |B - A|
  EXPECT_NE(f.title.find("B − A"), std::string::npos) << f.title;
  EXPECT_NE(f.title.find("B: clustered"), std::string::npos) << f.title;

  const fs::path svg = d / "cmp.svg";
  const RunResult e = luka::test::run_program(LUKA_CLI_PATH, {"export", "--capture", a.string(), "--compare", b.string(), "--layer", "5",
                                                              "--head", "0", "--step", "6", "--level", "0", "--out", svg.string()}, d);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(luka::test::read_file(svg).find("B − A"), std::string::npos);
  const RunResult refused = luka::test::run_program(LUKA_CLI_PATH, {"export", "--capture", a.string(), "--compare", other.string(), "--layer",
                                                                    "5", "--head", "0", "--out", (d / "no.svg").string()}, d);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("different prompts"), std::string::npos) << refused.err;
  const RunResult usage = luka::test::run_program(LUKA_CLI_PATH, {"export", "--capture", a.string(), "--compare", b.string(), "--grid",
                                                                  "heads", "--layer", "5", "--out", (d / "no.svg").string()}, d);
  EXPECT_EQ(usage.exit_code, 2) << usage.err;
}

}  // namespace
