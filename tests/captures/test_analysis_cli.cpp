// `luka inspect --topics --json` and `--heads --json` on a real capture of the default model (an
// interwoven ABCAB prompt; dense, lined and clustered layers; the dense shadow on) against
// capture_analysis.py, which recomputes every number from the HDF5 datasets with h5py and numpy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/process_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kRoot = LUKA_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "default";

fs::path work_dir() { return luka::test::test_dir("capture_analysis_cli"); }

luka::test::RunResult luka_cli(const std::vector<std::string>& args) { return luka::test::run_program(LUKA_CLI_PATH, args, work_dir()); }

// Both sides read the same float16 values into doubles; only the order of the sums differs.
constexpr double kTolerance = 1e-6;

// Every value of `want` (the reference) is in `got`: numbers within kTolerance (integers exactly),
// null for null, the same strings; arrays of the same length. Keys only `got` has are not compared.
void expect_json_near(const json& want, const json& got, const std::string& where, int& compared) {
  if (want.is_object()) {
    ASSERT_TRUE(got.is_object()) << where << ": " << got.dump().substr(0, 200);
    for (auto it = want.begin(); it != want.end(); ++it) {
      ASSERT_TRUE(got.contains(it.key())) << where << "." << it.key() << " is missing";
      expect_json_near(it.value(), got.at(it.key()), where + "." + it.key(), compared);
    }
  } else if (want.is_array()) {
    ASSERT_TRUE(got.is_array()) << where;
    ASSERT_EQ(want.size(), got.size()) << where;
    for (std::size_t i = 0; i < want.size(); ++i) expect_json_near(want[i], got[i], where + "[" + std::to_string(i) + "]", compared);
  } else if (want.is_null()) {
    EXPECT_TRUE(got.is_null()) << where << ": " << got.dump();
  } else if (want.is_number_integer()) {
    ASSERT_TRUE(got.is_number_integer()) << where << ": " << got.dump();
    EXPECT_EQ(want.get<std::int64_t>(), got.get<std::int64_t>()) << where;
    ++compared;
  } else if (want.is_number()) {
    ASSERT_TRUE(got.is_number()) << where << ": " << got.dump();
    EXPECT_NEAR(want.get<double>(), got.get<double>(), kTolerance) << where;
    ++compared;
  } else {
    EXPECT_EQ(want, got) << where;
  }
}

class AnalysisCli : public ::testing::Test {
 protected:
  // One capture for the suite: 6 recorded layers (2 dense, 2 lined, 2 clustered), 9 heads, 160
  // prompt tokens, 7 decode steps.
  static void SetUpTestSuite() {
    if (!fs::exists(kModel)) return;
    // Per process: ctest runs each test in a process of its own, possibly in parallel.
    dir_ = fs::path(LUKA_TEST_WORK) / "capture_analysis_cli" / ("suite-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    capture_ = dir_ / "topics.h5";
    const auto r = luka::test::run_program(
        LUKA_CLI_PATH,
        {"capture", "--prompt-file", (kRoot / "tests/captures/topic_prompt.json").string(), "--preset", "clustered", "--set",
         "layers=0-9,mode=dense", "--set", "layers=10-19,mode=lined,window=16", "--set", "page_size=8,tail=16,interval=2,dense_shadow=true",
         "--record", "layers=0,5,12,15,22,29;map_min=16", "--max-new-tokens", "8", "--threads", "2", "--quiet", "--out", capture_.string()},
        dir_);
    made_ = r.exit_code == 0;
    error_ = r.err;
    if (!made_) return;
    const auto ref = luka::test::run_program(LUKA_PYTHON, {(kRoot / "tests/captures/capture_analysis.py").string(), capture_.string(),
                                                           (dir_ / "reference.json").string()},
                                             dir_);
    if (ref.exit_code == 0) reference_ = json::parse(luka::test::read_file(dir_ / "reference.json"));
    else error_ = ref.out + ref.err;
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel << " (scripts/setup.sh installs it)";
    ASSERT_TRUE(made_) << error_;
    ASSERT_FALSE(reference_.is_null()) << "capture_analysis.py failed: " << error_;
  }
  static inline fs::path dir_, capture_;
  static inline bool made_ = false;
  static inline std::string error_;
  static inline json reference_;
};

TEST_F(AnalysisCli, TopicsJsonMatchesNumpy) {
  const auto r = luka_cli({"inspect", capture_.string(), "--topics", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);
  int compared = 0;
  expect_json_near(reference_["topics"], got, "topics", compared);
  // 54 heads: a 6 x 6 matrix each, and 7 steps of 6 segment + 4 topic masses and the counts.
  EXPECT_GT(compared, 54 * (36 + 7 * 10));
  EXPECT_EQ(got["topics"].size(), 3u);
  // The question asks about the bees (the prompt file's question_topic), though the last segment is Tides.
  EXPECT_EQ(got["decode_topic"], "A");
  EXPECT_TRUE(got["covers"].get<bool>());
  // The run must exercise what it checks: refined pages (clustered layers) and heavy hitters (lined).
  std::int64_t refined = 0, heavy = 0;
  for (const auto& h : got["heads"])
    for (std::size_t k = 0; k < 4; ++k) refined += h["decode"]["refined_pages"][k].get<std::int64_t>(), heavy += h["decode"]["heavy_hitters"][k].get<std::int64_t>();
  EXPECT_GT(refined, 0);
  EXPECT_GT(heavy, 0);
  // Another decode topic changes the decode leakage only: against the last segment's topic (B),
  // the mass on A and C, which leakage_by_topic gave already.
  const auto b = luka_cli({"inspect", capture_.string(), "--topics", "--json", "--decode-topic", "B", "--layer", "22", "--head", "3"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json jb = json::parse(b.out);
  ASSERT_EQ(jb["heads"].size(), 1u);
  double mass_off_b = 0;
  for (const auto& st : jb["heads"][0]["decode"]["steps"]) mass_off_b += st["topics"][0].get<double>() + st["topics"][2].get<double>();
  EXPECT_NEAR(jb["heads"][0]["decode"]["leakage"].get<double>(), mass_off_b / 7, 1e-9);
  EXPECT_NEAR(jb["heads"][0]["decode"]["leakage_by_topic"]["B"].get<double>(), mass_off_b / 7, 1e-9);
  // The leakage against every topic does not depend on the topic asked for.
  bool found = false;
  for (const auto& h : got["heads"])
    if (h["layer"] == 22 && h["head"] == 3) {
      found = true;
      for (const char* k : {"A", "B", "C"})
        EXPECT_NEAR(h["decode"]["leakage_by_topic"][k].get<double>(), jb["heads"][0]["decode"]["leakage_by_topic"][k].get<double>(), 1e-12) << k;
      EXPECT_NEAR(h["decode"]["leakage"].get<double>(), h["decode"]["leakage_by_topic"]["A"].get<double>(), 1e-12);
    }
  EXPECT_TRUE(found);
}

TEST_F(AnalysisCli, HeadsJsonMatchesNumpy) {
  const auto r = luka_cli({"inspect", capture_.string(), "--heads", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);
  int compared = 0;
  expect_json_near(reference_["heads"], got, "heads", compared);
  EXPECT_GT(compared, 54 * 20);
  // The shadow ran on every step: each head has a KL, zero (to rounding) on the dense layers.
  for (const auto& h : got["heads"]) {
    EXPECT_EQ(h["kl_steps"].get<int>(), 7) << h.dump();
    if (h["layer"].get<int>() < 10) EXPECT_NEAR(h["kl"].get<double>(), 0, 1e-5);
    else EXPECT_GT(h["kl"].get<double>(), 1e-4);
  }
}

TEST_F(AnalysisCli, TextReportsAndErrors) {
  const auto t = luka_cli({"inspect", capture_.string(), "--topics", "--layer", "15", "--head", "2"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  for (const char* s : {"Honey bees", "refined pages by topic", "queries", "0:A", "generated", "leakage"})
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;
  const auto h = luka_cli({"inspect", capture_.string(), "--heads"});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  for (const char* s : {"induction", "prefill: the mean over the 160 query rows", "decode: the mean over 7 steps"})
    EXPECT_NE(h.out.find(s), std::string::npos) << s << "\n" << h.out;

  // A plain prompt has no topics: a one-line error naming the file; head scores still work.
  const fs::path plain = work_dir() / "plain.h5";
  ASSERT_EQ(luka_cli({"capture", "--prompt", "The cat sat on the mat. The cat", "--max-new-tokens", "3", "--record", "layers=0", "--quiet",
                      "--threads", "2", "--out", plain.string()})
                .exit_code,
            0);
  const auto no_topics = luka_cli({"inspect", plain.string(), "--topics"});
  EXPECT_EQ(no_topics.exit_code, 1);
  EXPECT_NE(no_topics.err.find(plain.string() + ": attention by topic: the capture has no segments"), std::string::npos) << no_topics.err;
  const auto plain_heads = luka_cli({"inspect", plain.string(), "--heads", "--json"});
  ASSERT_EQ(plain_heads.exit_code, 0) << plain_heads.err;
  EXPECT_TRUE(json::parse(plain_heads.out)["heads"][0]["prefill"]["cross_topic"].is_null());

  // Neither a level-0 map nor rows: nothing to analyse.
  const fs::path covers = work_dir() / "covers.h5";
  ASSERT_EQ(luka_cli({"capture", "--prompt-file", (kRoot / "tests/captures/topic_prompt.json").string(), "--max-new-tokens", "2", "--record",
                      "layers=0;parts=covers", "--quiet", "--threads", "2", "--out", covers.string()})
                .exit_code,
            0);
  const auto nothing = luka_cli({"inspect", covers.string(), "--heads"});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.err.find("nothing to analyse: prefill maps were not recorded, and effective rows were not recorded"), std::string::npos)
      << nothing.err;

  // Bad arguments: exit 2.
  EXPECT_EQ(luka_cli({"inspect", capture_.string(), "--topics", "--heads"}).exit_code, 2);
  EXPECT_EQ(luka_cli({"inspect", capture_.string(), "--decode-topic", "A"}).exit_code, 2);
  EXPECT_EQ(luka_cli({"inspect", capture_.string(), "--topics", "--decode-topic", "a"}).exit_code, 2);
  const auto bad_topic = luka_cli({"inspect", capture_.string(), "--topics", "--decode-topic", "D"});
  EXPECT_EQ(bad_topic.exit_code, 2);  // option values the capture lacks are the command line's
  EXPECT_NE(bad_topic.err.find("the capture has 3 topics"), std::string::npos) << bad_topic.err;
  const auto bad_layer = luka_cli({"inspect", capture_.string(), "--heads", "--layer", "3"});
  EXPECT_EQ(bad_layer.exit_code, 2);
  EXPECT_NE(bad_layer.err.find("layer 3 is not recorded"), std::string::npos) << bad_layer.err;
  const auto help = luka_cli({"inspect", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--topics"), std::string::npos);
  EXPECT_NE(help.out.find("luka inspect demo.h5 --heads --json"), std::string::npos);
}

}  // namespace
