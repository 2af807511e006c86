// `luka capture --static-step`: a capture of a run whose decode steps the static step issues (the
// step `--graph` records on a GPU, core/run/static_step.h) holds what the decoder's own steps
// record, read back through the reader: the same tokens, modes, sizes, covers, page states and
// pages, the rows and pages' α within one half-precision rounding (they are stored as halves and
// the two sums differ in the last float bits), the chosen tokens' probabilities within 1e-6. What
// it cannot run is refused before the model loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "captures/reader.h"
#include "tests/process_util.h"

namespace fs = std::filesystem;

namespace {

const fs::path kTinyModel = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-tok";

luka::test::RunResult luka_cli(const std::vector<std::string>& args) {
  return luka::test::run_program(LUKA_CLI_PATH, args, luka::test::test_dir("capture_engine"));
}

// Layer 0 lined, layer 1 clustered with pages of 4 made every 2 steps, 12 decode steps.
std::vector<std::string> capture_args(const fs::path& out) {
  return {"capture", "--model", kTinyModel.string(), "--prompt",
          "The lighthouse keeper wrote in the log that the fog rolled in over the harbour before dawn, and the ships waited.",
          "--set", "layers=0,mode=lined,window=4,rho=0.25", "--set",
          "layers=1,mode=clustered,page_size=4,tail=4,interval=2,top_k=1", "--max-new-tokens", "13", "--ignore-eos",
          "--quiet", "--device", "cpu", "--threads", "2", "--out", out.string()};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(double{a[i]} - double{b[i]}));
  return d;
}

TEST(CaptureEngine, StaticStepRecordsWhatTheDecodersStepsRecord) {
  if (!fs::exists(kTinyModel / "tokenizer.json")) GTEST_SKIP() << "no qwen3-tok checkpoint (needs the Qwen3 tokenizer)";
  const fs::path dir = luka::test::test_dir("capture_engine");
  std::vector<std::string> eager = capture_args(dir / "eager.h5"), engine = capture_args(dir / "static.h5");
  engine.push_back("--static-step");
  for (const auto& args : {eager, engine}) {
    const luka::test::RunResult r = luka_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const auto a = luka::capture::CaptureFile::open(dir / "eager.h5");
  const auto b = luka::capture::CaptureFile::open(dir / "static.h5");
  const luka::capture::Summary sa = a->summary(), sb = b->summary();
  ASSERT_EQ(sa.complete_steps, 12);
  ASSERT_EQ(sb.complete_steps, sa.complete_steps);
  const auto ta = a->tokens(), tb = b->tokens();
  ASSERT_EQ(ta.size(), tb.size());
  double prob_diff = 0;
  for (std::size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].id, tb[i].id) << "token " << i;
    if (ta[i].generated && !std::isnan(ta[i].prob)) prob_diff = std::max(prob_diff, std::fabs(double{ta[i].prob} - tb[i].prob));
  }
  EXPECT_LE(prob_diff, 1e-6);
  double row_diff = 0, mass_diff = 0;
  for (std::int64_t step = 1; step <= sa.complete_steps; ++step)
    for (const int layer : sa.layout.layers) {
      const luka::capture::StepMetrics ma = a->metrics(step, layer), mb = b->metrics(step, layer);
      EXPECT_EQ(ma.mode, mb.mode);
      EXPECT_EQ(ma.tokens, mb.tokens);
      EXPECT_EQ(ma.paged_end, mb.paged_end);
      EXPECT_EQ(ma.cover_size, mb.cover_size) << "step " << step << " layer " << layer;
      for (const int head : sa.layout.heads) {
        EXPECT_EQ(a->cover(step, layer, head), b->cover(step, layer, head)) << "step " << step << " layer " << layer;
        EXPECT_EQ(a->page_states(step, layer, head), b->page_states(step, layer, head));
        row_diff = std::max(row_diff, max_abs_diff(a->row(step, layer, head), b->row(step, layer, head)));
        mass_diff = std::max(mass_diff, max_abs_diff(a->summary_mass(step, layer, head), b->summary_mass(step, layer, head)));
      }
    }
  // One half-precision step at 0.5 is 2^-12; the rows sum to 1.
  EXPECT_LE(row_diff, 1.0 / 2048);
  EXPECT_LE(mass_diff, 1.0 / 2048);
  EXPECT_GT(a->pages(1).size(), 3u) << "the clustered layer makes pages during the run";
  for (const int layer : sa.layout.layers) {
    const auto pa = a->pages(layer), pb = b->pages(layer);
    ASSERT_EQ(pa.size(), pb.size()) << "layer " << layer;
    for (std::size_t p = 0; p < pa.size(); ++p) {
      EXPECT_EQ(pa[p].start, pb[p].start);
      EXPECT_EQ(pa[p].end, pb[p].end);
      EXPECT_EQ(pa[p].created_step, pb[p].created_step);
    }
  }
}

TEST(CaptureEngine, RefusesWhatTheStaticStepCannotRecord) {
  if (!fs::exists(kTinyModel / "tokenizer.json")) GTEST_SKIP() << "no qwen3-tok checkpoint (needs the Qwen3 tokenizer)";
  const fs::path dir = luka::test::test_dir("capture_engine");
  std::vector<std::string> args = capture_args(dir / "refused.h5");
  args.push_back("--static-step");
  std::vector<std::string> sampled = args;
  sampled.insert(sampled.end(), {"--temperature", "0.7"});
  const luka::test::RunResult r = luka_cli(sampled);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--static-step chooses greedily"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "refused.h5"));
  std::vector<std::string> graph = args;
  graph.back() = "--graph";
  const luka::test::RunResult g = luka_cli(graph);
  EXPECT_EQ(g.exit_code, 2) << g.err;
  EXPECT_NE(g.err.find("--graph records CUDA graphs: it needs --device cuda"), std::string::npos) << g.err;
}

}  // namespace
