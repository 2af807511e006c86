// `luka capture` and `luka inspect` end to end on the default model: the h5py reader of the
// documented example and transformers' attention as references, a capture killed with SIGKILL
// mid-run, and bad files and arguments.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "viz/png.h"
#include "core/util/error.h"
#include "core/util/output_file.h"

extern char** environ;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = LUKA_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "default";
const fs::path kPython = kRoot / ".venv" / "bin" / "python";

using luka::test::read_file;
using luka::test::RunResult;

fs::path work_dir() { return luka::test::test_dir("capture_cli"); }

RunResult run(const std::string& program, const std::vector<std::string>& args) {
  return luka::test::run_program(program, args, work_dir());
}

RunResult luka(const std::vector<std::string>& args) { return run(LUKA_CLI_PATH, args); }

bool have_model() { return fs::exists(kModel); }

#define REQUIRE_MODEL() \
  if (!have_model()) GTEST_SKIP() << "no default model at " << kModel << " (scripts/setup.sh installs it)"

// The small random checkpoint with the real Qwen3 tokenizer (2 layers, 2 heads; made by
// tests/fixtures/make_checkpoints.py when the shared tokenizer is there): captures in a fraction of
// a second, for the tests that need a capture but not a trained model.
const fs::path kTinyModel = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-tok";

#define REQUIRE_TINY_MODEL() \
  if (!fs::exists(kTinyModel / "tokenizer.json")) GTEST_SKIP() << "no qwen3-tok checkpoint (needs the Qwen3 tokenizer in " LUKA_SHARED_DATA ")"

// 24 prompt tokens and 5 decode steps of every layer and head: layer 0 lined with a window of 4
// (the older tokens heavy hitters or dropped), layer 1 clustered with pages of 4 and a tail of 4,
// one page refined per head and step.
fs::path tiny_capture() {
  const fs::path out = work_dir() / "tiny.h5";
  const RunResult r = luka({"capture", "--model", kTinyModel.string(), "--prompt",
                            "The lighthouse keeper wrote in the log that the fog rolled in over the harbour before dawn, and the ships waited.",
                            "--set", "layers=0,mode=lined,window=4,rho=0.125", "--set",
                            "layers=1,mode=clustered,page_size=4,tail=4,interval=2,top_k=1", "--max-new-tokens", "6", "--quiet",
                            "--device", "cpu", "--threads", "2", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST(CaptureCli, DemoPromptReadsWithH5pyAndMatchesTransformers) {
  REQUIRE_MODEL();
  const fs::path out = work_dir() / "demo.h5";
  // Every mode in one run: layers 0-9 dense, 10-19 lined, 20-29 clustered with pages made
  // during decoding; recorded: three layers of each. Dequantized weights: transformers decodes the
  // file's blocks into fp32 too (the quantized path's 8-bit activations would move the rows).
  const RunResult r = luka({"capture", "--weights", "dequantized", "--prompt-file", (kRoot / "assets/prompts/demo.json").string(), "--preset", "clustered",
                            "--set", "layers=0-9,mode=dense", "--set", "layers=10-19,mode=lined", "--set",
                            "page_size=8,tail=16,interval=4,dense_shadow=true", "--record", "layers=0-2,10-12,20-22;map_min=16",
                            "--max-new-tokens", "16", "--threads", "2", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("before compression"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("wrote " + out.string()), std::string::npos) << r.err;
  // The recording's share of a step on the model thread is part of the step's time.
  std::smatch step_ms, rec_ms;
  ASSERT_TRUE(std::regex_search(r.err, step_ms, std::regex("decode: \\d+ steps in [0-9.]+ s, ([0-9.]+) ms per step"))) << r.err;
  ASSERT_TRUE(std::regex_search(r.err, rec_ms, std::regex("recording: ([0-9.]+) ms per step on the model thread \\(([0-9.]+) waiting"))) << r.err;
  EXPECT_LE(std::stod(rec_ms[1]), std::stod(step_ms[1]));
  EXPECT_LE(std::stod(rec_ms[2]), std::stod(rec_ms[1]));

  const RunResult check = run(kPython.string(), {(kRoot / "tests/captures/check_capture.py").string(), out.string(),
                                                 "--expect-steps", "15", "--expect-finished", "1", "--hf-model",
                                                 fs::canonical(kModel).string()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("transformers attention matches"), std::string::npos) << check.out;

  const RunResult info = luka({"inspect", out.string(), "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const auto j = nlohmann::json::parse(info.out);
  EXPECT_TRUE(j["finished"].get<bool>());
  EXPECT_EQ(j["complete_steps"].get<int>(), 15);
  EXPECT_EQ(j["layers"], nlohmann::json({0, 1, 2, 10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(j["tokens"]["generated"].get<int>(), 16);
  ASSERT_EQ(j["segments"].size(), 3u);  // A/B/A
  EXPECT_EQ(j["segments"][0]["label"], j["segments"][2]["label"]);
  EXPECT_NE(j["segments"][0]["label"], j["segments"][1]["label"]);
  EXPECT_LT(j["segments"][0]["end"].get<int>(), j["segments"][1]["begin"].get<int>() + 1);
  EXPECT_NE(j["attention"].get<std::string>().find("dense 0-9"), std::string::npos) << j["attention"];

  // The text summary names the parts and their sizes.
  const RunResult text = luka({"inspect", out.string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* part : {"maps", "rows", "covers", "metrics", "finished"}) EXPECT_NE(text.out.find(part), std::string::npos) << part;
  // The default model is one GGUF file: its weights and tokenizer hash alike, and the summary says why.
  EXPECT_EQ(j["model"]["weights_hash"], j["model"]["tokenizer_hash"]);
  EXPECT_NE(text.out.find("hashes     weights and tokenizer "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(one file)"), std::string::npos) << text.out;
}

TEST(CaptureCli, DenseRunMatchesTransformersIncludingTokenProbabilities) {
  REQUIRE_MODEL();
  const fs::path out = work_dir() / "dense.h5";
  const RunResult r = luka({"capture", "--weights", "dequantized", "--prompt", "The lighthouse keeper climbed the stairs at dusk and",
                            "--max-new-tokens", "8", "--record", "layers=0,7,29", "--quiet", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const RunResult check = run(kPython.string(), {(kRoot / "tests/captures/check_capture.py").string(), out.string(), "--expect-steps",
                                                 "7", "--hf-model", fs::canonical(kModel).string()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("token probabilities match transformers"), std::string::npos) << check.out;
}

// A prompt longer than the map cap: the layers hand the map max-pooled to the finest stored level
// (no level 0 in the file), and that level equals transformers' attention max-pooled in numpy.
TEST(CaptureCli, PooledPrefillMapMatchesTransformersMaxPooled) {
  REQUIRE_MODEL();
  const fs::path out = work_dir() / "pooled.h5";
  const RunResult r = luka({"capture", "--weights", "dequantized", "--prompt",
                            "The lighthouse keeper climbed the stairs at dusk, trimmed the wick, wound the clockwork that turned the "
                            "lens, and wrote in the log that the wind had backed to the north-east before the rain came in.",
                            "--max-new-tokens", "4", "--record", "layers=0,11,29;map_cap=8;map_min=2", "--quiet", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto f = luka::capture::CaptureFile::open(out);
  const auto s = f->summary();
  ASSERT_GT(s.layout.prompt_tokens, 32);
  ASSERT_FALSE(s.layout.levels.empty());
  EXPECT_GE(s.layout.levels.front(), 2) << "the map should start above level 0";
  const RunResult check = run(kPython.string(), {(kRoot / "tests/captures/check_capture.py").string(), out.string(), "--expect-steps",
                                                 "3", "--hf-model", fs::canonical(kModel).string()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("transformers attention matches"), std::string::npos) << check.out;
}

TEST(CaptureCli, KilledRunOpensUpToItsLastCompleteStep) {
  REQUIRE_MODEL();
  const fs::path target = work_dir() / "killed.h5";
  const fs::path out = work_dir() / "killed.h5.partial";  // where a run writes until it finishes
  fs::remove(target);
  fs::remove(out);
  const std::vector<std::string> args = {LUKA_CLI_PATH, "capture", "--model", kModel.string(), "--prompt",
                                         "Once upon a time, in a small village by the sea,", "--preset", "clustered",
                                         "--set", "page_size=4,tail=8,interval=2", "--record", "layers=0-5",
                                         "--max-new-tokens", "2000", "--threads", "1", "--quiet", "--out", target.string()};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, (work_dir() / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);

  // Watch the file from outside, as a reader while the run writes, until 6 steps are complete.
  std::int64_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (seen < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      if (fs::exists(out)) seen = luka::capture::CaptureFile::open(out)->summary().complete_steps;
    } catch (const luka::Error&) {
      // not created yet or between creation and the first flush
    }
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GE(seen, 6) << "the capture did not reach 6 steps: " << read_file(work_dir() / "err.txt");
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(target)) << "an unfinished capture must not take the capture's name";

  const auto f = luka::capture::CaptureFile::open(out);
  const auto s = f->summary();
  EXPECT_FALSE(s.finished);
  EXPECT_GE(s.complete_steps, seen);
  EXPECT_LT(s.complete_steps, 1999);
  EXPECT_EQ(s.num_tokens, s.layout.prompt_tokens + s.complete_steps);
  EXPECT_EQ(static_cast<std::int64_t>(f->tokens().size()), s.num_tokens);
  for (std::int64_t step = 1; step <= s.complete_steps; ++step)
    for (const int layer : s.layout.layers) {
      const auto row = f->row(step, layer, 0);
      ASSERT_EQ(static_cast<std::int64_t>(row.size()), s.layout.prompt_tokens + step);
      double sum = 0;
      for (const float v : row) sum += v;
      EXPECT_NEAR(sum, 1.0, 2e-3) << "step " << step << " layer " << layer;
      EXPECT_EQ(f->metrics(step, layer).mode, 2);
    }
  EXPECT_THROW(f->row(s.complete_steps + 1, 0, 0), luka::Error);

  const RunResult check = run(kPython.string(), {(kRoot / "tests/captures/check_capture.py").string(), out.string(),
                                                 "--expect-finished", "0"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const RunResult info = luka({"inspect", out.string()});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("not finished"), std::string::npos) << info.out;
}

// A write that fails half-way (a full disk; here a file-size limit, RLIMIT_FSIZE with SIGXFSZ
// ignored, so write() fails as on a full disk) at several points of the run: exit 1 with one error
// line naming where the complete steps are, no crash at exit, the .partial file opens up to its
// last complete step, and the capture that was at the path before stays whole.
TEST(CaptureCli, FailedWritesExitOneAndKeepTheCompleteSteps) {
  REQUIRE_MODEL();
  const fs::path full = work_dir() / "full.h5";
  const std::vector<std::string> args = {"capture", "--prompt-file", (kRoot / "assets/prompts/demo.json").string(),
                                         "--max-new-tokens", "24", "--quiet", "--device", "cpu", "--threads", "2"};
  std::vector<std::string> a = args;
  a.insert(a.end(), {"--out", full.string()});
  ASSERT_EQ(luka(a).exit_code, 0);
  const std::uintmax_t size = fs::file_size(full);
  std::int64_t partial_steps = 0;
  for (const double fraction : {0.1, 0.5, 0.9, 0.95, 0.98}) {
    const fs::path target = work_dir() / ("cut-" + std::to_string(static_cast<int>(fraction * 100)) + ".h5");
    const fs::path out = target.string() + ".partial";
    fs::remove(out);
    fs::copy_file(full, target, fs::copy_options::overwrite_existing);  // a previous capture at the path
    std::string cmd = "trap '' XFSZ; ulimit -f " + std::to_string(static_cast<std::uintmax_t>(fraction * static_cast<double>(size)) / 1024) +
                      "; exec env -u LUKA_MODEL " + luka::test::quote(LUKA_CLI_PATH);
    for (const auto& x : args) cmd += " " + luka::test::quote(x);
    cmd += " --out " + luka::test::quote(target.string());
    const RunResult r = luka::test::run_shell("bash -c " + luka::test::quote(cmd), work_dir());
    SCOPED_TRACE("cut at " + std::to_string(fraction) + " of " + std::to_string(size) + " bytes");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    // One line says what went wrong: the last, after the device, attention and recording lines.
    const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
    EXPECT_EQ(last.rfind("luka capture: error: " + target.string() + ": ", 0), 0u) << r.err;
    EXPECT_NE(last.find("File too large"), std::string::npos) << last;
    EXPECT_NE(last.find("complete decode steps are readable in " + out.string()), std::string::npos) << last;
    EXPECT_EQ(fs::file_size(target), size) << "the previous capture at the path was changed";
    EXPECT_TRUE(luka::capture::CaptureFile::open(target)->summary().finished);
    EXPECT_EQ(r.err.substr(0, r.err.size() - last.size()).find("error"), std::string::npos) << r.err;
    const auto f = luka::capture::CaptureFile::open(out);
    const auto s = f->summary();
    EXPECT_FALSE(s.finished);
    partial_steps = std::max(partial_steps, s.complete_steps);
    for (std::int64_t step = 1; step <= s.complete_steps; ++step) {
      double sum = 0;
      for (const float v : f->row(step, 0, 0)) sum += v;
      EXPECT_NEAR(sum, 1.0, 2e-3) << "step " << step;
    }
  }
  EXPECT_GT(partial_steps, 0) << "no cut fell among the decode steps";
}

// Two runs on one output path: while one holds the path (here this test, through the lock a
// capture takes), a capture to it is refused, naming the holder, and the file at the path stays
// as it was; once released, the capture runs. (bench/run_reliability.sh runs two real captures.)
TEST(CaptureCli, SecondRunOnTheSamePathIsRefused) {
  REQUIRE_MODEL();
  const fs::path out = work_dir() / "shared.h5";
  const std::string before = "a file the other run owns\n";
  std::ofstream(out, std::ios::binary) << before;
  const std::vector<std::string> args = {"capture", "--prompt", "Hello", "--max-new-tokens", "4", "--quiet", "--device", "cpu", "--out", out.string()};
  {
    const luka::OutputLock held(out);
    const RunResult second = luka(args);
    EXPECT_EQ(second.exit_code, 1) << second.err;
    EXPECT_NE(second.err.find("another run (process " + std::to_string(::getpid()) + ")"), std::string::npos) << second.err;
    EXPECT_NE(second.err.find("is writing this file"), std::string::npos) << second.err;
    // The .partial file is the other run's: the refusal does not offer it as this run's steps.
    EXPECT_EQ(second.err.find(".partial"), std::string::npos) << second.err;
    EXPECT_EQ(read_file(out), before);
    EXPECT_FALSE(fs::exists(out.string() + ".partial"));
  }
  EXPECT_FALSE(fs::exists(out.string() + ".lock"));
  const RunResult again = luka(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_FALSE(fs::exists(out.string() + ".lock"));
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
  const auto s = luka::capture::CaptureFile::open(out)->summary();
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.complete_steps, 3);
}

TEST(CaptureCli, InspectRejectsBadFilesWithOneLine) {
  const fs::path d = work_dir();
  std::ofstream(d / "notes.h5") << "not an HDF5 file at all\n";
  const std::string make = "import h5py,sys\n"
                           "with h5py.File(sys.argv[1], 'w') as f: f.attrs['format'] = 'luka-capture'; f.attrs['version'] = 7\n"
                           "with h5py.File(sys.argv[2], 'w') as f: f.attrs['format'] = 'luka-capture'; f.attrs['version'] = 1; f.create_group('manifest')\n";
  std::ofstream(d / "make.py") << make;
  ASSERT_EQ(run(kPython.string(), {(d / "make.py").string(), (d / "v7.h5").string(), (d / "hollow.h5").string()}).exit_code, 0);
  struct Case {
    fs::path file;
    std::string message;
  };
  fs::create_directories(d / "folder.h5");
  std::vector<Case> cases = {{d / "absent.h5", "no such file"},
                             {d / "folder.h5", "is a folder, not a capture file"},
                             {d / "notes.h5", "not an HDF5 file"},
                             {d / "v7.h5", "version 7 is not supported"},
                             {d / "hollow.h5", "missing"}};
  if (have_model()) {  // a real capture, cut to a third
    const fs::path good = d / "good.h5";
    ASSERT_EQ(luka({"capture", "--prompt", "Hello there, general", "--max-new-tokens", "4", "--quiet", "--out", good.string()}).exit_code, 0);
    fs::copy_file(good, d / "cut.h5", fs::copy_options::overwrite_existing);
    fs::resize_file(d / "cut.h5", fs::file_size(good) / 3);
    cases.push_back({d / "cut.h5", ""});
  }
  for (const Case& c : cases) {
    const RunResult r = luka({"inspect", c.file.string()});
    EXPECT_EQ(r.exit_code, 1) << c.file << ": " << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.file.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

TEST(CaptureCli, BadArgumentsAreClearErrors) {
  REQUIRE_MODEL();
  const std::string out = (work_dir() / "x.h5").string();
  const RunResult no_out = luka({"capture", "--prompt", "hi"});
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.err.find("--out"), std::string::npos);
  const RunResult two = luka({"capture", "--prompt", "hi", "--prompt-file", "x.txt", "--out", out});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("exactly one of"), std::string::npos) << two.err;
  const RunResult rec = luka({"capture", "--prompt", "hi", "--record", "parts=pictures", "--out", out});
  EXPECT_EQ(rec.exit_code, 2);  // an option's value: the command line
  EXPECT_NE(rec.err.find("unknown part 'pictures'"), std::string::npos) << rec.err;
  const RunResult layer = luka({"capture", "--prompt", "hi", "--record", "layers=99", "--out", out});
  EXPECT_EQ(layer.exit_code, 2);
  EXPECT_NE(layer.err.find("layer 99 is out of range"), std::string::npos) << layer.err;
  const RunResult dir = luka({"capture", "--prompt", "hi", "--out", "/nonexistent-dir/x.h5"});
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_NE(dir.err.find("/nonexistent-dir/x.h5"), std::string::npos) << dir.err;
}

TEST(CaptureCli, ExportWritesPngSvgAndPdfFigures) {
  REQUIRE_MODEL();
  const fs::path d = work_dir(), cap = d / "run.h5";
  ASSERT_EQ(luka({"capture", "--prompt-file", (kRoot / "assets/prompts/demo.json").string(), "--preset", "mixed(2,2)",
                  "--record", "layers=0,10", "--max-new-tokens", "5", "--quiet", "--out", cap.string()})
                .exit_code,
            0);
  for (const char* ext : {"png", "svg", "pdf"}) {
    const fs::path out = d / (std::string("fig.") + ext);
    const RunResult r = luka({"export", "--capture", cap.string(), "--layer", "10", "--head", "2", "--step", "4", "--level", "0",
                              "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string bytes = read_file(out);
    const std::string title = "layer 10 · head 2 · clustered to step 4";
    if (std::string(ext) == "png") {
      const auto img = luka::viz::read_png(out);  // 760 x 680 points at 2 pixels per point
      EXPECT_EQ(img.width, 1520);
      EXPECT_EQ(img.height, 1360);
    } else if (std::string(ext) == "svg") {
      EXPECT_EQ(bytes.find("<?xml"), 0u);
      EXPECT_NE(bytes.find("<svg"), std::string::npos);
      EXPECT_NE(bytes.find("width=\"760pt\" height=\"680pt\""), std::string::npos) << bytes.substr(0, 300);
      EXPECT_NE(bytes.find("<title>"), std::string::npos);
      EXPECT_NE(bytes.find(title), std::string::npos);
      EXPECT_NE(bytes.find("SmolLM2-135M-Instruct"), std::string::npos);
    } else {
      EXPECT_EQ(bytes.rfind("%PDF-", 0), 0u);
      EXPECT_NE(bytes.find("/MediaBox [ 0 0 760 680 ]"), std::string::npos);
      // The document title, as cairo writes non-ASCII titles: UTF-16BE in hex after a byte-order mark.
      const auto at = bytes.find("/Title <FEFF");
      ASSERT_NE(at, std::string::npos);
      std::string decoded;  // the ASCII characters of the title
      for (std::size_t i = at + 12; i + 4 <= bytes.size() && bytes[i] != '>'; i += 4) {
        const int unit = std::stoi(bytes.substr(i, 4), nullptr, 16);
        decoded += unit < 128 ? static_cast<char>(unit) : '?';
      }
      EXPECT_NE(decoded.find("layer 10 ? head 2 ? clustered to step 4"), std::string::npos) << decoded;
      EXPECT_NE(bytes.find("%%EOF"), std::string::npos);
    }
  }
  // Small multiples: every head of a layer, as one figure.
  const RunResult grid = luka({"export", "--capture", cap.string(), "--layer", "10", "--grid", "heads", "--step", "4",
                               "--out", (d / "grid.png").string()});
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  EXPECT_EQ(luka::viz::read_png(d / "grid.png").width, 1800);
  ASSERT_EQ(luka({"export", "--capture", cap.string(), "--head", "2", "--grid", "layers", "--out", (d / "strip.svg").string()})
                .exit_code,
            0);
  EXPECT_NE(read_file(d / "strip.svg").find("head 2 · every layer"), std::string::npos);
  EXPECT_EQ(luka({"export", "--capture", cap.string(), "--layer", "10", "--head", "2", "--grid", "rows", "--out", (d / "x.png").string()})
                .exit_code,
            2);
  // Dense and difference views need the dense shadow's rows.
  const RunResult no_shadow = luka({"export", "--capture", cap.string(), "--layer", "10", "--head", "2", "--view", "dense", "--step", "4",
                                    "--out", (d / "x.png").string()});
  EXPECT_EQ(no_shadow.exit_code, 1);
  EXPECT_NE(no_shadow.err.find("dense_shadow=true"), std::string::npos) << no_shadow.err;
  EXPECT_EQ(luka({"export", "--capture", cap.string(), "--layer", "10", "--head", "2", "--view", "dense", "--out", (d / "x.png").string()})
                .exit_code,
            2);  // no --step
  const fs::path shadowed = d / "shadow.h5";
  ASSERT_EQ(luka({"capture", "--prompt", "The lighthouse keeper wrote in the log that the fog", "--preset", "clustered", "--set",
                  "dense_shadow=true,page_size=4,tail=4", "--record", "layers=10", "--max-new-tokens", "5", "--quiet", "--out",
                  shadowed.string()})
                .exit_code,
            0);
  for (const char* v : {"dense", "difference"}) {
    const RunResult r = luka({"export", "--capture", shadowed.string(), "--layer", "10", "--head", "2", "--view", v, "--step", "4",
                              "--out", (d / (std::string(v) + ".svg")).string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(read_file(d / (std::string(v) + ".svg")).find(std::string(v) == "dense" ? "dense attention (shadow)" : "effective − dense"),
              std::string::npos);
  }
  const RunResult ext = luka({"export", "--capture", cap.string(), "--layer", "10", "--head", "2", "--out", (d / "x.bmp").string()});
  EXPECT_EQ(ext.exit_code, 2);
  EXPECT_NE(ext.err.find("x.bmp: the figure's format follows its extension"), std::string::npos) << ext.err;
  const RunResult layer = luka({"export", "--capture", cap.string(), "--layer", "5", "--head", "2", "--out", (d / "x.png").string()});
  EXPECT_EQ(layer.exit_code, 2);  // an option's value the capture lacks: the command line's error
  EXPECT_NE(layer.err.find("layer 5 is not recorded"), std::string::npos) << layer.err;
}

// A figure write that fails half-way (a file-size limit with SIGXFSZ ignored, which fails it as a
// full disk does) exits 1 with one line naming the figure; no partial or temporary file is left and
// the figure that was at the path stays whole. Each format: PNG, SVG and PDF.
TEST(CaptureCli, FailedFigureWriteLeavesNoPartialFile) {
  REQUIRE_TINY_MODEL();
  const fs::path cap = tiny_capture();
  const fs::path figures = work_dir() / "figures";
  fs::create_directories(figures);
  std::vector<std::string> names;
  for (const std::string ext : {"png", "svg", "pdf"}) {
    const fs::path out = figures / ("fig." + ext);
    names.push_back(out.filename().string());
    std::ofstream(out) << "the previous figure";
    const auto command = [&](const std::string& limit) {
      return "bash -c " + luka::test::quote("trap '' XFSZ; " + limit + "exec " + luka::test::quote(LUKA_CLI_PATH) + " export --capture " +
                                            luka::test::quote(cap.string()) + " --layer 1 --head 0 --step 3 --out " +
                                            luka::test::quote(out.string()));
    };
    // Every figure of this capture is over 16 KB; the limit stops it at 4 KiB.
    const RunResult r = luka::test::run_shell(command("ulimit -f 4; "), work_dir());
    EXPECT_EQ(r.exit_code, 1) << ext << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("luka export: error: " + out.string() + ": cannot write the figure: File too large", 0), 0u) << r.err;
    EXPECT_EQ(read_file(out), "the previous figure") << ext;
    // Without the limit the same command replaces it.
    const RunResult ok = luka::test::run_shell(command(""), work_dir());
    EXPECT_EQ(ok.exit_code, 0) << ext << ": " << ok.err;
    EXPECT_GT(fs::file_size(out), 16384u) << ext;
  }
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(figures)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(left, names);
}

// luka inspect --track against what the capture holds, read through the reader: each head's
// timeline (a letter per token and step, the attention summed over the span), the tables per head
// of a layer and per layer, and the JSON rows.
// A Kascade run: layer 0 an anchor (its output dense), layer 1 reusing its sets. The capture
// records mode 3, the source layer and the head map per step, and layer 1's cover is its top-5
// set: the 5 keys with the most attention of layer 0 summed over the KV head's query heads (the
// pooled rows read back from the capture, in float16: a key kept is never below a key left out by
// more than their rounding), its effective rows zero outside it.
TEST(CaptureCli, KascadeRecordsSourceHeadMapAndTheReusedSet) {
  REQUIRE_TINY_MODEL();
  const fs::path out = work_dir() / "kascade.h5";
  const RunResult r = luka({"capture", "--model", kTinyModel.string(), "--prompt",
                            "The lighthouse keeper wrote in the log that the fog rolled in over the harbour before dawn, and the ships waited.",
                            "--set", "mode=kascade,kascade_top_frac=0,kascade_top_k=5,kascade_tile=8", "--set", "layers=1,kascade_source=0",
                            "--max-new-tokens", "6", "--quiet", "--device", "cpu", "--threads", "2", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  using namespace luka::capture;
  const auto file = CaptureFile::open(out);
  ASSERT_EQ(file->summary().complete_steps, 5);
  for (std::int64_t step = 1; step <= 5; ++step) {
    const StepMetrics m0 = file->metrics(step, 0), m1 = file->metrics(step, 1);
    EXPECT_EQ(m0.mode, kModeKascade);
    EXPECT_EQ(m1.mode, kModeKascade);
    EXPECT_EQ(m0.kascade_source, 0);
    EXPECT_EQ(m1.kascade_source, 0);
    EXPECT_EQ(m1.kascade_head, (std::vector<std::int32_t>{0, 0}));  // one KV head
    EXPECT_EQ(m0.cover_size, (std::vector<std::int32_t>{static_cast<std::int32_t>(m0.tokens), static_cast<std::int32_t>(m0.tokens)}));
    std::vector<double> pooled(static_cast<std::size_t>(m0.tokens), 0.0);
    for (const int head : {0, 1}) {
      const auto row = file->row(step, 0, head);
      for (std::size_t t = 0; t < pooled.size(); ++t) pooled[t] += row[t];
    }
    std::vector<std::uint8_t> first;
    for (const int head : {0, 1}) {
      const auto cover = file->cover(step, 1, head);
      const auto row = file->row(step, 1, head);
      if (head == 0) first = cover;
      EXPECT_EQ(cover, first) << "both heads read KV head 0's set";
      EXPECT_EQ(m1.cover_size[static_cast<std::size_t>(head)], 5);
      double kept_min = 2, left_max = -1, outside = 0;
      int kept = 0;
      for (std::size_t t = 0; t < pooled.size(); ++t) {
        if (cover[t] == kRaw) {
          ++kept;
          kept_min = std::min(kept_min, pooled[t]);
        } else {
          EXPECT_EQ(cover[t], kDropped);
          left_max = std::max(left_max, pooled[t]);
          outside += row[t];
        }
      }
      EXPECT_EQ(kept, 5) << "step " << step;
      EXPECT_GE(kept_min, left_max - 2e-3) << "step " << step;
      EXPECT_EQ(outside, 0.0);
    }
  }
}

TEST(CaptureCli, PressAndQuestStepsNameTheirModeAndWhatTheyEvicted) {
  REQUIRE_TINY_MODEL();
  // Layer 0: SnapKV keeping half the prompt (a window of 4 queries); layer 1: Quest with pages of
  // 4, one page a step and a window of 4.
  const fs::path out = work_dir() / "press_quest.h5";
  const RunResult r = luka({"capture", "--model", kTinyModel.string(), "--prompt",
                            "The lighthouse keeper wrote in the log that the fog rolled in over the harbour before dawn, and the ships waited.",
                            "--set", "layers=0,mode=press,press_method=snapkv,press_window=4,compression_ratio=0.5", "--set",
                            "layers=1,mode=quest,quest_page_size=4,quest_pages=1,quest_window=4", "--max-new-tokens", "6", "--ignore-eos",
                            "--quiet", "--device", "cpu", "--threads", "2", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  using namespace luka::capture;
  const auto file = CaptureFile::open(out);
  const std::int64_t n = file->summary().layout.prompt_tokens;
  ASSERT_EQ(file->summary().complete_steps, 5);
  for (std::int64_t step = 1; step <= 5; ++step) {
    const StepMetrics m0 = file->metrics(step, 0), m1 = file->metrics(step, 1);
    EXPECT_EQ(m0.mode, kModePress);
    EXPECT_EQ(m1.mode, kModeQuest);
    EXPECT_STREQ(mode_name(m0.mode), "press");
    EXPECT_STREQ(mode_name(m1.mode), "quest");
    for (const int layer : {0, 1})
      for (const int head : {0, 1}) {
        const auto cover = file->cover(step, layer, head);
        const auto row = file->row(step, layer, head);
        std::int64_t kept = 0, kept_prompt = 0;
        for (std::size_t t = 0; t < cover.size(); ++t) {
          ASSERT_TRUE(cover[t] == kRaw || cover[t] == kDropped) << "step " << step << " layer " << layer << " token " << t;
          if (cover[t] == kDropped) EXPECT_EQ(row[t], 0.f) << "an evicted token got attention: step " << step << " layer " << layer << " token " << t;
          kept += cover[t] == kRaw;
          kept_prompt += cover[t] == kRaw && static_cast<std::int64_t>(t) < n;
        }
        EXPECT_EQ((layer == 0 ? m0 : m1).cover_size[static_cast<std::size_t>(head)], kept);
        if (layer == 0) EXPECT_EQ(kept_prompt, n / 2) << "SnapKV keeps half the prompt (kvpress: floor(n * (1 - ratio)))";
        if (layer == 0) EXPECT_EQ(kept - kept_prompt, step) << "and every token after it";
        if (layer == 1) EXPECT_LE(kept, 4 + 4) << "one page and the window";
      }
  }
  const RunResult check = run(kPython.string(), {(kRoot / "tests/captures/check_capture.py").string(), out.string(), "--expect-steps", "5",
                                                 "--expect-finished", "1"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  // luka inspect names the modes, and --track counts what the methods evicted as dropped.
  const RunResult info = luka({"inspect", out.string(), "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const std::string attention = nlohmann::json::parse(info.out)["attention"].get<std::string>();
  EXPECT_NE(attention.find("press"), std::string::npos) << attention;
  EXPECT_NE(attention.find("quest"), std::string::npos) << attention;
  const RunResult track = luka({"inspect", out.string(), "--track", "0-" + std::to_string(n - 1), "--json"});
  ASSERT_EQ(track.exit_code, 0) << track.err;
  const auto doc = nlohmann::json::parse(track.out);
  std::size_t dropped = 0;
  for (const auto& row : doc["rows"])
    for (const auto& state : row["states"]) dropped += state == "dropped";
  std::size_t want = 0;
  for (std::int64_t step = 1; step <= 5; ++step)
    for (const int layer : {0, 1})
      for (const int head : {0, 1}) {
        const auto cover = file->cover(step, layer, head);
        want += static_cast<std::size_t>(std::count(cover.begin(), cover.begin() + n, kDropped));
      }
  EXPECT_GT(want, 0u);
  EXPECT_EQ(dropped, want);
}

// SemantiCache's pages in a capture of the real tokenizer's tokens: the file passes the documented
// reader's checks (pages tile, raw tokens coded raw, refined clusters coded refined), and the
// Hugging Face tokenizers library, decoding the ids itself, finds every delimiter raw and none in
// a cluster.
TEST(CaptureCli, SemanticPagesKeepDelimitersRawAndTileTheCache) {
  REQUIRE_TINY_MODEL();
  const fs::path out = work_dir() / "semantic.h5";
  const RunResult r = luka({"capture", "--model", kTinyModel.string(), "--prompt",
                            "The lighthouse keeper wrote in the log, twice: the fog rolled in. The ships waited; the gulls did not.\nDawn came late.",
                            "--preset", "semanticache", "--set", "page_size=4,tail=4,interval=2,gsc_tau=0.2,top_k=1", "--max-new-tokens", "8",
                            "--quiet", "--device", "cpu", "--threads", "2", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const RunResult check = run(kPython.string(), {(kRoot / "tests/captures/check_capture.py").string(), out.string(), "--expect-steps", "7"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const RunResult pages = run(kPython.string(), {(kRoot / "tests/captures/check_semantic_pages.py").string(), out.string(),
                                                 (kTinyModel / "tokenizer.json").string()});
  EXPECT_EQ(pages.exit_code, 0) << pages.out << pages.err;
  using namespace luka::capture;
  const auto file = CaptureFile::open(out);
  std::size_t raw = 0, listed = 0;
  for (const PageInfo& p : file->pages(1)) {
    raw += p.raw;
    listed += !p.members.empty();
  }
  EXPECT_GT(raw, 5u);
  EXPECT_GT(listed, 0u) << "no cluster with gaps: the capture checks nothing of the member lists";
  // A refined cluster's tokens are coded refined, wherever they lie.
  const StepMetrics m = file->metrics(7, 1);
  EXPECT_EQ(m.mode, kModeClustered);
}

TEST(CaptureCli, InspectTrackPrintsTheCapturedStates) {
  REQUIRE_TINY_MODEL();
  const fs::path cap = tiny_capture();
  const auto file = luka::capture::CaptureFile::open(cap);
  const auto summary = file->summary();
  ASSERT_EQ(summary.layout.layers, (std::vector<int>{0, 1}));
  ASSERT_EQ(summary.layout.heads, (std::vector<int>{0, 1}));
  ASSERT_EQ(summary.complete_steps, 5);
  const std::int64_t begin = 2, end = 26;  // "--track 2-25": prompt tokens 2-23 and the first two generated
  const std::vector<luka::capture::Token> tokens = file->tokens();
  std::string text;
  for (std::int64_t t = begin; t < end; ++t) text += tokens[static_cast<std::size_t>(t)].piece;

  // From the capture: per (layer, head), per step, the state of each tracked token and the span's attention.
  using namespace luka::capture;
  const std::map<std::uint8_t, char> letter = {{kAbsent, '.'}, {kSummarized, 's'}, {kRefined, 'R'},
                                               {kRaw, 'r'},    {kHeavy, 'h'},      {kDropped, 'x'}};
  struct Expected {
    std::vector<std::string> states;  // per step, one letter per token
    std::vector<double> mass;         // per step
    std::map<char, int> counts;       // token-steps per letter
  };
  std::map<std::pair<int, int>, Expected> want;
  std::map<char, int> seen;
  for (const int layer : {0, 1})
    for (const int head : {0, 1}) {
      Expected& e = want[{layer, head}];
      for (std::int64_t step = 1; step <= 5; ++step) {
        const std::vector<std::uint8_t> cover = file->cover(step, layer, head);
        const std::vector<float> row = file->row(step, layer, head);
        ASSERT_EQ(cover.size(), static_cast<std::size_t>(24 + step));
        std::string states;
        double mass = 0;
        for (std::int64_t t = begin; t < end; ++t) {
          const std::uint8_t state = t < static_cast<std::int64_t>(cover.size()) ? cover[static_cast<std::size_t>(t)] : kAbsent;
          states += letter.at(state);
          if (t < static_cast<std::int64_t>(row.size())) mass += row[static_cast<std::size_t>(t)];
        }
        for (const char c : states) ++e.counts[c], ++seen[c];
        e.states.push_back(states);
        e.mass.push_back(mass);
      }
    }
  // The capture shows every state, so the comparison below covers each letter.
  for (const char c : std::string(".sRrhx")) EXPECT_GT(seen[c], 0) << "no '" << c << "' in the capture";

  const std::string header = "tracking   tokens 2-25 (24 tokens): \"" + text + "\"\n";
  // One head's timeline.
  for (const auto& [key, e] : want) {
    const RunResult r = luka({"inspect", cap.string(), "--track", "2-25", "--layer", std::to_string(key.first), "--head",
                              std::to_string(key.second)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(r.out.rfind(header, 0), 0u) << r.out;
    std::istringstream lines(r.out.substr(header.size()));
    std::string line;
    std::getline(lines, line);
    EXPECT_EQ(line.rfind("step   states", 0), 0u) << line;
    for (std::size_t i = 0; i < 5; ++i) {
      ASSERT_TRUE(std::getline(lines, line));
      std::istringstream fields(line);
      std::int64_t step = 0;
      std::string states;
      double mass = -1;
      fields >> step >> states >> mass;
      EXPECT_EQ(step, static_cast<std::int64_t>(i) + 1) << line;
      EXPECT_EQ(states, e.states[i]) << "layer " << key.first << " head " << key.second << ": " << line;
      EXPECT_NEAR(mass, e.mass[i], 6e-6) << line;
    }
  }
  // The shares of token-steps per state, and the mean attention per step: per head of a layer,
  // then per layer (heads summed, attention averaged over heads).
  const auto check_table = [&](const std::string& out, const std::vector<std::tuple<int, std::string, std::map<char, int>, double>>& rows) {
    ASSERT_EQ(out.rfind(header, 0), 0u) << out;
    std::istringstream lines(out.substr(header.size()));
    std::string line;
    std::getline(lines, line);
    EXPECT_EQ(line.rfind("layer  head       raw  summary  refined    heavy  dropped   absent  attention/step", 0), 0u) << line;
    for (const auto& [layer, head, counts, mass] : rows) {
      ASSERT_TRUE(std::getline(lines, line));
      std::istringstream fields(line);
      int got_layer = -1;
      std::string got_head;
      fields >> got_layer >> got_head;
      EXPECT_EQ(got_layer, layer) << line;
      EXPECT_EQ(got_head, head) << line;
      int total = 0;
      for (const auto& [c, n] : counts) total += n;
      for (const char c : std::string("rsRhx.")) {
        std::string pct;
        fields >> pct;
        ASSERT_EQ(pct.back(), '%') << line;
        const double want_pct = 100.0 * (counts.count(c) ? counts.at(c) : 0) / total;
        EXPECT_NEAR(std::stod(pct), want_pct, 0.051) << "'" << c << "' in " << line;
      }
      double got_mass = -1;
      fields >> got_mass;
      EXPECT_NEAR(got_mass, mass, 6e-6) << line;
    }
    EXPECT_FALSE(std::getline(lines, line)) << line;
  };
  const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); };
  for (const int layer : {0, 1}) {
    const RunResult r = luka({"inspect", cap.string(), "--track", "2-25", "--layer", std::to_string(layer)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    check_table(r.out, {{layer, "0", want[{layer, 0}].counts, mean(want[{layer, 0}].mass)},
                        {layer, "1", want[{layer, 1}].counts, mean(want[{layer, 1}].mass)}});
  }
  {
    const RunResult r = luka({"inspect", cap.string(), "--track", "2-25"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::tuple<int, std::string, std::map<char, int>, double>> rows;
    for (const int layer : {0, 1}) {
      std::map<char, int> counts = want[{layer, 0}].counts;
      for (const auto& [c, n] : want[{layer, 1}].counts) counts[c] += n;
      rows.emplace_back(layer, "all", counts, (mean(want[{layer, 0}].mass) + mean(want[{layer, 1}].mass)) / 2);
    }
    check_table(r.out, rows);
  }
  // JSON: a row per step, layer and head, in that order, with each token's state and attention.
  const RunResult j = luka({"inspect", cap.string(), "--track", "2-25", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["begin"], begin);
  EXPECT_EQ(doc["end"], end);
  EXPECT_EQ(doc["text"], text);
  const std::map<char, std::string> name = {{'.', "absent"}, {'s', "summarized"}, {'R', "refined"},
                                            {'r', "raw"},    {'h', "heavy"},      {'x', "dropped"}};
  ASSERT_EQ(doc["rows"].size(), 5u * 2 * 2);
  std::size_t i = 0;
  for (std::int64_t step = 1; step <= 5; ++step)
    for (const int layer : {0, 1})
      for (const int head : {0, 1}) {
        const auto& row = doc["rows"][i++];
        EXPECT_EQ(row["step"], step);
        EXPECT_EQ(row["layer"], layer);
        EXPECT_EQ(row["head"], head);
        const std::string& states = want[{layer, head}].states[static_cast<std::size_t>(step - 1)];
        const std::vector<float> attention = file->row(step, layer, head);
        ASSERT_EQ(row["states"].size(), states.size());
        for (std::size_t k = 0; k < states.size(); ++k) {
          EXPECT_EQ(row["states"][k], name.at(states[k])) << "step " << step << " layer " << layer << " head " << head << " token " << begin + k;
          const std::size_t t = static_cast<std::size_t>(begin) + k;
          EXPECT_FLOAT_EQ(row["attention"][k].get<float>(), t < attention.size() ? attention[t] : 0.0f);
        }
      }
}

// A prompt file of 100,000 segments (about 1.2 million tokens) for a model of 256 positions is
// refused once 254 tokens are encoded: "more than 253 tokens" is what the encoder says when it
// stops there (the whole count would be named otherwise). Nothing is written. With
// --max-prompt-tokens the first tokens run, encoded the same way.
TEST(CaptureCli, LongPromptIsRefusedWithoutEncodingAllOfIt) {
  REQUIRE_TINY_MODEL();
  const fs::path file = work_dir() / "many.json", out = work_dir() / "many.h5";
  nlohmann::json prompt = {{"title", "many"}, {"separator", "\n\n"}, {"pattern", ""}, {"segments", nlohmann::json::array()}};
  prompt["topics"] = {{"A", {{"label", "A"}, {"colour", "#1f77b4"}}}, {"B", {{"label", "B"}, {"colour", "#ff7f0e"}}},
                      {"C", {{"label", "C"}, {"colour", "#2ca02c"}}}};
  std::string pattern;
  for (int i = 0; i < 100000; ++i) {
    const std::string topic(1, static_cast<char>('A' + i % 3));
    pattern += topic;
    prompt["segments"].push_back({{"topic", topic}, {"text", "Segment " + std::to_string(i) + " says one short thing."}});
  }
  prompt["pattern"] = pattern;
  std::ofstream(file) << prompt.dump();
  const std::vector<std::string> args = {"capture", "--model", kTinyModel.string(), "--prompt-file", file.string(), "--max-new-tokens", "4",
                                         "--quiet", "--device", "cpu", "--threads", "2", "--out", out.string()};
  const RunResult r = luka(args);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "luka capture: error: run: the prompt (more than 253 tokens) plus 4 new tokens exceeds the model's context of 256 tokens\n");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));

  std::vector<std::string> cut = args;
  cut.insert(cut.end() - 2, {"--max-prompt-tokens", "100", "--record", "layers=0;parts=rows"});
  const RunResult ok = luka(cut);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto capture = luka::capture::CaptureFile::open(out);
  EXPECT_EQ(capture->summary().layout.prompt_tokens, 100);
  const auto tokens = capture->tokens();
  std::string text;
  for (std::size_t i = 0; i < 100; ++i) text += tokens[i].piece;
  EXPECT_EQ(text.rfind("Segment 0 says one short thing.\n\nSegment 1 says", 0), 0u) << text;
}

TEST(CaptureCli, WikiSaladExampleBecomesSegments) {
  REQUIRE_MODEL();
  const fs::path data = fs::path(LUKA_SHARED_DATA) / "wikisalad" / "easy_2topic_short.json";
  if (!fs::exists(data)) GTEST_SKIP() << "no WikiSalad data at " << data;
  const fs::path out = work_dir() / "ws.h5";
  const RunResult r = luka({"capture", "--wikisalad", data.string(), "--example", "3", "--max-new-tokens", "2", "--record",
                            "layers=0;parts=maps", "--quiet", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(luka({"inspect", out.string(), "--json"}).out);
  const auto ex = nlohmann::json::parse(read_file(data))[3];
  const std::string prompt = ex["prompt"];
  std::size_t headers = 0;
  for (std::size_t p = prompt.find("# Segment "); p != std::string::npos; p = prompt.find("# Segment ", p + 1)) ++headers;
  ASSERT_EQ(j["segments"].size(), headers);
  std::int64_t prev_end = 0;
  for (const auto& s : j["segments"]) {
    EXPECT_GE(s["begin"].get<std::int64_t>(), prev_end);
    EXPECT_GT(s["end"].get<std::int64_t>(), s["begin"].get<std::int64_t>());
    prev_end = s["end"];
  }
  const RunResult bad = luka({"capture", "--wikisalad", data.string(), "--example", "100000", "--out", out.string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("100000"), std::string::npos) << bad.err;
}

}  // namespace
