// The Studio's map layouts under Xvfb, checked pixel by pixel against the capture they show: the
// decode-rows view of a clustered run with the dense shadow draws each step's difference where
// the capture's rows differ, with the sign of the difference; the full map fills its panel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/studio_script.h"
#include "viz/colormap.h"
#include "viz/png.h"

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

// The balance colormap's index of a pixel, or -1 when the pixel is not one of its entries.
int balance_index(const luka::viz::Rgb& p) {
  const auto& table = luka::viz::Colormap::get(luka::viz::ColormapId::kBalance).table();
  for (int i = 0; i < 256; ++i)
    if (table[static_cast<std::size_t>(i)] == p) return i;
  return -1;
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
  const RunResult r = studio("--capture '" + cap.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect " + std::to_string(layer) + " " + std::to_string(head) +
                                 "\nview difference\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " + rows_png.string() +
                                 "\nlayout full\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " + full_png.string() +
                                 // The analysis tabs: one recorded layer of 9 heads in the head-score table.
                                 "\nshow_topics\nframes 3\nwait_idle 120\nshow_head_scores\nframes 3\nwait_idle 120\nframes 2\nexpect_head_scores 9\n"
                                 "screenshot " + (work_dir() / "heads.png").string() + "\ngrid heads\nframes 3\nwait_idle 60\nframes 2\nscreenshot " +
                                 (work_dir() / "grid.png").string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Geometry> g = geometries(r.out);
  ASSERT_EQ(g.size(), 2u) << r.out;
  EXPECT_EQ(g[0].layout, "rows");
  EXPECT_EQ(g[1].layout, "full");

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
}

// Two captures of one prompt, dense (B) and clustered (A): side by side, then A - B. At the
// first decode step both runs attend from the same query (the prefill picked the same token), so
// the right canvas shows the sign of effective(A) - effective(B) at every strong difference.
TEST(StudioViews, CompareShowsTwoCapturesAndTheirDifference) {
  REQUIRE_STUDIO();
  const fs::path a = work_dir() / "a_clustered.h5", b = work_dir() / "b_dense.h5";
  const std::string base = "'" + std::string(LUKA_CLI_PATH) + "' capture --prompt-file '" + (kRoot / "assets/prompts/demo.json").string() +
                           "' --record 'layers=8' --max-new-tokens 5 --quiet ";
  ASSERT_EQ(sh(base + "--preset clustered --out '" + a.string() + "'").exit_code, 0);
  ASSERT_EQ(sh(base + "--preset dense --out '" + b.string() + "'").exit_code, 0);
  const fs::path side = work_dir() / "side.png", diff_png = work_dir() / "a_minus_b.png";
  const std::int64_t n = luka::capture::CaptureFile::open(a)->summary().layout.prompt_tokens;
  const RunResult r = studio("--capture '" + a.string() + "'",
                             "mouse 2 2\nwait_idle 60\nselect 8 1\ncompare " + b.string() + "\nframes 3\nwait_idle 60\nframes 2\nscreenshot " +
                                 side.string() + "\ncompare_difference on\nframes 3\nwait_idle 60\nframes 2\nprint_geometry\nscreenshot " +
                                 diff_png.string() + "\ncompare off\nframes 2\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Geometry> g = geometries(r.out);
  ASSERT_EQ(g.size(), 2u) << r.out;
  EXPECT_EQ(g[1].layout, "rows");  // A - B picks decode rows
  EXPECT_GT(g[1].left, g[0].left + g[0].width);  // to the right of A

  const auto fa = luka::capture::CaptureFile::open(a), fb = luka::capture::CaptureFile::open(b);
  std::vector<float> d = fa->row(1, 8, 1);
  const std::vector<float> rb = fb->row(1, 8, 1);
  ASSERT_EQ(d.size(), rb.size());
  float vmax = 0;
  for (std::size_t k = 0; k < d.size(); ++k) {
    d[k] -= rb[k];
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
  std::string script = "mouse 2 2\nwait_idle 60\nexpect_glyph E000\nframes 2\n";
  for (std::size_t i = 0; i < 3; ++i) script += "search THE\nexpect_found " + std::to_string(matches[i]) + "\nframes 2\n";
  script += "search no-such-token-here\nexpect_found -1\n";
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
  script += "track text:Skerry\nexpect_track " + std::to_string(first) + " " + std::to_string(last) + "\nshow_timeline\nframes 3\nscreenshot " +
            (work_dir() / "track.png").string() + "\nquit\n";
  const RunResult r = studio("--capture '" + cap.string() + "'", script);
  EXPECT_EQ(r.exit_code, 0) << r.err;
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
                                 " 2\nexpect_ui calibration attached\nscreenshot " + shot + "\nsave_capture " + saved.string() +
                                 "\nopen_capture " + saved.string() + "\nwait_idle 120\nframes 3\nexpect_calibration " + std::to_string(rows) +
                                 " 2\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto f = luka::capture::CaptureFile::open(saved);
  EXPECT_EQ(nlohmann::json::parse(f->summary().manifest.calibration), file) << "the saved capture holds the file's values";
  EXPECT_TRUE(fs::exists(shot));
}

}  // namespace
