// The Studio's map layouts under Xvfb, checked pixel by pixel against the capture they show: the
// decode-rows view of a clustered run with the dense shadow draws each step's difference where
// the capture's rows differ, with the sign of the difference; the full map fills its panel; the
// footer has the ticked colour bar and the topic legend; the Topics tab's segment matrix and the
// Head scores tab's colour grid show the numbers `luka inspect` gives; the head grid, the compare
// view, the search and track marks and the hover marks are where they belong; comparing, the
// fidelity tab's Δ columns are B − A of the captures' numbers and the cover timeline marks where
// their states differ; the prefill's progress shows over the map while it computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

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

using luka::test::RunResult;

fs::path work_dir() { return luka::test::test_dir("studio_views"); }

RunResult sh(const std::string& command) { return luka::test::run_shell(command, work_dir()); }

using luka::test::have_xvfb;

RunResult studio(const std::string& args, const std::string& script) { return luka::test::run_studio(work_dir(), args, script); }

struct Geometry {
  std::string layout;
  double left = 0, top = 0, width = 0, height = 0, key0 = 0, keys_per_pixel = 0, row0 = 0, rows_per_pixel = 0;
};

// The `print_geometry` lines of a script's output, in order.
std::vector<Geometry> geometries(const std::string& out) {
  std::vector<Geometry> g;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("geometry ", 0) != 0) continue;
    std::istringstream words(line.substr(9));
    Geometry x;
    words >> x.layout;
    std::map<std::string, double> v;
    std::string name;
    double value = 0;
    while (words >> name >> value) v[name] = value;
    x.left = v["left"], x.top = v["top"], x.width = v["width"], x.height = v["height"];
    x.key0 = v["key0"], x.keys_per_pixel = v["keys_per_pixel"], x.row0 = v["row0"], x.rows_per_pixel = v["rows_per_pixel"];
    g.push_back(x);
  }
  return g;
}

using luka::test::drawn_rects;
using luka::test::Rect;
using luka::viz::ColormapId;

// The balance colormap's index of a pixel, or -1 when the pixel is not one of its entries.
int balance_index(const luka::viz::Rgb& p) { return luka::test::colormap_index(p, ColormapId::kBalance); }

std::uint32_t hex_colour(const std::string& hex) { return static_cast<std::uint32_t>(std::stoul(hex.substr(1), nullptr, 16)); }

double luminance(const luka::viz::Rgb& p) { return 0.2126 * p.r + 0.7152 * p.g + 0.0722 * p.b; }

// How two screenshots differ inside `area`: the differing pixels outside every band (widened by 3
// px), and for each band the share of its length (rows of a band taller than wide, else columns)
// that has a differing pixel inside it (widened by 2 px) — a mark drawn along the band covers it.
struct MarkDiff {
  std::size_t outside = 0;
  std::vector<double> coverage;
};

MarkDiff mark_diff(const luka::viz::Image& x, const luka::viz::Image& y, const Rect& area, const std::vector<Rect>& bands) {
  MarkDiff d;
  std::vector<std::set<int>> hit(bands.size());
  for (int py = static_cast<int>(area.y0); py < static_cast<int>(area.y1); ++py)
    for (int px = static_cast<int>(area.x0); px < static_cast<int>(area.x1); ++px) {
      if (x.pixel(px, py) == y.pixel(px, py)) continue;
      bool inside = false;
      for (std::size_t i = 0; i < bands.size(); ++i) {
        inside |= bands[i].contains(px + 0.5, py + 0.5, 3);
        if (!bands[i].contains(px + 0.5, py + 0.5, 2)) continue;
        const bool tall = bands[i].y1 - bands[i].y0 > bands[i].x1 - bands[i].x0;
        hit[i].insert(tall ? py : px);
      }
      d.outside += !inside;
    }
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const bool tall = bands[i].y1 - bands[i].y0 > bands[i].x1 - bands[i].x0;
    const double lo = std::max(tall ? bands[i].y0 : bands[i].x0, tall ? area.y0 : area.x0), hi = std::min(tall ? bands[i].y1 : bands[i].x1, tall ? area.y1 : area.x1);
    d.coverage.push_back(hi > lo ? static_cast<double>(hit[i].size()) / (hi - lo) : 0.0);
  }
  return d;
}

// A decode step's cover in a capture, counted as the map's hover describes it.
struct CoverCounts {
  std::int64_t tokens = 0, summarized_pages = 0, summarized = 0, refined = 0, raw = 0;
};

CoverCounts count_cover(const luka::capture::CaptureView& view, std::int64_t step, int layer, int head) {
  CoverCounts c;
  c.tokens = view.metrics(step, layer).tokens;
  for (const std::uint8_t s : view.cover(step, layer, head)) {
    c.summarized += s == luka::capture::kSummarized;
    c.refined += s == luka::capture::kRefined;
    c.raw += s == luka::capture::kRaw;
  }
  for (const std::uint8_t s : view.page_states(step, layer, head)) c.summarized_pages += s == luka::capture::kPageSummarized;
  return c;
}

// `luka inspect ARGS --json`, parsed.
nlohmann::json inspect_json(const fs::path& cap, const std::string& args) {
  const RunResult r = luka::test::run_shell("'" + std::string(LUKA_CLI_PATH) + "' inspect '" + cap.string() + "' " + args + " --json", work_dir());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// The footer under a map canvas: the colour bar (a row of at least 190 of the colormap's entries,
// their index rising left to right), tick marks and labels under it, and a legend swatch of each
// topic colour; none of it above the canvas's bottom.
void expect_footer(const luka::viz::Image& img, const Geometry& g, ColormapId id, const std::vector<std::uint32_t>& topic_colours) {
  const int bottom = static_cast<int>(g.top + g.height), x0 = static_cast<int>(g.left) - 110;
  int bar_y = -1;
  std::size_t best = 0;
  for (int y = bottom; y < std::min(img.height, bottom + 60); ++y) {
    const std::size_t n = luka::test::count_colormap(img, id, x0, y, img.width, y + 1);
    if (n > best) best = n, bar_y = y;
  }
  ASSERT_GE(best, 190u) << "no colour bar under the map";
  int bar_x0 = -1, bar_x1 = -1, last = -1, rising = 0, steps = 0;
  for (int x = x0; x < img.width; ++x) {
    const int i = luka::test::colormap_index(img.pixel(x, bar_y), id);
    if (i < 0) continue;
    if (bar_x0 < 0) bar_x0 = x;
    bar_x1 = x;
    if (last >= 0) ++steps, rising += i >= last;
    last = i;
  }
  EXPECT_EQ(rising, steps) << "the colour bar runs from the colormap's low end (left) to its high end";
  EXPECT_GT(bar_x1 - bar_x0, 190);
  // Ticks and their labels: light pixels in the band under the bar, spread along it.
  std::size_t light = 0;
  int light_x0 = img.width, light_x1 = -1;
  for (int y = bar_y + 2; y < std::min(img.height, bar_y + 20); ++y)
    for (int x = bar_x0 - 6; x < bar_x1 + 30; ++x) {
      const auto p = img.pixel(x, y);
      if (luka::test::colormap_index(p, id) < 0 && p.r > 120 && p.g > 120 && p.b > 120) {
        ++light;
        light_x0 = std::min(light_x0, x);
        light_x1 = std::max(light_x1, x);
      }
    }
  EXPECT_GT(light, 40u) << "no tick labels under the colour bar";
  EXPECT_GT(light_x1 - light_x0, 150) << "the ticks span the bar";
  for (const std::uint32_t c : topic_colours)
    EXPECT_GT(luka::test::count_colour(img, c, x0, bottom, img.width, std::min(img.height, bottom + 90)), 60u)
        << "no legend swatch of topic colour " << std::hex << c;
}

// Two captures of the demo prompt for the compare views: A clustered, B dense, recording `layers`
// over 5 new tokens (4 decode steps), with `extra` options for both (the dense shadow).
void capture_compare_pair(const fs::path& a, const fs::path& b, const std::string& layers, const std::string& extra = "") {
  const std::string base = "'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                           "' --record 'layers=" + layers + "' --max-new-tokens 5 --quiet " + extra + " ";
  for (const auto& [preset, out] : {std::pair<std::string, fs::path>{"clustered", a}, {"dense", b}}) {
    const RunResult r = sh(base + "--preset " + preset + " --out '" + out.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
}

#define REQUIRE_STUDIO()                                                                   \
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"; \
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel

TEST(StudioViews, DecodeRowsShowTheDifferenceWhereTheCaptureRowsDiffer) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "clustered.h5", rows_png = work_dir() / "rows.png", full_png = work_dir() / "full.png";
  const int layer = 8, head = 1;
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset clustered --set dense_shadow=true --record 'layers=8' --max-new-tokens 13 --quiet --out '" +
                         cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // The difference view picks decode rows by itself (auto layout); then the full map, for contrast.
  const fs::path topics_png = work_dir() / "topics.png", heads_png = work_dir() / "heads.png", grid_png = work_dir() / "grid.png";
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect " + std::to_string(layer) + " " + std::to_string(head) +
                                 "\nview difference\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " + rows_png.string() +
                                 "\nlayout full\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " + full_png.string() +
                                 // The analysis tabs (a screenshot waits for their reads): the segment matrix, and one
                                 // recorded layer of 9 heads in the head-score table.
                                 "\nshow_topics\nframes 3\nwait_idle 120\nscreenshot " + topics_png.string() +
                                 "\nprint_geometry\nshow_head_scores\nframes 3\nwait_idle 120\nframes 2\nexpect_head_scores 9\n"
                                 "screenshot " + heads_png.string() + "\nprint_geometry\nview effective\ngrid heads\nframes 3\nwait_idle 60\nframes 2\nscreenshot " +
                                 grid_png.string() + "\nprint_geometry\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Geometry> g = geometries(r.out);
  ASSERT_EQ(g.size(), 5u) << r.out;  // one per print_geometry
  EXPECT_EQ(g[0].layout, "rows");
  EXPECT_EQ(g[1].layout, "full");
  const auto drawn = drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 5u) << r.out;
  // The map's toolbar wraps inside the 1280-pixel window: its last button is on screen.
  ASSERT_TRUE(drawn[0].count("map_keys_button")) << r.out;
  EXPECT_LE(drawn[0].at("map_keys_button").x1, 1280.0);
  // The Head scores caption wraps inside the 1280-pixel window.
  ASSERT_TRUE(drawn[3].count("head_scores_caption")) << r.out;
  EXPECT_LE(drawn[3].at("head_scores_caption").x1, 1280.0);
  EXPECT_GT(drawn[3].at("head_scores_caption").y1 - drawn[3].at("head_scores_caption").y0, 0.0);

  // The capture's difference rows, effective - dense, per step.
  const auto file = luka::capture::CaptureFile::open(cap);
  const std::int64_t steps = file->summary().complete_steps;
  const std::int64_t n = file->summary().layout.prompt_tokens;
  ASSERT_EQ(steps, 12);
  std::vector<std::vector<float>> diff;
  float vmax = 0;
  for (std::int64_t s = 1; s <= steps; ++s) {
    std::vector<float> d = file->row(s, layer, head);
    const std::vector<float> dense = file->dense_row(s, layer, head);
    for (std::size_t k = 0; k < d.size(); ++k) {
      d[k] -= dense[k];
      vmax = std::max(vmax, std::abs(d[k]));
    }
    diff.push_back(d);
  }
  ASSERT_GT(vmax, 1e-3f) << "clustered attention equals dense: nothing to see";

  // Every key whose difference is at least a quarter of the largest is drawn in the balance map
  // on its side of white; at 1280 px a key is wider than a pixel, so nothing is pooled away.
  const Geometry& rows = g[0];
  ASSERT_LE(rows.keys_per_pixel, 1.0);
  ASSERT_GE(1.0 / rows.rows_per_pixel, 3.0) << "each step gets at least 3 px";
  const luka::viz::Image img = luka::viz::read_png(rows_png);
  int checked = 0, right = 0;
  for (std::int64_t s = 1; s <= steps; ++s)
    for (std::size_t k = 0; k < diff[static_cast<std::size_t>(s - 1)].size(); ++k) {
      const float v = diff[static_cast<std::size_t>(s - 1)][k];
      if (std::abs(v) < vmax / 4) continue;
      const int x = static_cast<int>(std::floor(rows.left + (static_cast<double>(k) + 0.5 - rows.key0) / rows.keys_per_pixel));
      const int y = static_cast<int>(std::floor(rows.top + (static_cast<double>(s) - 0.5 - rows.row0) / rows.rows_per_pixel));
      if (std::abs(x + 0.5 - (rows.left + (static_cast<double>(n) - rows.key0) / rows.keys_per_pixel)) < 1.5) continue;  // the decode-start line
      ASSERT_TRUE(x >= 0 && y >= 0 && x < img.width && y < img.height) << "step " << s << " key " << k;
      ++checked;
      const int i = balance_index(img.pixel(x, y));
      right += v > 0 ? i >= 150 : (i >= 0 && i <= 105);  // |v| >= vmax / 4: index 159 and up, or 96 and down
    }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(right, checked) << "of the strongest differences, only " << right << " of " << checked << " show in their colour";

  // Keys whose difference is under a thousandth of the largest stay white (index 127 or 128).
  int white = 0, zero = 0;
  for (std::int64_t s = 1; s <= steps; ++s)
    for (std::size_t k = 0; k < static_cast<std::size_t>(n); k += 7) {
      if (std::abs(diff[static_cast<std::size_t>(s - 1)][k]) > vmax / 1000) continue;
      const int x = static_cast<int>(std::floor(rows.left + (static_cast<double>(k) + 0.5 - rows.key0) / rows.keys_per_pixel));
      const int y = static_cast<int>(std::floor(rows.top + (static_cast<double>(s) - 0.5 - rows.row0) / rows.rows_per_pixel));
      ++zero;
      const int i = balance_index(img.pixel(x, y));
      white += i >= 126 && i <= 129;
    }
  EXPECT_GT(zero, 0);
  EXPECT_EQ(white, zero);

  // The full map fills the panel: wider than tall, and more than half of the 1280 px window wide.
  EXPECT_GT(g[1].width, 640);
  EXPECT_GT(g[1].height, 300);

  // Under both layouts: the difference's ticked colour bar and the demo's two topics in the legend.
  const auto segments = file->segments();
  std::vector<std::uint32_t> topic_colours;
  for (const auto& seg : segments)
    if (std::find(topic_colours.begin(), topic_colours.end(), hex_colour(seg.colour)) == topic_colours.end()) topic_colours.push_back(hex_colour(seg.colour));
  ASSERT_EQ(topic_colours.size(), 2u);
  expect_footer(img, rows, ColormapId::kBalance, topic_colours);
  expect_footer(luka::viz::read_png(full_png), g[1], ColormapId::kBalance, topic_colours);

  // The Topics tab: the prefill's segment x segment matrix of this head, each cell in the ember
  // colour of the mass `luka inspect --topics` gives for it (rows: query segment).
  const nlohmann::json topics = inspect_json(cap, "--topics --layer 8 --head 1");
  const auto matrix = topics["heads"][0]["prefill"]["matrix"].get<std::vector<std::vector<double>>>();
  const std::size_t S1 = segments.size() + 1;
  ASSERT_EQ(matrix.size(), S1);
  ASSERT_TRUE(drawn[2].count("topics_matrix")) << r.out;
  const Rect m = drawn[2].at("topics_matrix");
  const double cell = (m.x1 - m.x0) / static_cast<double>(S1);
  EXPECT_NEAR(m.y1 - m.y0, cell * static_cast<double>(S1), 0.01);
  const luka::viz::Image topics_img = luka::viz::read_png(topics_png);
  const auto& ember = luka::viz::Colormap::get(ColormapId::kEmber);
  std::set<std::uint32_t> shades;
  for (std::size_t i = 0; i < S1; ++i)
    for (std::size_t j = 0; j < S1; ++j) {
      const auto px = topics_img.pixel(static_cast<int>(m.x0 + cell * (static_cast<double>(j) + 0.5)), static_cast<int>(m.y0 + cell * (static_cast<double>(i) + 0.5)));
      EXPECT_EQ(luka::test::rgb_of(px), luka::test::rgb_of(ember.at(matrix[i][j]))) << "segment " << i << " to segment " << j << ": mass " << matrix[i][j];
      shades.insert(luka::test::rgb_of(px));
    }
  EXPECT_GE(shades.size(), 5u) << "the matrix shows its numbers, not one colour";

  // The Head scores tab: each column coloured from its lowest value (dark) to its highest (light).
  // Of two visible cells of a column whose values `luka inspect --heads` puts a fifth of the
  // column's range apart, the higher is the lighter.
  const nlohmann::json heads = inspect_json(cap, "--heads");
  const luka::viz::Image heads_img = luka::viz::read_png(heads_png);
  const std::map<std::string, std::string> columns = {{"sink", "sink"}, {"entropy", "entropy"}, {"locality", "locality"}, {"prev", "previous_token"},
                                                      {"induction", "induction"}, {"cross-topic", "cross_topic"}};
  int pairs = 0;
  for (const auto& [column, field] : columns) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& h : heads["heads"]) lo = std::min(lo, h["prefill"][field].get<double>()), hi = std::max(hi, h["prefill"][field].get<double>());
    std::vector<std::pair<double, double>> cells;  // (value, luminance) of the visible cells
    for (const auto& h : heads["heads"]) {
      if (h["head"].get<int>() == head) continue;  // the selected row: highlighted over its colours
      const std::string name = "head_score/" + std::to_string(h["layer"].get<int>()) + "/" + std::to_string(h["head"].get<int>()) + "/" + column;
      if (!drawn[3].count(name)) continue;
      const Rect t = drawn[3].at(name);
      cells.push_back({h["prefill"][field].get<double>(), luminance(heads_img.pixel(static_cast<int>(t.x1) + 4, static_cast<int>((t.y0 + t.y1) / 2)))});
    }
    ASSERT_GE(cells.size(), 3u) << column << ": too few rows in view";
    for (const auto& a : cells)
      for (const auto& b : cells)
        if (b.first - a.first > (hi - lo) / 5) {
          ++pairs;
          EXPECT_GT(b.second, a.second) << column << ": " << b.first << " is not lighter than " << a.first;
        }
  }
  EXPECT_GT(pairs, 6);

  // The head grid: nine thumbnails of the effective maps, each a triangle of ember colours on the
  // empty (masked) colour, all different.
  std::set<std::vector<std::uint32_t>> thumbnails;
  const luka::viz::Image grid_img = luka::viz::read_png(grid_png);
  for (int i = 0; i < 9; ++i) {
    const std::string name = "thumbnail/" + std::to_string(i);
    ASSERT_TRUE(drawn[4].count(name)) << r.out;
    const Rect t = drawn[4].at(name);
    const int x0 = static_cast<int>(t.x0) + 2, y0 = static_cast<int>(t.y0) + 2, x1 = static_cast<int>(t.x1) - 2, y1 = static_cast<int>(t.y1) - 2;
    ASSERT_GT(x1 - x0, 40);
    const auto area = static_cast<std::size_t>((x1 - x0) * (y1 - y0));
    const std::size_t in_map = luka::test::count_colormap(grid_img, ColormapId::kEmber, x0, y0, x1, y1);
    const std::size_t empty = luka::test::count_colour(grid_img, 0x18181c, x0, y0, x1, y1);
    EXPECT_GT(in_map, area / 3) << name;
    EXPECT_GT(in_map + empty, area * 97 / 100) << name;
    std::vector<std::uint32_t> pixels;
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) pixels.push_back(luka::test::rgb_of(grid_img.pixel(x, y)));
    thumbnails.insert(pixels);
  }
  EXPECT_EQ(thumbnails.size(), 9u) << "the heads' thumbnails are not all different";
}

// Two captures of one prompt, dense (B) and clustered (A): side by side, then B - A, the sign the
// fidelity table and the timeline use too, with A in the same decode-rows layout beside it. At
// the first decode step both runs attend from the same query (the prefill picked the same token),
// so the right canvas shows the sign of effective(B) - effective(A) at every strong difference,
// and a diverging colour bar of its own is drawn under it.
// The Topics tab's decode leakage against every topic: by default against the topic the question
// asks about (the prompt file's question_topic: A, the bees, though the last segment is B), as
// luka inspect --topics measures it; a click on another topic's choice shows the leakage against
// that one. Both equal the CLI's numbers.
TEST(StudioViews, TopicsShowDecodeLeakageAgainstEveryTopic) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "topics.h5";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "tests/captures/topic_prompt.json").string() +
                         "' --preset clustered --set page_size=8,tail=16 --record 'layers=8' --max-new-tokens 6 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult cli = sh("'" + std::string(LUKA_CLI_PATH) + "' inspect '" + cap.string() + "' --topics --layer 8 --head 1 --json");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const nlohmann::json topics = nlohmann::json::parse(cli.out);
  EXPECT_EQ(topics["decode_topic"], "A");
  const nlohmann::json& by_topic = topics["heads"][0]["decode"]["leakage_by_topic"];
  ASSERT_TRUE(by_topic.contains("A") && by_topic.contains("B")) << cli.out;
  const auto shown = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return std::string(b);
  };
  EXPECT_NE(shown(by_topic["A"].get<double>()), shown(by_topic["B"].get<double>()));
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect 8 1\nshow_topics\nframes 3\nwait_idle 120\nframes 2\nprint_geometry\n"
                             "click topics_against_B\nframes 2\nprint_geometry\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto drawn = drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 2u) << r.out;
  ASSERT_TRUE(drawn[0].count("topics_leakage") && drawn[1].count("topics_leakage")) << r.out;
  EXPECT_EQ(drawn[0].at("topics_leakage").text, shown(by_topic["A"].get<double>()) + " against A");
  EXPECT_EQ(drawn[1].at("topics_leakage").text, shown(by_topic["B"].get<double>()) + " against B");
  EXPECT_TRUE(drawn[0].count("topics_against_A") && drawn[0].count("topics_against_B"));
}

TEST(StudioViews, CompareShowsTwoCapturesAndTheirDifference) {
  REQUIRE_STUDIO();
  const fs::path a = work_dir() / "a_clustered.h5", b = work_dir() / "b_dense.h5";
  ASSERT_NO_FATAL_FAILURE(capture_compare_pair(a, b, "8"));
  const fs::path side = work_dir() / "side.png", diff_png = work_dir() / "a_minus_b.png";
  const std::int64_t n = luka::capture::CaptureFile::open(a)->summary().layout.prompt_tokens;
  const RunResult r = studio("--capture '" + a.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect 8 1\ncompare " + b.string() + "\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " +
                                 side.string() + "\ncompare_difference on\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " +
                                 diff_png.string() + "\nexport " + (work_dir() / "compared.svg").string() +
                                 "\ncompare off\nframes 2\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Geometry> all = geometries(r.out);
  ASSERT_EQ(all.size(), 4u) << r.out;  // A and B, side by side, then A and B - A
  // Exporting while comparing writes the comparison, B - A, as luka export --compare does.
  EXPECT_NE(luka::test::read_file(work_dir() / "compared.svg").find("B − A"), std::string::npos);

  // Side by side: two full maps of the effective attention, A's and B's, with one zoom. The prefill
  // is exact in every mode, so the maps match pixel for pixel down to the decode rows (a few
  // pixels at this zoom, under the step's overlays).
  {
    const Geometry &ga = all[0], &gb = all[1];
    EXPECT_EQ(ga.layout, "full");
    EXPECT_EQ(gb.layout, "full");
    EXPECT_GT(gb.left, ga.left + ga.width);
    EXPECT_DOUBLE_EQ(gb.keys_per_pixel, ga.keys_per_pixel);
    const luka::viz::Image img = luka::viz::read_png(side);
    for (const Geometry* c : {&ga, &gb}) {
      const auto area = static_cast<std::size_t>(c->width * c->height);
      EXPECT_GT(luka::test::count_colormap(img, ColormapId::kEmber, static_cast<int>(c->left), static_cast<int>(c->top), static_cast<int>(c->left + c->width),
                                           static_cast<int>(c->top + c->height)),
                area / 4)
          << "no map at x " << c->left;
    }
    const int dx = static_cast<int>(gb.left - ga.left), decode_y = static_cast<int>(ga.top + (static_cast<double>(n) - ga.row0) / ga.rows_per_pixel);
    // Map pixels only: A's page grid (clustered) blends into the cells it crosses.
    std::size_t same = 0, compared = 0;
    for (int y = static_cast<int>(ga.top) + 30; y < static_cast<int>(ga.top + ga.height); ++y)  // under the A and B titles
      for (int x = static_cast<int>(ga.left); x < static_cast<int>(ga.left + ga.width); ++x) {
        const auto pa = img.pixel(x, y), pb = img.pixel(x + dx, y);
        if (luka::test::colormap_index(pa, ColormapId::kEmber) < 0 || luka::test::colormap_index(pb, ColormapId::kEmber) < 0) continue;
        if (y < decode_y - 2) ++compared, same += pa == pb;
      }
    EXPECT_GT(compared, 10000u);
    EXPECT_GT(same, compared * 99 / 100) << "the prefill parts of the two maps differ";
  }

  const std::vector<Geometry> g(all.begin() + 2, all.end());
  EXPECT_EQ(g[1].layout, "rows");  // B - A picks decode rows
  EXPECT_EQ(g[0].layout, "rows");  // and A follows it
  EXPECT_DOUBLE_EQ(g[0].keys_per_pixel, g[1].keys_per_pixel);  // aligned key for key
  EXPECT_DOUBLE_EQ(g[0].rows_per_pixel, g[1].rows_per_pixel);
  EXPECT_GT(g[1].left, g[0].left + g[0].width);  // to the right of A
  EXPECT_NE(r.out.find("rect difference_colour_bar"), std::string::npos) << "no colour bar for B - A";

  const auto fa = luka::capture::CaptureFile::open(a), fb = luka::capture::CaptureFile::open(b);
  std::vector<float> d = fb->row(1, 8, 1);
  const std::vector<float> ra = fa->row(1, 8, 1);
  ASSERT_EQ(d.size(), ra.size());
  float vmax = 0;
  for (std::size_t k = 0; k < d.size(); ++k) {
    d[k] -= ra[k];
    vmax = std::max(vmax, std::abs(d[k]));
  }
  ASSERT_GT(vmax, 1e-3f);
  const luka::viz::Image img = luka::viz::read_png(diff_png);
  const Geometry& right = g[1];
  int checked = 0, ok = 0;
  // Keys are pooled by the smallest power of two that makes a column at least a pixel wide; a
  // column's colour shows at its centre.
  double pool = 1;
  while (pool < right.keys_per_pixel) pool *= 2;
  for (std::size_t k = 0; k < d.size(); ++k) {
    if (std::abs(d[k]) < vmax / 2) continue;  // the colour scale spans every step shown: stay well inside it
    const double centre = (std::floor(static_cast<double>(k) / pool) + 0.5) * pool;
    const int x = static_cast<int>(std::floor(right.left + (centre - right.key0) / right.keys_per_pixel));
    if (std::abs(x + 0.5 - (right.left + (static_cast<double>(n) - right.key0) / right.keys_per_pixel)) < 1.5) continue;  // the decode-start line
    const int y = static_cast<int>(std::floor(right.top + (0.5 - right.row0) / right.rows_per_pixel));
    ++checked;
    const int i = balance_index(img.pixel(x, y));
    const bool right_colour = d[k] > 0 ? i > 128 : (i >= 0 && i < 127);
    ok += right_colour;
    if (!right_colour) ADD_FAILURE() << "key " << k << " difference " << d[k] << " at pixel " << x << "," << y << ": balance index " << i;
  }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(ok, checked);
}

// Run B from the map's toolbar: a live clustered run, then B = its tokens again under the layers
// panel's config (the same: B - A is zero at every pixel) and under dense (B - A is not); the
// next run closes B, which ran other tokens.
TEST(StudioViews, RunBComparesALiveRunWithItsTokensUnderAnotherConfig) {
  REQUIRE_STUDIO();
  std::string text;  // past the clustered tail, so that pages form
  for (int i = 1; i <= 12; ++i)
    text += "Entry " + std::to_string(i) + ": the keeper lit the lamp at dusk, wound the clockwork and logged the wind. ";
  const fs::path same = work_dir() / "run_b_same.png", dense = work_dir() / "run_b_dense.png";
  const std::string look = "select 13 0\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot ";
  const RunResult r = studio("", "load_model " + kModel.string() + "\nwait_idle 300\npreset clustered\nfree_text " + text +
                                     "\nrun 8 ignore_eos\nwait_idle 300\nmouse 2 2\n"
                                     "compare_run layers panel\nwait_compare 300\nexpect_ui compare clustered 0-29 (A's tokens)\n"
                                     "compare_difference on\n" + look + same.string() +
                                     "\ncompare_run dense\nwait_compare 300\nexpect_ui compare dense (A's tokens)\n" + look + dense.string() +
                                     "\nrun 4\nwait_idle 300\nframes 2\nexpect_ui compare none\nquit\n");  // a new A closes B
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Geometry> g = geometries(r.out);
  ASSERT_EQ(g.size(), 4u) << r.out;  // A and B - A, twice
  for (const auto& [shot, right, zero] : {std::tuple{same, g[1], true}, std::tuple{dense, g[3], false}}) {
    EXPECT_EQ(right.layout, "rows");
    const luka::viz::Image img = luka::viz::read_png(shot);
    std::size_t balance = 0, off_zero = 0;
    for (int y = static_cast<int>(right.top) + 30; y < static_cast<int>(right.top + right.height); ++y)  // under the title
      for (int x = static_cast<int>(right.left); x < static_cast<int>(right.left + right.width); ++x) {
        const int i = balance_index(img.pixel(x, y));
        if (i < 0) continue;
        ++balance;
        off_zero += std::abs(2 * i - 255) > 4;  // beyond the two entries around zero
      }
    EXPECT_GT(balance, 10000u) << shot;
    if (zero) EXPECT_EQ(off_zero, 0u) << shot;
    else EXPECT_GT(off_zero, 1000u) << shot;
  }
}

// Comparing the same two runs (with the dense shadow, layers 0 and 8): the fidelity tab's Δ
// columns say B − A of each metric the captures hold at the step shown (means over the heads, as
// the reader gives them), coloured by sign; the cover timeline's A ≠ B raster marks exactly the
// cells (step, token) whose cover state differs between the two runs, and its hover names both.
TEST(StudioViews, CompareShowsTheFidelityAndCoverTimelineDifferences) {
  REQUIRE_STUDIO();
  const fs::path a = work_dir() / "fa_clustered.h5", b = work_dir() / "fb_dense.h5";
  ASSERT_NO_FATAL_FAILURE(capture_compare_pair(a, b, "0,8", "--set dense_shadow=true"));
  const int layer = 8, head = 1;
  const auto fa = luka::capture::CaptureFile::open(a), fb = luka::capture::CaptureFile::open(b);
  const luka::capture::Summary sa = fa->summary(), sb = fb->summary();
  ASSERT_EQ(sa.complete_steps, 4);
  ASSERT_EQ(sb.complete_steps, 4);

  // The cover rasters as the timeline reads them: [steps][prompt + steps] states, absent past a
  // step's tokens; A ≠ B over the steps both have and the longer token axis.
  const auto raster = [&](const luka::capture::CaptureView& v, const luka::capture::Summary& s) {
    const std::int64_t T = s.layout.prompt_tokens + s.complete_steps;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(T * s.complete_steps), luka::capture::kAbsent);
    for (std::int64_t st = 1; st <= s.complete_steps; ++st) {
      const auto c = v.cover(st, layer, head);
      std::copy_n(c.begin(), std::min<std::int64_t>(static_cast<std::int64_t>(c.size()), T), codes.begin() + (st - 1) * T);
    }
    return std::make_pair(T, codes);
  };
  const auto ra = raster(*fa, sa), rb = raster(*fb, sb);
  const std::int64_t ta = ra.first, tb = rb.first;
  const std::vector<std::uint8_t>&ca = ra.second, &cb = rb.second;
  const std::int64_t steps = std::min(sa.complete_steps, sb.complete_steps), tokens = std::max(ta, tb);
  const auto state = [](std::int64_t T, const std::vector<std::uint8_t>& c, std::int64_t s, std::int64_t t) {
    return t < T ? c[static_cast<std::size_t>(s * T + t)] : std::uint8_t{luka::capture::kAbsent};
  };
  std::int64_t differing = 0;
  std::pair<std::int64_t, std::int64_t> one_differing{-1, -1}, one_same{-1, -1};  // (step, token), 1-based steps
  for (std::int64_t s = 0; s < steps; ++s)
    for (std::int64_t t = 0; t < tokens; ++t) {
      const bool differ = state(ta, ca, s, t) != state(tb, cb, s, t);
      differing += differ;
      if (differ && one_differing.first < 0 && s == 1) one_differing = {s + 1, t};
      if (!differ && one_same.first < 0 && s == 2 && state(ta, ca, s, t) != luka::capture::kAbsent) one_same = {s + 1, t};
    }
  ASSERT_GT(differing, 0);
  ASSERT_LT(differing, steps * tokens);
  ASSERT_GE(one_differing.first, 1);
  ASSERT_GE(one_same.first, 1);
  const auto name = [](std::uint8_t c) { return std::string(luka::viz::kCoverStateColours[std::min<std::size_t>(c, 5)].name); };
  const auto tip = [&](std::pair<std::int64_t, std::int64_t> cell, const char* verdict) {
    const std::int64_t s = cell.first - 1, t = cell.second;
    return "step " + std::to_string(cell.first) + ", token " + std::to_string(t) + ": A " + name(state(ta, ca, s, t)) + ", B " + name(state(tb, cb, s, t)) + " (" + verdict + ")";
  };
  const auto cell_words = [](std::pair<std::int64_t, std::int64_t> c) { return std::to_string(c.first) + " " + std::to_string(c.second); };

  const fs::path fidelity_png = work_dir() / "compare_fidelity.png", timeline_png = work_dir() / "compare_timeline.png";
  const RunResult r = luka::test::run_studio(
      work_dir(), "--capture '" + a.string() + "'",
      "mouse 2 2\nwait_idle 60\nselect " + std::to_string(layer) + " " + std::to_string(head) + "\ncompare " + b.string() +
          "\nshow_fidelity\nframes 3\nwait_idle 60\nframes 3\nscreenshot " + fidelity_png.string() + "\nprint_geometry\nshow_timeline\ntimeline_difference on\nframes 3\nwait_idle 60\nframes 3\nscreenshot " +
          timeline_png.string() + "\nprint_geometry\nhover timeline_diff " + cell_words(one_differing) + "\nframes 3\nexpect_timeline_tooltip " + tip(one_differing, "differ") +
          "\nhover timeline_diff " + cell_words(one_same) + "\nframes 3\nexpect_timeline_tooltip " + tip(one_same, "same") + "\nquit\n",
      "1600x1000");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::vector<std::map<std::string, Rect>> drawn = drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 2u) << r.out;

  // Fidelity: each Δ cell against B − A from the readers, at the step the tab shows (A's last).
  {
    const std::int64_t step = sa.complete_steps;
    const char* keys[] = {"kl", "recall", "top32", "rel_l2", "cover", "refined", "ms"};
    const auto values = [&](const luka::capture::CaptureView& v, int l) {
      const luka::capture::StepMetrics m = v.metrics(step, l);
      std::vector<double> x(7, 0.0);
      const std::size_t H = m.cover_size.size();
      int shadowed = 0;
      for (std::size_t h = 0; h < H; ++h) {
        x[4] += m.cover_size[h];
        x[5] += static_cast<double>(v.refined_pages(step, l, v.summary().layout.heads[h]).size());
        if (std::isnan(m.fidelity[h * 4])) continue;
        ++shadowed;
        for (int c = 0; c < 4; ++c) x[static_cast<std::size_t>(c)] += m.fidelity[h * 4 + static_cast<std::size_t>(c)];
      }
      EXPECT_EQ(shadowed, static_cast<int>(H)) << "the dense shadow ran on every head";
      for (int c = 0; c < 4; ++c) x[static_cast<std::size_t>(c)] /= shadowed;
      x[4] /= static_cast<double>(H);
      x[5] /= static_cast<double>(H);
      x[6] = m.seconds * 1e3;
      return x;
    };
    const luka::viz::Image img = luka::viz::read_png(fidelity_png);
    int checked = 0, positive = 0, negative = 0;
    for (const int l : {0, 8}) {
      const std::vector<double> va = values(*fa, l), vb = values(*fb, l);
      for (std::size_t c = 0; c < 7; ++c) {
        const std::string cell = "fidelity_delta/" + std::to_string(l) + "/" + keys[c];
        ASSERT_TRUE(drawn[0].count(cell)) << "no " << cell << " drawn\n" << r.out;
        const Rect& rc = drawn[0].at(cell);
        const double want = vb[c] - va[c], got = std::stod(rc.text);
        // Drawn with 4 significant digits (ms: 3 decimals).
        EXPECT_NEAR(got, want, c == 6 ? 5.01e-4 : 5.01e-4 * std::abs(want) + 1e-12) << cell << " reads " << rc.text << ": B " << vb[c] << " - A " << va[c];
        // The colour of the sign: glyph pixels tinted warm (B higher) or cool (B lower); none for 0.
        std::size_t warm = 0, cool = 0;
        for (int y = static_cast<int>(rc.y0); y < static_cast<int>(std::ceil(rc.y1)); ++y)
          for (int x = static_cast<int>(rc.x0); x < static_cast<int>(std::ceil(rc.x1)); ++x) {
            const auto p = img.pixel(x, y);
            warm += p.r > 90 && p.r - p.b > 25;
            cool += p.b > 90 && p.b - p.r > 20;
          }
        if (want > 0) {
          ++positive;
          EXPECT_TRUE(warm > 3 && cool == 0) << cell << " (" << rc.text << ") is not in the warm colour: warm " << warm << " cool " << cool;
        } else if (want < 0) {
          ++negative;
          EXPECT_TRUE(cool > 3 && warm == 0) << cell << " (" << rc.text << ") is not in the cool colour: warm " << warm << " cool " << cool;
        } else {
          EXPECT_EQ(warm + cool, 0u) << cell << " is 0 but tinted";
        }
        ++checked;
      }
    }
    EXPECT_EQ(checked, 14);
    EXPECT_GT(positive, 0);
    EXPECT_GT(negative, 0);
  }

  // The timeline: every pixel of the A ≠ B raster whose centre lies inside a cell (a quarter pixel
  // clear of its edges) is the "differs" colour exactly where the two captures' states differ, and
  // every cell has such pixels; that colour is nowhere else but its legend swatch.
  {
    ASSERT_TRUE(drawn[1].count("timeline_diff")) << "no A ≠ B raster drawn\n" << r.out;
    ASSERT_TRUE(drawn[1].count("timeline_differs_swatch")) << r.out;
    const Rect& d = drawn[1].at("timeline_diff");
    const Rect& sw = drawn[1].at("timeline_differs_swatch");
    const double cw = (d.x1 - d.x0) / static_cast<double>(tokens), ch = (d.y1 - d.y0) / static_cast<double>(steps);
    ASSERT_GE(cw, 1.5) << "cells too narrow to sample";
    ASSERT_GE(ch, 1.5);
    const luka::viz::Image img = luka::viz::read_png(timeline_png);
    const std::uint32_t differs = luka::test::rgb_of(luka::viz::kStateDiffersColour);
    // The cell a pixel centre falls in along one axis, or -1 within a quarter pixel of an edge.
    const auto cell_of = [](double centre, double origin, double size, std::int64_t n) -> std::int64_t {
      const double f = (centre - origin) / size;
      const auto i = static_cast<std::int64_t>(std::floor(f));
      if (f < 0 || i >= n || (f - static_cast<double>(i)) * size < 0.25 || (static_cast<double>(i) + 1 - f) * size < 0.25) return -1;
      return i;
    };
    std::vector<int> seen(static_cast<std::size_t>(steps * tokens), 0);
    int wrong = 0;
    for (int y = static_cast<int>(d.y0); y < static_cast<int>(std::ceil(d.y1)); ++y)
      for (int x = static_cast<int>(d.x0); x < static_cast<int>(std::ceil(d.x1)); ++x) {
        const std::int64_t s = cell_of(y + 0.5, d.y0, ch, steps), t = cell_of(x + 0.5, d.x0, cw, tokens);
        if (s < 0 || t < 0) continue;
        ++seen[static_cast<std::size_t>(s * tokens + t)];
        const bool marked = luka::test::rgb_of(img.pixel(x, y)) == differs, differ = state(ta, ca, s, t) != state(tb, cb, s, t);
        if (marked != differ && ++wrong <= 10)
          ADD_FAILURE() << "step " << s + 1 << " token " << t << " (pixel " << x << "," << y << "): states " << name(state(ta, ca, s, t)) << " / "
                        << name(state(tb, cb, s, t)) << ", drawn " << (marked ? "marked" : "unmarked");
      }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), 0) << "cells without a pixel inside";
    std::size_t elsewhere = 0;
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x)
        if (luka::test::rgb_of(img.pixel(x, y)) == differs && !d.contains(x + 0.5, y + 0.5, 1) && !sw.contains(x + 0.5, y + 0.5, 1)) ++elsewhere;
    EXPECT_EQ(elsewhere, 0u) << "the differs colour outside the A ≠ B raster";
  }
}

// The session file: selection, view, zoom and panel split come back as they were saved, and a
// hand-edited split moves the map.
TEST(StudioViews, SessionRestoresSelectionViewZoomAndPanels) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "run.h5", session = work_dir() / "config" / "session.json";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --record 'layers=3,8' --max-new-tokens 4 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult first = studio("--capture '" + cap.string() + "'",
                                 "mouse 2 2\nwait_idle 60\nselect 8 2\nscale linear\nview dense\nlayout full\nframes 3\nzoom 2\nframes 3\n"
                                 "print_geometry\nsave_session " + session.string() + "\nquit\n");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(fs::exists(session));
  ASSERT_TRUE(fs::exists(work_dir() / "config" / "session-prompt.json"));
  const RunResult second = studio("--capture '" + cap.string() + "'",
                                  "mouse 2 2\nwait_idle 60\nload_session " + session.string() +
                                      "\nframes 3\nexpect_ui layer 8\nexpect_ui head 2\nexpect_ui scale linear\nexpect_ui view dense\n"
                                      "print_geometry\nquit\n");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::vector<Geometry> a = geometries(first.out), b = geometries(second.out);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].layout, "full");
  EXPECT_DOUBLE_EQ(b[0].keys_per_pixel, a[0].keys_per_pixel);  // the zoom
  EXPECT_DOUBLE_EQ(b[0].key0, a[0].key0);
  EXPECT_EQ(b[0].left, a[0].left);

  // A narrower left column (the split as a user dragged it) puts the map further left.
  std::string text = luka::test::read_file(session);
  const auto at = text.find("\"left\":");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, text.find_first_of(",}", at) - at, "\"left\": 0.2");
  std::ofstream(session) << text;
  const RunResult third = studio("--capture '" + cap.string() + "'", "mouse 2 2\nwait_idle 60\nload_session " + session.string() +
                                                                          "\nframes 3\nprint_geometry\nquit\n");
  ASSERT_EQ(third.exit_code, 0) << third.err;
  const std::vector<Geometry> d = geometries(third.out);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NEAR(d[0].left - a[0].left, 0.2 * 1280 - 420, 2.0);  // the default left column: 420 px at 1280

  // A corrupt session is an error that names the file, not a crash.
  std::ofstream(session) << "{ not json";
  const RunResult bad = studio("--capture '" + cap.string() + "'", "wait_idle 60\nload_session " + session.string() + "\nquit\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("session.json"), std::string::npos) << bad.err;
}

// A session file of version 1, which stored the settings that are one of a few values as numbers
// (dtype 1, the map's view 1...), restores them: the window shows them, and saved again they are
// words.
TEST(StudioViews, AVersion1SessionFileIsRestoredAndSavedInWords) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)";
  const fs::path old_file = work_dir() / "old" / "session.json", new_file = work_dir() / "new" / "session.json";
  fs::create_directories(old_file.parent_path());
  std::ofstream(old_file) << R"({
  "version": 1, "model_path": "", "dtype": 1, "weights": 1, "threads": 3, "device": "cpu", "chat": true,
  "free_text_mode": 1, "free_text": "Tides and bread", "max_new_tokens": 7,
  "sampling": {"temperature": 0.5, "top_k": 4, "top_p": 0.9, "seed": 11},
  "selection": {"layer": 8, "head": 2, "step": 3},
  "map": {"view": 1, "log_scale": false, "layout": 1, "mode": 2, "overlays": false, "x0": 5, "y0": 6, "tokens_per_pixel": 0.5,
          "tokens_per_pixel_y": 0.25, "rows_x0": 0, "rows_keys_per_pixel": 0, "rows_y0": 0, "row_px": 0, "rows_follow": true},
  "panels": {"left": 0.3, "prompt": 0.5, "map": 0.7},
  "prompt_file": ""
})";
  const RunResult r = studio("", "load_session " + old_file.string() +
                                     "\nframes 2\nexpect_ui layer 8\nexpect_ui head 2\nexpect_ui view dense\nexpect_ui scale linear\nexpect_ui dtype bf16\n"
                                     "expect_ui layout full\nexpect_ui grid layers\nexpect_ui prompt free_text\nsave_session " + new_file.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  std::ifstream in(new_file);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["dtype"], "bf16");
  EXPECT_EQ(j["weights"], "quantized");
  EXPECT_EQ(j["prompt_mode"], "free_text");
  EXPECT_EQ(j["threads"], 3);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["chat"], true);
  EXPECT_EQ(j["free_text"], "Tides and bread");
  EXPECT_EQ(j["max_new_tokens"], 7);
  EXPECT_EQ(j["sampling"]["seed"], 11);
  EXPECT_EQ(j["selection"]["step"], 3);
  EXPECT_EQ(j["map"]["view"], "dense");
  EXPECT_EQ(j["map"]["layout"], "full");
  EXPECT_EQ(j["map"]["mode"], "layers");
  EXPECT_EQ(j["map"]["log_scale"], false);
  EXPECT_EQ(j["map"]["overlays"], false);
  EXPECT_DOUBLE_EQ(j["map"]["tokens_per_pixel"].get<double>(), 0.5);
  EXPECT_NEAR(j["panels"]["left"].get<double>(), 0.3, 1e-6);
}

TEST(StudioViews, TokenSearchJumpsToEachMatchInTurn) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "dense.h5";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --record 'layers=3' --max-new-tokens 3 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // The matches of "the", any case, straight from the capture's token pieces.
  std::vector<std::int64_t> matches;
  const auto file = luka::capture::CaptureFile::open(cap);
  const auto tokens = file->tokens();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string p = tokens[i].piece;
    for (char& ch : p) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (p.find("the") != std::string::npos) matches.push_back(static_cast<std::int64_t>(i));
  }
  ASSERT_GE(matches.size(), 3u);
  // The emoji glyphs beyond U+FFFF are in the atlas, at the private-use code points token labels use.
  const fs::path found_png = work_dir() / "found.png", unmarked_png = work_dir() / "unmarked.png", track_png = work_dir() / "track.png";
  std::string script = "mouse 2 2\nwait_idle 60\nexpect_glyph E000\nshow_timeline\nframes 2\n";
  for (std::size_t i = 0; i < 3; ++i) script += "search THE\nexpect_found " + std::to_string(matches[i]) + "\nframes 2\n";
  // The third match marked, then no match (the map stays where the search put it), then tracked tokens.
  script += "frames 2\nscreenshot " + found_png.string() + "\nprint_geometry\nsearch no-such-token-here\nexpect_found -1\nframes 3\nscreenshot " +
            unmarked_png.string() + "\n";
  // Tracking "Skerry": the tokens that cover its first occurrence in the capture's text.
  std::string text;
  std::vector<std::size_t> starts;
  for (const auto& t : tokens) {
    starts.push_back(text.size());
    text += t.piece;
  }
  const std::size_t at = text.find("Skerry");
  ASSERT_NE(at, std::string::npos);
  const auto first = static_cast<std::int64_t>(std::upper_bound(starts.begin(), starts.end(), at) - starts.begin()) - 1;
  const auto last = static_cast<std::int64_t>(std::upper_bound(starts.begin(), starts.end(), at + 5) - starts.begin()) - 1;
  script += "track text:Skerry\nexpect_track " + std::to_string(first) + " " + std::to_string(last) + "\nframes 3\nscreenshot " + track_png.string() +
            "\nprint_geometry\nquit\n";
  const RunResult r = studio("--capture '" + cap.string() + "'", script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Geometry> g = geometries(r.out);
  const auto drawn = drawn_rects(r.out);
  ASSERT_EQ(g.size(), 2u) << r.out;
  ASSERT_EQ(drawn.size(), 2u);
  EXPECT_EQ(g[0].layout, "full");
  EXPECT_DOUBLE_EQ(g[1].key0, g[0].key0);  // the same window in every shot
  const Geometry& m = g[0];
  const Rect canvas{m.left, m.top, m.left + m.width, m.top + m.height};
  const auto column = [&](double a, double b) {  // tokens [a, b) as keys across the map
    return Rect{m.left + (a - m.key0) / m.keys_per_pixel, canvas.y0, m.left + (b - m.key0) / m.keys_per_pixel, canvas.y1};
  };
  const auto row = [&](double a, double b) { return Rect{canvas.x0, m.top + (a - m.row0) / m.rows_per_pixel, canvas.x1, m.top + (b - m.row0) / m.rows_per_pixel}; };
  const luka::viz::Image found = luka::viz::read_png(found_png), unmarked = luka::viz::read_png(unmarked_png), tracked = luka::viz::read_png(track_png);

  // The found token's row and column are outlined over the whole map, and nothing else changes.
  const auto f = static_cast<double>(matches[2]);
  const MarkDiff search = mark_diff(found, unmarked, canvas, {column(f, f + 1), row(f, f + 1)});
  EXPECT_EQ(search.outside, 0u) << "pixels changed away from the found token's row and column";
  EXPECT_GT(search.coverage[0], 0.9) << "the found token's column";
  EXPECT_GT(search.coverage[1], 0.9) << "the found token's row";

  // Tracked tokens: their columns and (prompt tokens) rows on the map, their columns on the cover
  // timeline, over its whole height.
  const auto a = static_cast<double>(first), b = static_cast<double>(last + 1);
  const MarkDiff map_track = mark_diff(tracked, unmarked, canvas, {column(a, b), row(a, b)});
  EXPECT_EQ(map_track.outside, 0u);
  EXPECT_GT(map_track.coverage[0], 0.9) << "the tracked tokens' columns on the map";
  EXPECT_GT(map_track.coverage[1], 0.9) << "the tracked tokens' rows on the map";
  ASSERT_TRUE(drawn[1].count("timeline")) << r.out;
  const Rect tl = drawn[1].at("timeline");
  const auto tokens_shown = static_cast<double>(file->summary().layout.prompt_tokens + file->summary().complete_steps);
  const double per_token = (tl.x1 - tl.x0) / tokens_shown;
  const MarkDiff timeline_track = mark_diff(tracked, unmarked, tl, {Rect{tl.x0 + a * per_token, tl.y0, tl.x0 + b * per_token, tl.y1}});
  EXPECT_EQ(timeline_track.outside, 0u);
  EXPECT_GT(timeline_track.coverage[0], 0.9) << "the tracked tokens' columns on the cover timeline";
}

// Hovering: a generated token in the output panel lights up the decode row that produced it (and
// no other), and a decode row of the map shows that step's cover in words, the counts those of
// the capture.
TEST(StudioViews, HoveringAGeneratedTokenMarksItsRowAndADecodeRowShowsItsCover) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "clustered.h5", plain_png = work_dir() / "plain.png", row_png = work_dir() / "row.png",
                 tip_png = work_dir() / "tooltip.png";
  const int layer = 8, head = 1, marked = 4, hovered = 5;
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset clustered --record 'layers=8' --max-new-tokens 8 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const auto file = luka::capture::CaptureFile::open(cap);
  const std::int64_t n = file->summary().layout.prompt_tokens;
  ASSERT_EQ(file->summary().complete_steps, 7);

  // The cover of step `hovered`, counted from the capture.
  const CoverCounts counts = count_cover(*file, hovered, layer, head);
  const std::string first = "step " + std::to_string(hovered) + ", layer " + std::to_string(layer) + ": clustered over " + std::to_string(counts.tokens) + " tokens";
  const std::string summarized = std::to_string(counts.summarized_pages) + " pages summarized (" + std::to_string(counts.summarized) + " tokens)";
  const std::string refined = std::to_string(counts.refined) + " tokens in refined pages";
  const std::string raw = std::to_string(counts.raw) + " raw tokens (the tail)";
  ASSERT_GT(counts.summarized_pages, 0);

  // Token n + s was chosen at decode step s (its query is token n + s - 1).
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect " + std::to_string(layer) + " " + std::to_string(head) +
                                 "\nlayout rows\nframes 3\nwait_idle 60\nframes 2\nscreenshot " + plain_png.string() + "\nprint_geometry\nhover output " +
                                 std::to_string(n + marked) + "\nframes 3\nscreenshot " + row_png.string() + "\nprint_geometry\nhover step " +
                                 std::to_string(hovered) + "\nframes 3\nexpect_tooltip decode step " + std::to_string(hovered) + "\nexpect_tooltip " + first +
                                 "\nexpect_tooltip " + summarized + "\nexpect_tooltip " + refined + "\nexpect_tooltip " + raw + "\nscreenshot " +
                                 tip_png.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::vector<Geometry> g = geometries(r.out);
  ASSERT_EQ(g.size(), 2u) << r.out;
  ASSERT_EQ(g[0].layout, "rows");
  EXPECT_DOUBLE_EQ(g[1].row0, g[0].row0);
  const Geometry& m = g[0];
  // Step `marked`'s row: [top of step marked, top of step marked + 1).
  const Rect band{m.left, m.top + (marked - 1 - m.row0) / m.rows_per_pixel, m.left + m.width, m.top + (marked - m.row0) / m.rows_per_pixel};
  ASSERT_GE(band.y1 - band.y0, 3.0);
  const luka::viz::Image plain = luka::viz::read_png(plain_png), lit = luka::viz::read_png(row_png);
  const MarkDiff d = mark_diff(lit, plain, Rect{m.left, m.top, m.left + m.width, m.top + m.height}, {band});
  EXPECT_EQ(d.outside, 0u) << "the map changed outside step " << marked << "'s row";
  EXPECT_GT(d.coverage[0], 0.95) << "step " << marked << "'s row is not marked across the map";
  // Lit: no channel darker, and the row's pixels brighter on the whole.
  std::size_t brighter = 0, darker = 0, pixels = 0;
  for (int y = static_cast<int>(band.y0) + 1; y < static_cast<int>(band.y1) - 1; ++y)
    for (int x = static_cast<int>(band.x0); x < static_cast<int>(band.x1); ++x) {
      const auto p = plain.pixel(x, y), q = lit.pixel(x, y);
      ++pixels;
      darker += q.r < p.r || q.g < p.g || q.b < p.b;
      brighter += luminance(q) > luminance(p) + 10;
    }
  EXPECT_EQ(darker, 0u);
  EXPECT_GT(brighter, pixels * 9 / 10);
}

// The marked row follows the hover and nothing else: hovering a generated token while the head
// grid is shown, then moving away, leaves no token marked (the map used to skip clearing it in the
// grid and the strip, so the row stayed lit when the map came back).
TEST(StudioViews, AHoverInTheHeadGridDoesNotStickToTheMap) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "clustered.h5", plain_png = work_dir() / "plain.png", back_png = work_dir() / "back.png";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --preset clustered --record 'layers=8' --max-new-tokens 8 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::int64_t token = luka::capture::CaptureFile::open(cap)->summary().layout.prompt_tokens + 4;
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect 8 1\nlayout rows\nframes 3\nwait_idle 60\nframes 2\nscreenshot " + plain_png.string() +
                                 "\nprint_geometry\ngrid heads\nframes 3\nhover output " + std::to_string(token) + "\nframes 3\nexpect_ui hover " +
                                 std::to_string(token) + "\nmouse 2 2\nframes 3\nexpect_ui hover none\ngrid off\nscreenshot " + back_png.string() +
                                 "\nprint_geometry\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::vector<Geometry> g = geometries(r.out);
  ASSERT_EQ(g.size(), 2u) << r.out;
  ASSERT_EQ(g[0].layout, "rows");
  EXPECT_DOUBLE_EQ(g[1].row0, g[0].row0);
  // The map's first frame back from the grid is the map as it was: no row lit.
  const Rect canvas{g[0].left, g[0].top, g[0].left + g[0].width, g[0].top + g[0].height};
  const MarkDiff d = mark_diff(luka::viz::read_png(back_png), luka::viz::read_png(plain_png), canvas, {});
  EXPECT_EQ(d.outside, 0u) << "the map changed after a hover in the head grid";
}

// Background work slower than 0.2 s is listed in the window's corner with its progress while it
// waits or runs (here thumbnails, held by hold_tasks), and the list is gone once it is done.
TEST(StudioViews, BackgroundWorkIsListedWhileItRunsAndGoneWhenDone) {
  REQUIRE_STUDIO();
  const fs::path cap = work_dir() / "dense.h5", held_png = work_dir() / "held.png", done_png = work_dir() / "done.png";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                         "' --record 'layers=8' --max-new-tokens 3 --quiet --out '" + cap.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "mouse 2 2\nwait_idle 60\nframes 3\nhold_tasks on\ngrid heads\nexpect_task thumbnails of layer 8's heads\nframes 2\n"
                             "screenshot " + held_png.string() + "\nprint_geometry\nhold_tasks off\nframes 3\nscreenshot " + done_png.string() +
                                 "\nprint_geometry\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto drawn = drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 2u) << r.out;
  ASSERT_TRUE(drawn[0].count("task_list")) << r.out;
  EXPECT_FALSE(drawn[1].count("task_list")) << "the list stays after the work is done";
  EXPECT_TRUE(drawn[1].count("thumbnail/0")) << "the thumbnails did not arrive";
  // In the window's bottom-right corner, and drawn: it differs from the frame without it.
  const Rect list = drawn[0].at("task_list");
  EXPECT_GT(list.x0, 640);
  EXPECT_GT(list.y0, 400);
  EXPECT_LE(list.x1, 1280);
  EXPECT_LE(list.y1, 800);
  const MarkDiff d = mark_diff(luka::viz::read_png(held_png), luka::viz::read_png(done_png), list, {});
  EXPECT_GT(d.outside, static_cast<std::size_t>((list.x1 - list.x0) * (list.y1 - list.y0) / 4));
}

// A live prefill held part way (hold_prefill): the map shows a "computing" overlay with the
// prefill's percentage, the time left and a bar filled to the fraction done, not a map of zeros;
// once the run goes on, the overlay is gone.
TEST(StudioViews, PrefillShowsItsProgressOverTheMapWhileItComputes) {
  REQUIRE_STUDIO();
  const fs::path held_png = work_dir() / "held.png", done_png = work_dir() / "done.png";
  const RunResult r = studio("", "load_model " + kModel.string() + "\nwait_idle 300\nmouse 2 2\nhold_prefill 0.3\nrun 3\nwait_prefill_held 300\nframes 3\n"
                                 "expect_overlay rows fill in as layers finish\nexpect_overlay s left\nprint_status\nscreenshot " + held_png.string() +
                                 "\nprint_geometry\nrelease_prefill\nwait_idle 300\nexpect_steps 2\nframes 3\nscreenshot " + done_png.string() +
                                 "\nprint_geometry\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  // The status while held: the fraction (at or past 0.3, not done) and what the overlay says.
  const std::string prefix = "status state running prefill_fraction ";
  const auto at = r.out.find(prefix);
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream status(r.out.substr(at + prefix.size()));
  double fraction = 0;
  std::string held_word, held;
  status >> fraction >> held_word >> held;
  EXPECT_GE(fraction, 0.3);
  EXPECT_LT(fraction, 1.0);
  EXPECT_EQ(held, "1");
  const std::string percent = std::to_string(static_cast<int>(std::lround(100 * fraction))) + "%, about ";
  EXPECT_NE(r.out.find(percent), std::string::npos) << "the status gives the percentage and the time left: " << r.out;

  const auto drawn = drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 2u);
  ASSERT_TRUE(drawn[0].count("prefill_bar")) << r.out;
  EXPECT_FALSE(drawn[1].count("prefill_bar")) << "the overlay stays after the prefill";
  // The bar: filled (light grey) from its left end to the fraction done, the box's black after it.
  const Rect bar = drawn[0].at("prefill_bar");
  const int y = static_cast<int>((bar.y0 + bar.y1) / 2), fill = static_cast<int>(bar.x0 + fraction * (bar.x1 - bar.x0));
  ASSERT_GT(bar.x1 - bar.x0, 200);
  const luka::viz::Image held_img = luka::viz::read_png(held_png), done_img = luka::viz::read_png(done_png);
  const std::uint32_t filled = 0xe6e6eb;  // IM_COL32(230, 230, 235)
  EXPECT_EQ(luka::test::count_colour(held_img, filled, static_cast<int>(bar.x0) + 1, y, fill - 1, y + 1), static_cast<std::size_t>(fill - 2 - static_cast<int>(bar.x0)));
  EXPECT_EQ(luka::test::count_colour(held_img, filled, fill + 2, y, static_cast<int>(bar.x1), y + 1), 0u);
  const auto p = held_img.pixel(fill + 4, y);
  EXPECT_LT(luminance(p), 16) << "the overlay's box is dark behind the bar";
  EXPECT_EQ(luka::test::count_colour(done_img, filled, static_cast<int>(bar.x0), y, fill, y + 1), 0u) << "the bar stays after the prefill";
}

// A calibration given to the Studio goes into the run's capture and the Head scores tab shows it
// (source: calibration), as it does again after the run is saved and the file opened; a
// calibration of other layers and heads stays out of a run.
TEST(StudioViews, HeadScoresShowTheCalibrationOfARunAndOfItsSavedCapture) {
  REQUIRE_STUDIO();
  const fs::path cal = work_dir() / "calib.json", saved = work_dir() / "calibrated.h5", other = work_dir() / "other.json";
  const RunResult c = sh("'" + std::string(LUKA_CLI_PATH) + "' calibrate --prompt 'The lighthouse keeper wrote in his log that the fog rolled in "
                         "from the sound after midnight.' --max-tokens 20 --prompt-tokens 12 --candidates 'lined:rho=0.25;clustered:top_k=1' --set window=4,page_size=4,tail=4 "
                         "--quiet --out '" + cal.string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  std::ifstream in(cal);
  const nlohmann::json file = nlohmann::json::parse(in);
  const int rows = file["num_layers"].get<int>() * file["num_heads"].get<int>();
  // The same numbers for one layer fewer: another model's.
  nlohmann::json shorter = file;
  shorter["num_layers"] = file["num_layers"].get<int>() - 1;
  shorter["layers"].erase(shorter["layers"].size() - 1);
  std::ofstream(other) << shorter.dump();

  const std::string shot = (work_dir() / "calibration.png").string();
  const RunResult r = studio("", "load_model " + kModel.string() + "\nwait_idle 300\nshow_head_scores\nhead_scores_source calibration\n"
                                 "calibration " + other.string() + "\nfree_text The capital of France is\nrun 2\nwait_idle 300\nframes 3\n"
                                 "expect_ui calibration none\n"
                                 "calibration " + cal.string() + "\nrun 3\nwait_idle 300\nframes 3\nexpect_calibration " + std::to_string(rows) +
                                 " 2\nexpect_ui calibration attached\nscreenshot " + shot + "\nprint_geometry\nsave_capture " + saved.string() +
                                 "\nopen_capture " + saved.string() + "\nwait_idle 120\nframes 3\nexpect_calibration " + std::to_string(rows) +
                                 " 2\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto f = luka::capture::CaptureFile::open(saved);
  EXPECT_EQ(nlohmann::json::parse(f->summary().manifest.calibration), file) << "the saved capture holds the file's values";
  EXPECT_TRUE(fs::exists(shot));
  // The calibration table's caption wraps inside the 1280-pixel window.
  const auto drawn = drawn_rects(r.out);
  ASSERT_EQ(drawn.size(), 1u) << r.out;
  ASSERT_TRUE(drawn[0].count("calibration_caption")) << r.out;
  EXPECT_LE(drawn[0].at("calibration_caption").x1, 1280.0);
}

}  // namespace
