// luka eval niah and luka eval ruler on a tiny random Qwen3 checkpoint with the real Qwen3
// tokenizer and Emma as the haystack: the needle grid's figure shows in every cell the colour of
// the table's score (scores set by hand, then tabulated by the command), the table is the mean of
// the records recomputed here, a run stopped part-way (and with a cut last line) resumes to the
// results of an uninterrupted one, each sample can be recorded as a capture with its needle as a
// segment, and bad options exit 2 with one line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "viz/png.h"
#include "viz/score_grid.h"

namespace fs = std::filesystem;
using luka::test::read_file;
using luka::test::RunResult;
using nlohmann::json;

namespace {

const fs::path kCheckpoint = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-tok";
const fs::path kEmma = fs::path(LUKA_SHARED_DATA) / "texts" / "emma.txt";

#define REQUIRE_INPUTS()                                                                  \
  if (!fs::exists(kCheckpoint / "config.json") || !fs::exists(kEmma))                     \
  GTEST_SKIP() << "needs the qwen3-tok checkpoint at " << kCheckpoint << " and " << kEmma \
               << " (the checkpoints fixture makes it from ../shared/data, which is absent)"

RunResult run_luka(const std::vector<std::string>& args, const fs::path& dir) {
  return luka::test::run_program(LUKA_CLI_PATH, args, dir);
}

// The checkpoint's context is 256 tokens: samples of 128 to 224 tokens, 3 new tokens.
std::vector<std::string> common_args(const fs::path& out, const std::string& lengths) {
  return {"--model", kCheckpoint.string(), "--lengths", lengths, "--presets", "dense,clustered",
          "--max-new-tokens", "3", "--device", "cpu", "--threads", "1", "--quiet", "--out", out.string()};
}

std::vector<std::string> niah_args(const fs::path& out, const std::string& lengths) {
  std::vector<std::string> args = {"eval", "niah", "--haystack", kEmma.string(), "--depths", "0,50,100"};
  for (const std::string& a : common_args(out, lengths)) args.push_back(a);
  return args;
}

std::vector<std::string> ruler_args(const fs::path& out, const std::string& lengths) {
  std::vector<std::string> args = {"eval", "ruler", "--essay", kEmma.string(), "--tasks",
                                   "niah_single_2,niah_multivalue,vt", "--samples", "2"};
  for (const std::string& a : common_args(out, lengths)) args.push_back(a);
  return args;
}

std::vector<json> lines(const fs::path& f) {
  std::vector<json> out;
  const std::string text = read_file(f);
  for (std::size_t at = 0, eol; (eol = text.find('\n', at)) != std::string::npos; at = eol + 1)
    out.push_back(json::parse(text.substr(at, eol - at)));
  return out;
}

// Records keyed by what identifies a sample, without the timings.
std::map<std::string, json> by_key(const std::vector<json>& records) {
  std::map<std::string, json> out;
  for (json r : records) {
    r.erase("seconds");
    out[r["preset"].get<std::string>() + "/" + r["task"].get<std::string>() + "/" +
        std::to_string(r["length"].get<int>()) + "/" + (r.contains("depth") ? r["depth"].dump() : "-") + "/" +
        std::to_string(r["sample"].get<int>())] = r;
  }
  return out;
}

}  // namespace

TEST(EvalNiahCli, TheFiguresCellsAreTheTablesScores) {
  REQUIRE_INPUTS();
  const fs::path dir = luka::test::test_dir("eval_niah");
  const fs::path out = dir / "run";
  const RunResult first = run_luka(niah_args(out, "128,192"), dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // Scores set by hand (0, 0.25, ..., 1 in turn), so the cells differ; the command tabulates them.
  std::vector<json> records = lines(out / "results.jsonl");
  ASSERT_EQ(records.size(), 2u * 2u * 3u);
  std::map<std::tuple<std::string, int, double>, std::pair<double, int>> want;  // (preset, length, depth) -> sum, n
  std::ofstream rewrite(out / "results.jsonl", std::ios::trunc);
  for (std::size_t i = 0; i < records.size(); ++i) {
    records[i]["score"] = static_cast<double>(i % 5) / 4.0;
    rewrite << records[i].dump() << "\n";
    auto& w = want[{records[i]["preset"], records[i]["length"], records[i]["depth"]}];
    w.first += records[i]["score"].get<double>();
    ++w.second;
  }
  rewrite.close();
  const RunResult again = run_luka(niah_args(out, "128,192"), dir);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(lines(out / "results.jsonl").size(), records.size()) << "nothing was left to answer";

  const json table = json::parse(read_file(out / "summary.json"))["table"];
  ASSERT_EQ(table["cells"].size(), want.size());
  std::map<std::tuple<std::string, int, double>, double> cells;
  for (const json& c : table["cells"]) {
    const auto key = std::make_tuple(c["preset"].get<std::string>(), c["length"].get<int>(), c["depth"].get<double>());
    cells[key] = c["score"].get<double>();
    ASSERT_TRUE(want.count(key));
    EXPECT_NEAR(cells[key], 100.0 * want[key].first / want[key].second, 1e-9);
  }
  // The CSV holds the same cells.
  std::istringstream csv(read_file(out / "table.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "preset,length,depth,score,samples");
  int csv_rows = 0;
  while (std::getline(csv, line)) {
    std::string preset, length, depth, score;
    std::istringstream row(line);
    std::getline(row, preset, ',');
    std::getline(row, length, ',');
    std::getline(row, depth, ',');
    std::getline(row, score, ',');
    EXPECT_NEAR(std::stod(score), cells.at({preset, std::stoi(length), std::stod(depth)}), 1e-3) << line;
    ++csv_rows;
  }
  EXPECT_EQ(csv_rows, static_cast<int>(cells.size()));

  // The figure: panels in --presets order, depths down, lengths across; a cell's corner (away from
  // its printed number) has the colour of its score. The layout depends on the counts only.
  luka::viz::ScoreGrid grid;
  grid.row_labels = {"0", "50", "100"};
  grid.col_labels = {"128", "192"};
  grid.panels.resize(2, {"", std::vector<float>(6, 0.0f)});
  grid.columns = 2;
  const luka::viz::Image png = luka::viz::read_png(out / "niah-grid.png");
  ASSERT_EQ(png.width, static_cast<int>(std::lround(2 * luka::viz::score_grid_width(grid))));
  const std::vector<std::string> presets = {"dense", "clustered"};
  const std::vector<int> lengths = {128, 192};
  const std::vector<double> depths = {0, 50, 100};
  for (std::size_t p = 0; p < 2; ++p)
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t c = 0; c < 2; ++c) {
        const luka::viz::GridRect cell = luka::viz::score_grid_cell(grid, p, r, c);
        const double value = cells.at({presets[p], lengths[c], depths[r]});
        const luka::viz::Rgb want_colour = luka::viz::score_grid_colour(grid, static_cast<float>(value));
        const luka::viz::Rgb got = png.pixel(static_cast<int>(2 * (cell.x + 3)), static_cast<int>(2 * (cell.y + 3)));
        EXPECT_NEAR(got.r, want_colour.r, 2) << presets[p] << " depth " << depths[r] << " length " << lengths[c];
        EXPECT_NEAR(got.g, want_colour.g, 2) << presets[p] << " depth " << depths[r] << " length " << lengths[c];
        EXPECT_NEAR(got.b, want_colour.b, 2) << presets[p] << " depth " << depths[r] << " length " << lengths[c];
      }
  EXPECT_TRUE(fs::exists(out / "niah-grid.svg"));
  EXPECT_TRUE(fs::exists(out / "niah-grid.pdf"));
}

TEST(EvalNiahCli, AResumedRunEqualsAnUninterruptedOne) {
  REQUIRE_INPUTS();
  const fs::path dir = luka::test::test_dir("eval_niah");
  for (const bool ruler : {false, true}) {
    SCOPED_TRACE(ruler ? "ruler" : "niah");
    const auto args = [&](const fs::path& out, const std::string& lengths) {
      return ruler ? ruler_args(out, lengths) : niah_args(out, lengths);
    };
    const fs::path whole = dir / (ruler ? "ruler-whole" : "niah-whole"),
                   parts = dir / (ruler ? "ruler-parts" : "niah-parts");
    // Lengths the checkpoint's 256-token context holds with each suite's question.
    const std::string first = ruler ? "192" : "128", both = ruler ? "192,224" : "128,192";
    const RunResult a = run_luka(args(whole, both), dir);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    // Stopped after one length, its last line cut by a kill.
    const RunResult b1 = run_luka(args(parts, first), dir);
    ASSERT_EQ(b1.exit_code, 0) << b1.err;
    std::ofstream(parts / "results.jsonl", std::ios::app) << "{\"preset\":\"dense\",\"task\":\"ni";
    const RunResult b2 = run_luka(args(parts, both), dir);
    ASSERT_EQ(b2.exit_code, 0) << b2.err;
    const auto want = by_key(lines(whole / "results.jsonl"));
    const auto got = by_key(lines(parts / "results.jsonl"));
    EXPECT_EQ(got.size(), want.size());
    EXPECT_EQ(got, want);
    EXPECT_EQ(json::parse(read_file(parts / "summary.json"))["table"],
              json::parse(read_file(whole / "summary.json"))["table"]);
    EXPECT_EQ(b2.out, a.out) << "the printed table";
    // Another seed makes other samples: refused, naming it.
    std::vector<std::string> other = args(parts, both);
    other.insert(other.end(), {"--seed", "9"});
    const RunResult refused = run_luka(other, dir);
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_NE(refused.err.find("seed"), std::string::npos) << refused.err;
  }
}

TEST(EvalNiahCli, EachSampleCanBeACaptureWithItsNeedleMarked) {
  REQUIRE_INPUTS();
  const fs::path dir = luka::test::test_dir("eval_niah");
  std::vector<std::string> args = niah_args(dir / "run", "128");
  args.insert(args.end(), {"--depths", "50", "--presets", "clustered", "--capture-dir", (dir / "captures").string()});
  const RunResult r = run_luka(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path file = dir / "captures" / "clustered" / "niah-128-d50-s0.h5";
  ASSERT_TRUE(fs::exists(file)) << r.err;
  const auto capture = luka::capture::CaptureFile::open(file);
  const std::vector<luka::capture::Segment> segments = capture->segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].label, "needle 1");
  std::string needle;
  const auto tokens = capture->tokens();
  for (std::int64_t t = segments[0].begin; t < segments[0].end; ++t)
    needle += tokens[static_cast<std::size_t>(t)].piece;
  const json record = lines(dir / "run" / "results.jsonl").at(0);
  EXPECT_NE(needle.find("special magic number for " + record["query"].get<std::string>() + " is " +
                        record["answers"][0].get<std::string>()),
            std::string::npos)
      << needle;
  // luka inspect --json on the eval's capture is valid JSON, its manifest's generation an object.
  const RunResult summary = run_luka({"inspect", file.string(), "--json"}, dir);
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  const json sj = json::parse(summary.out);  // throws on anything but valid JSON
  EXPECT_TRUE(sj["generation"].is_object()) << sj["generation"].dump();
  EXPECT_TRUE(sj["luka_config"].is_object());
  EXPECT_EQ(sj["segments"].at(0)["label"].get<std::string>(), "needle 1");
  EXPECT_EQ(sj["complete_steps"].get<std::int64_t>(), capture->summary().complete_steps);
  // luka inspect --needle-track follows exactly the marked needle through every decode step.
  const RunResult tracked = run_luka({"inspect", file.string(), "--needle-track", "--json"}, dir);
  ASSERT_EQ(tracked.exit_code, 0) << tracked.err;
  const json t = json::parse(tracked.out);
  EXPECT_EQ(t["begin"].get<std::int64_t>(), segments[0].begin);
  EXPECT_EQ(t["end"].get<std::int64_t>(), segments[0].end);
  EXPECT_EQ(t["text"].get<std::string>(), needle);
  EXPECT_FALSE(t["rows"].empty());
  const RunResult text = run_luka({"inspect", file.string(), "--needle-track", "--layer", "0"}, dir);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("tracking   tokens " + std::to_string(segments[0].begin) + "-"), std::string::npos) << text.out;
}

// --query-agnostic prefills each sample's context before its question (a press compresses the
// context alone); run.json says so, and a resume that asks otherwise is refused.
TEST(EvalNiahCli, AQueryAgnosticRunSaysSoAndIsNotMixedWithAnother) {
  REQUIRE_INPUTS();
  const fs::path dir = luka::test::test_dir("eval_niah");
  std::vector<std::string> args = niah_args(dir / "agnostic", "128");
  args.insert(args.end(), {"--depths", "50", "--presets", "dense,knorm", "--capture-dir", (dir / "caps").string(), "--query-agnostic"});
  const RunResult r = run_luka(args, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(read_file(dir / "agnostic" / "run.json")).value("query_agnostic", false), true);
  EXPECT_EQ(lines(dir / "agnostic" / "results.jsonl").size(), 2u);
  // The capture holds the whole prompt's map (the context's forward padded to the prompt's width)
  // and says where the context ended, before the question.
  const auto capture = luka::capture::CaptureFile::open(dir / "caps" / "knorm" / "niah-128-d50-s0.h5");
  const luka::capture::Summary s = capture->summary();
  EXPECT_GT(s.complete_steps, 0);
  const std::int64_t context = json::parse(s.manifest.generation).value("query_agnostic_context_tokens", std::int64_t{0});
  EXPECT_GT(context, 64);
  EXPECT_LT(context, 128);
  // Every row of the prefill map is a distribution, the context's rows and the question's alike.
  const auto window = capture->map_window(0, 0, 0, 0, 0, 128, 128);
  ASSERT_EQ(window.rows, 128);
  ASSERT_EQ(window.values.size(), static_cast<std::size_t>(128 * window.cols));
  for (std::int64_t q = 0; q < 128; ++q) {
    double sum = 0;
    for (std::int64_t k = 0; k < window.cols; ++k) sum += window.values[static_cast<std::size_t>(q * window.cols + k)];
    EXPECT_NEAR(sum, 1.0, 0.02) << "row " << q << (q < context ? " (context)" : " (question)");
  }
  args.pop_back();  // the same folder without --query-agnostic
  const RunResult mixed = run_luka(args, dir);
  EXPECT_EQ(mixed.exit_code, 1) << mixed.err;
  EXPECT_NE(mixed.err.find("--query-agnostic"), std::string::npos) << mixed.err;
}

TEST(EvalNiahCli, BadOptionsExitTwoWithOneLine) {
  REQUIRE_INPUTS();
  const fs::path dir = luka::test::test_dir("eval_niah");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lengths", "12x"}, "--lengths"},
      {{"--lengths", "8"}, "--lengths"},
      {{"--depths", "150"}, "--depths"},
      {{"--depths", "a,b"}, "--depths"},
      {{"--format", "xml"}, "--format"},
      {{"--presets", "dense,,clustered"}, "--presets"},
      {{"--presets", "nonsense"}, "--presets"},
      {{"--samples", "0"}, "--samples"},
      {{"--values", "x"}, "--values"},
      {{"--capture-dir", "c", "--capture-record", "bogus"}, "--capture-record"},
  };
  for (const auto& [extra, names] : cases) {
    std::vector<std::string> args = niah_args(dir / "bad", "128");
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run_luka(args, dir);
    EXPECT_EQ(r.exit_code, 2) << extra[0] << " " << extra[1] << "\n" << r.err;
    std::vector<std::string> err_lines;
    std::istringstream in(r.err);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("device: ", 0) != 0) err_lines.push_back(l);
    ASSERT_EQ(err_lines.size(), 1u) << r.err;
    EXPECT_NE(err_lines[0].find(names), std::string::npos) << r.err;
    EXPECT_NE(err_lines[0].find(": error: "), std::string::npos) << r.err;
  }
  std::vector<std::string> args = ruler_args(dir / "bad", "128");
  args.insert(args.end(), {"--tasks", "niah_single_4"});
  const RunResult r = run_luka(args, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--tasks"), std::string::npos) << r.err;
}
