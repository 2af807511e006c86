// luka eval wikisalad, luka sweep and luka calibrate on a tiny random Qwen3 checkpoint with the real Qwen3 tokenizer: answers are
// deterministic and equal to `luka generate` on the same chat prompt; a run cut off (by a kill, or
// a results file whose last line was cut) resumes to the same results; other settings are refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/util/npy.h"
#include "tests/process_util.h"

namespace fs = std::filesystem;
using luka::test::read_file;
using luka::test::RunResult;
using nlohmann::json;

extern char** environ;

namespace {

const fs::path kCheckpoint = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-tok";

#define REQUIRE_CHECKPOINT()                                                                              \
  if (!fs::exists(kCheckpoint / "config.json")) GTEST_SKIP() << "no qwen3-tok checkpoint at " << kCheckpoint \
                                                             << " (made by the checkpoints fixture from ../shared/data)"

RunResult run_luka(const std::vector<std::string>& args) { return luka::test::run_program(LUKA_CLI_PATH, args, luka::test::test_dir("eval_cli")); }

// Three examples, two questions each (one unanswerable), in WikiSalad's layout.
fs::path write_questions(const fs::path& dir) {
  json examples = json::array();
  for (int e = 0; e < 3; ++e)
    examples.push_back({{"example_id", e},
                        {"prompt", "# Segment 1: Cats\n\nCats sleep " + std::to_string(10 + e) + " hours a day.\n\n\nQuestion 1: How long?"},
                        {"questions", {{{"question", "How long do cats sleep?"}, {"answers", {{"text", {std::to_string(10 + e) + " hours"}}}}},
                                       {{"question", "What do dogs eat?"}, {"answers", {{"text", json::array()}}}}}},
                        {"metadata", {{"pattern", "A"}}}});
  const fs::path f = dir / "easy_2topic_tiny.json";
  std::ofstream(f) << examples.dump();
  return f;
}

// The complete lines of a results file (a killed run may leave its last line cut).
std::vector<json> lines(const fs::path& f) {
  std::vector<json> out;
  const std::string text = read_file(f);
  for (std::size_t at = 0, eol; (eol = text.find('\n', at)) != std::string::npos; at = eol + 1)
    out.push_back(json::parse(text.substr(at, eol - at)));
  return out;
}

// Results keyed by preset/example/question, without the timings.
std::map<std::string, json> by_key(const std::vector<json>& records) {
  std::map<std::string, json> out;
  for (json r : records) {
    r.erase("seconds");
    out[r["preset"].get<std::string>() + "/" + std::to_string(r["example"].get<int>()) + "/" + std::to_string(r["question"].get<int>())] = r;
  }
  return out;
}

}  // namespace

TEST(EvalCli, AnswersAreDeterministicAndMatchGenerate) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli");
  const fs::path questions = write_questions(dir);
  fs::remove_all(dir / "a");
  const std::vector<std::string> args = {"eval", "wikisalad", "--model", kCheckpoint.string(), "--file", questions.string(), "--presets",
                                         "dense,lined,mixed(1,0)", "--max-new-tokens", "6", "--threads", "1", "--device", "cpu"};
  std::vector<std::string> a = args;
  a.insert(a.end(), {"--out", (dir / "a").string()});
  const RunResult r = run_luka(a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto records = lines(dir / "a" / "results.jsonl");
  ASSERT_EQ(records.size(), 18u);
  // Table 1's layout on standard output: one row for the difficulty, one for all.
  EXPECT_EQ(r.out.rfind("dataset  dense", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\neasy "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nall "), std::string::npos) << r.out;
  const json summary = json::parse(read_file(dir / "a" / "summary.json"));
  EXPECT_EQ(summary["table"]["totals"]["dense"]["questions"], 6);
  for (const json& rec : records) {
    if (rec["answers"].empty()) EXPECT_FALSE(rec["match"].get<bool>()) << rec.dump();
    EXPECT_LE(rec["new_tokens"].get<int>(), 6);
  }

  // The same settings in a fresh folder: the same answers.
  a = args;
  a.insert(a.end(), {"--out", (dir / "b").string(), "--restart"});
  ASSERT_EQ(run_luka(a).exit_code, 0);
  EXPECT_EQ(by_key(records), by_key(lines(dir / "b" / "results.jsonl")));

  // Dense answers equal `luka generate` on the chat prompt the harness builds.
  for (const json& rec : records) {
    if (rec["preset"] != "dense" || rec["example"] != 1) continue;
    const std::string context = "# Segment 1: Cats\n\nCats sleep 11 hours a day.\n\n\nQuestion 1: How long?";
    const RunResult g = run_luka({"generate", "--model", kCheckpoint.string(), "--chat", "--system",
                              "You are a helpful assistant that answers questions based on the given context. Answer in a few words or "
                              "a short phrase. Do not include explanations.",
                              "--prompt", context + "\n\nQuestion: " + rec["question_text"].get<std::string>() + "\nAnswer:",
                              "--max-new-tokens", "6", "--threads", "1", "--device", "cpu", "--json"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const json out = json::parse(g.out);
    EXPECT_EQ(out["prompt_tokens"], rec["prompt_tokens"]) << rec.dump();
    EXPECT_EQ(static_cast<int>(out["ids"].size()), rec["new_tokens"].get<int>()) << rec.dump();
    std::string text = out["text"].get<std::string>();
    if (text.find("<|") == std::string::npos) {  // no special token to leave out
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
      EXPECT_EQ(text, rec["prediction"].get<std::string>());
    }
  }
}

TEST(EvalCli, ResumesFromACutResultsFileAndRefusesOtherSettings) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli");
  const fs::path questions = write_questions(dir);
  const std::vector<std::string> args = {"eval", "wikisalad", "--model", kCheckpoint.string(), "--file", questions.string(), "--presets",
                                         "dense,lined", "--max-new-tokens", "6", "--threads", "1", "--device", "cpu"};
  std::vector<std::string> a = args;
  a.insert(a.end(), {"--out", (dir / "whole").string(), "--restart"});
  ASSERT_EQ(run_luka(a).exit_code, 0);
  const std::string whole = read_file(dir / "whole" / "results.jsonl");

  // A run stopped after five answers, the sixth line half written.
  fs::remove_all(dir / "cut");
  fs::create_directories(dir / "cut");
  fs::copy_file(dir / "whole" / "run.json", dir / "cut" / "run.json");
  std::size_t at = 0;
  for (int i = 0; i < 5; ++i) at = whole.find('\n', at) + 1;
  std::ofstream(dir / "cut" / "results.jsonl", std::ios::binary) << whole.substr(0, at) << whole.substr(at, 30);
  a = args;
  a.insert(a.end(), {"--out", (dir / "cut").string()});
  const RunResult resumed = run_luka(a);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("5 answered already"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("7 to go"), std::string::npos) << resumed.err;
  EXPECT_EQ(by_key(lines(dir / "cut" / "results.jsonl")), by_key(lines(dir / "whole" / "results.jsonl")));

  // Other decoding settings on the same folder are refused; more presets are added.
  a = args;
  a[9] = "12";  // --max-new-tokens
  a.insert(a.end(), {"--out", (dir / "cut").string()});
  const RunResult other = run_luka(a);
  EXPECT_EQ(other.exit_code, 1) << other.err;
  EXPECT_NE(other.err.find("another max_new_tokens"), std::string::npos) << other.err;
  a = args;
  a[7] = "dense,lined,clustered";  // --presets
  a.insert(a.end(), {"--out", (dir / "cut").string()});
  const RunResult more = run_luka(a);
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_NE(more.err.find("12 answered already"), std::string::npos) << more.err;
  EXPECT_EQ(lines(dir / "cut" / "results.jsonl").size(), 18u);
}

TEST(EvalCli, AKilledRunResumes) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli");
  const fs::path questions = write_questions(dir);
  fs::remove_all(dir / "killed");
  const std::vector<std::string> args = {LUKA_CLI_PATH, "eval", "wikisalad", "--model", kCheckpoint.string(), "--file", questions.string(),
                                         "--presets", "dense,lined,clustered,mixed(1,0)", "--max-new-tokens", "48", "--threads", "1",
                                         "--device", "cpu", "--quiet", "--out", (dir / "killed").string()};
  std::vector<char*> argv;
  for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(dir / "killed" / "results.jsonl") && fs::file_size(dir / "killed" / "results.jsonl") > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::size_t before = lines(dir / "killed" / "results.jsonl").size();
  std::vector<std::string> again(args.begin() + 1, args.end());
  const RunResult r = run_luka(again);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto records = lines(dir / "killed" / "results.jsonl");
  EXPECT_EQ(records.size(), 24u) << "killed after " << before << " answers";
  EXPECT_EQ(by_key(records).size(), 24u);
}

// luka sweep: a perplexity grid run here; a removed result is the only run redone; the same grid
// planned for Slurm, its runs started as separate processes (as array tasks would), merges to the
// same table; the plot files are written.
TEST(SweepCli, RunsResumesAndMergesPlannedRuns) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli");
  const fs::path text = dir / "text.txt";
  {
    std::ofstream t(text);
    for (int i = 0; i < 40; ++i) t << "The cat sat on the mat and looked at the garden, where birds sang. ";
  }
  const std::vector<std::string> metric = {"--", "--model", kCheckpoint.string(), "--text-file", text.string(), "--max-tokens", "96",
                                           "--prompt-tokens", "48", "--threads", "1", "--device", "cpu", "--set", "page_size=4,tail=8"};
  const auto sweep = [&](const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> a = {"sweep", "--metric", "perplexity", "--out", out.string(), "--baseline", "preset=dense", "--grid",
                                  "preset=clustered;compressor=mean,attention_weighted;refine_math=exact;rule=top_frac;top_frac=0.25,1"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), metric.begin(), metric.end());
    return run_luka(a);
  };
  fs::remove_all(dir / "local");
  const RunResult local = sweep(dir / "local", {});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const std::string csv = read_file(dir / "local" / "results.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "item,preset,compressor,refine_math,rule,top_frac,perplexity");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6);  // header, 4 grid points, the baseline
  for (const char* f : {"plot.png", "plot.svg", "plot.pdf", "results.json", "manifest.json"}) EXPECT_TRUE(fs::exists(dir / "local" / f)) << f;
  // Exact refinement of every page is dense attention: the two top_frac=1 runs equal the baseline
  // up to float32 summation order (a page's keys are summed apart from the rest).
  const json results = json::parse(read_file(dir / "local" / "results.json"))["results"];
  const double dense = results[4]["value"].get<double>();
  EXPECT_NEAR(results[1]["value"].get<double>(), dense, 1e-6 * dense);
  EXPECT_NEAR(results[3]["value"].get<double>(), dense, 1e-6 * dense);
  EXPECT_GT(std::abs(results[0]["value"].get<double>() - dense), 1e-3 * dense);  // a quarter of the pages refined is not dense

  // Resume: only the run without a result is redone.
  fs::remove(dir / "local" / "items" / "2.json");
  const RunResult resumed = sweep(dir / "local", {});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("5 runs, 4 done already, 1 to go"), std::string::npos) << resumed.err;
  EXPECT_EQ(read_file(dir / "local" / "results.csv"), csv);
  // Another grid on the same folder is refused.
  std::vector<std::string> other = {"sweep", "--metric", "perplexity", "--out", (dir / "local").string(), "--grid", "top_k=1,2"};
  other.insert(other.end(), metric.begin(), metric.end());
  const RunResult refused = run_luka(other);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("another grid"), std::string::npos) << refused.err;

  // Planned: the array script, then each run as its own process, then the merge.
  fs::remove_all(dir / "planned");
  const RunResult plan = sweep(dir / "planned", {"--plan", "--slurm-cpus", "3"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const std::string sbatch = read_file(dir / "planned" / "sweep.sbatch");
  EXPECT_NE(sbatch.find("#SBATCH --array=0-4\n"), std::string::npos) << sbatch;
  EXPECT_NE(sbatch.find("#SBATCH --cpus-per-task=3\n"), std::string::npos) << sbatch;
  EXPECT_NE(sbatch.find("sweep --run-item \"$SLURM_ARRAY_TASK_ID\" --out"), std::string::npos) << sbatch;
  EXPECT_FALSE(fs::exists(dir / "planned" / "items" / "0.json"));
  const RunResult early = run_luka({"sweep", "--merge", "--out", (dir / "planned").string()});
  EXPECT_EQ(early.exit_code, 1);
  EXPECT_NE(early.err.find("5 of 5 runs have no result yet"), std::string::npos) << early.err;
  std::string both;
  for (int i = 4; i >= 0; --i)  // any order, two at a time
    both += luka::test::quote(LUKA_CLI_PATH) + " sweep --run-item " + std::to_string(i) + " --out " + luka::test::quote((dir / "planned").string()) +
            (i % 2 ? " & " : " && wait && ");
  ASSERT_EQ(luka::test::run_shell("bash -c " + luka::test::quote(both + "true"), dir).exit_code, 0);
  const RunResult merged = run_luka({"sweep", "--merge", "--out", (dir / "planned").string()});
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(read_file(dir / "planned" / "results.csv"), csv);
}

// luka calibrate: per layer and head numbers in range, exact refinement of every page measured as
// dense (KL 0, recall 1), and an auto config within its budget written alongside.
TEST(CalibrateCli, MeasuresCandidatesAndWritesAnAutoConfig) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli");
  const RunResult r = run_luka({"calibrate", "--model", kCheckpoint.string(), "--prompt-file", (fs::path(LUKA_SOURCE_DIR) / "assets/prompts/demo.json").string(),
                                "--max-tokens", "120", "--prompt-tokens", "60", "--threads", "1", "--device", "cpu", "--set",
                                "page_size=4,tail=8,window=8", "--candidates",
                                "lined:rho=0.25;clustered:top_k=1;clustered:rule=top_frac,top_frac=1,refine_math=exact",
                                "--out", (dir / "calib.json").string(), "--config-out", (dir / "auto.json").string(), "--budget", "0.6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json cal = json::parse(read_file(dir / "calib.json"));
  EXPECT_EQ(cal["decode_steps"], 59);
  EXPECT_EQ(cal["candidates"].size(), 3u);
  EXPECT_TRUE(cal["topics"].get<bool>());
  const int heads = cal["num_heads"].get<int>();
  ASSERT_EQ(cal["layers"].size(), cal["num_layers"].get<std::size_t>());
  for (const json& layer : cal["layers"]) {
    EXPECT_DOUBLE_EQ(layer["dense_entries"].get<double>(), 60 + 30.0);  // T = 60 + s over s = 1..59
    ASSERT_EQ(layer["heads"].size(), static_cast<std::size_t>(heads));
    for (const json& h : layer["heads"]) {
      EXPECT_GE(h["sink"].get<double>(), 0);
      EXPECT_LE(h["sink"].get<double>(), 1);
      EXPECT_GE(h["entropy"].get<double>(), 0);
      EXPECT_LE(h["entropy"].get<double>(), std::log(120.0));
      EXPECT_GE(h["locality"].get<double>(), 0);
      EXPECT_LT(h["locality"].get<double>(), 119);
    }
    const json& lined = layer["candidates"][0];
    EXPECT_GT(lined["kl"].get<double>(), 0);
    EXPECT_LT(lined["entries"].get<double>(), 90);
    const json& exact = layer["candidates"][2];
    EXPECT_NEAR(exact["kl"].get<double>(), 0, 1e-5) << "every page refined exactly is dense attention";
    EXPECT_NEAR(exact["recall"].get<double>(), 1, 1e-5);
  }
  const json automatic = json::parse(read_file(dir / "auto.json"));
  EXPECT_EQ(automatic["layers"].size(), cal["num_layers"].get<std::size_t>());
  // The config loads as a preset and as a layers-config file.
  const RunResult info = run_luka({"info", "--model", kCheckpoint.string(), "--preset", "auto:" + (dir / "calib.json").string() + ",budget=0.6"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  const RunResult file = run_luka({"info", "--model", kCheckpoint.string(), "--layers-config", (dir / "auto.json").string()});
  EXPECT_EQ(file.exit_code, 0) << file.err;
}

// A calibration travels in the capture (luka capture --calibration): `luka inspect --calibration
// --json` gives back the file's values exactly, the text table names each head's best candidate, and
// a file that is not a calibration, or is one of another model, is refused before any capture exists.
// luka calibrate --kascade N: a layers config of Kascade layers with N anchors, layer 0 first, every
// other layer reusing the nearest anchor before it; with one anchor per layer each is its own; the
// file runs through --layers-config.
TEST(CalibrateCli, KascadeWritesAnchorsAndHeadMapsAsALayersConfig) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli") / "kascade";
  fs::create_directories(dir);
  const std::string demo = (fs::path(LUKA_SOURCE_DIR) / "assets/prompts/demo.json").string();
  const auto calibrate = [&](const std::string& count, const fs::path& out) {
    return run_luka({"calibrate", "--model", kCheckpoint.string(), "--prompt-file", demo, "--max-tokens", "80", "--threads", "1", "--device",
                     "cpu", "--kascade", count, "--kascade-k", "8", "--kascade-queries", "40", "--out", out.string(), "--quiet"});
  };
  for (const int count : {1, 2}) {
    const fs::path out = dir / ("kascade" + std::to_string(count) + ".json");
    SCOPED_TRACE("--kascade " + std::to_string(count));
    const RunResult r = calibrate(std::to_string(count), out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("anchors: 0"), std::string::npos) << r.out;
    const json layers = json::parse(read_file(out)).at("layers");
    ASSERT_EQ(layers.size(), 2u);  // the fixture checkpoint's layers
    std::vector<int> anchors;
    for (int l = 0; l < 2; ++l) {
      const json& c = layers.at(std::to_string(l));
      EXPECT_EQ(c.at("mode"), "kascade");
      const int source = c.at("kascade_source").get<int>();
      if (source < 0) {
        anchors.push_back(l);
      } else {
        EXPECT_EQ(source, anchors.back()) << "layer " << l << " reuses the nearest anchor before it";
        EXPECT_EQ(c.at("kascade_head_map"), "0");  // one KV head: the map names it
      }
    }
    EXPECT_EQ(static_cast<int>(anchors.size()), count);
    EXPECT_EQ(anchors.front(), 0);
  }
  const RunResult ppl = run_luka({"perplexity", "--model", kCheckpoint.string(), "--text-file", demo, "--max-tokens", "60", "--threads", "1",
                                  "--device", "cpu", "--layers-config", (dir / "kascade1.json").string()});
  EXPECT_EQ(ppl.exit_code, 0) << ppl.err;
  const RunResult too_many = calibrate("3", dir / "bad.json");
  EXPECT_EQ(too_many.exit_code, 2) << too_many.err;
  EXPECT_NE(too_many.err.find("fewer than 3 anchors"), std::string::npos) << too_many.err;
}

// --dar writes the probe's basis; with every direction kept the probe changes no logit (the same
// perplexity as dense, to the printed digit), with fewer it does, and a bad basis is one clear error.
TEST(CalibrateCli, DarWritesABasisThatAtFullRankChangesNothing) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli") / "dar";
  fs::create_directories(dir);
  const std::string demo = (fs::path(LUKA_SOURCE_DIR) / "assets/prompts/demo.json").string();
  const fs::path basis = dir / "basis.npy";
  const RunResult r = run_luka({"calibrate", "--model", kCheckpoint.string(), "--prompt-file", demo, "--max-tokens", "80", "--threads", "1",
                                "--device", "cpu", "--dar", "--out", basis.string(), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("variance held by the first"), std::string::npos) << r.out;
  const luka::NpyArray a = luka::read_npy_f32(basis);
  ASSERT_EQ(a.shape.size(), 5u);
  const std::int64_t D = a.shape[4];
  EXPECT_EQ(a.shape[0], 2);  // the fixture's layers
  EXPECT_EQ(a.shape[1], 3);
  EXPECT_EQ(a.shape[3], D + 2);
  const auto ppl = [&](const std::string& set) {
    std::vector<std::string> args{"perplexity", "--model", kCheckpoint.string(), "--text-file", demo, "--max-tokens", "60", "--prompt-tokens",
                                  "20", "--threads", "1", "--device", "cpu", "--json"};
    if (!set.empty()) args.insert(args.end(), {"--set", set});
    const RunResult p = run_luka(args);
    EXPECT_EQ(p.exit_code, 0) << p.err;
    return p.exit_code == 0 ? json::parse(p.out).at("perplexity").get<double>() : -1.0;
  };
  const double dense = ppl("");
  EXPECT_NEAR(ppl("dar_window=4,dar_rank=" + std::to_string(D) + ",dar_basis=" + basis.string()), dense, 1e-4 * dense);
  EXPECT_GT(std::abs(ppl("dar_window=4,dar_rank=1,dar_basis=" + basis.string()) - dense), 1e-3 * dense);
  const RunResult missing = run_luka({"perplexity", "--model", kCheckpoint.string(), "--text-file", demo, "--max-tokens", "60", "--device", "cpu",
                                      "--set", "dar_window=4,dar_basis=" + (dir / "none.npy").string()});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_NE(missing.err.find("none.npy"), std::string::npos) << missing.err;
  const RunResult both = run_luka({"calibrate", "--model", kCheckpoint.string(), "--prompt-file", demo, "--dar", "--kascade", "1", "--out",
                                   (dir / "x.npy").string()});
  EXPECT_EQ(both.exit_code, 2) << both.err;
}

TEST(CalibrateCli, TheCaptureCarriesTheCalibrationAndInspectShowsIt) {
  REQUIRE_CHECKPOINT();
  const fs::path dir = luka::test::test_dir("eval_cli") / "carried";
  fs::create_directories(dir);
  const std::string demo = (fs::path(LUKA_SOURCE_DIR) / "assets/prompts/demo.json").string();
  const RunResult cal = run_luka({"calibrate", "--model", kCheckpoint.string(), "--prompt-file", demo, "--max-tokens", "60", "--threads", "1",
                                  "--device", "cpu", "--set", "page_size=4,tail=8,window=8", "--candidates", "lined:rho=0.25;clustered:top_k=1",
                                  "--out", (dir / "calib.json").string(), "--quiet"});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  const json file = json::parse(read_file(dir / "calib.json"));
  const std::vector<std::string> capture = {"capture", "--model", kCheckpoint.string(), "--prompt-file", demo, "--max-prompt-tokens", "40",
                                            "--max-new-tokens", "3", "--threads", "1", "--device", "cpu", "--quiet"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = capture;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_luka(a);
  };
  const RunResult run = with({"--calibration", (dir / "calib.json").string(), "--out", (dir / "run.h5").string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;

  const RunResult js = run_luka({"inspect", (dir / "run.h5").string(), "--calibration", "--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(json::parse(js.out), file) << "the capture holds the file's values, every digit";
  // One layer and head: the file's numbers for them.
  const RunResult one = run_luka({"inspect", (dir / "run.h5").string(), "--calibration", "--json", "--layer", "1", "--head", "0"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const json o = json::parse(one.out);
  ASSERT_EQ(o["layers"].size(), 1u);
  EXPECT_EQ(o["layers"][0]["heads"], json::array({file["layers"][1]["heads"][0]}));
  EXPECT_EQ(o["layers"][0]["candidates"][1]["heads"], json::array({file["layers"][1]["candidates"][1]["heads"][0]}));

  // The text table: per head the lower output error of the two candidates is marked best.
  const RunResult text = run_luka({"inspect", (dir / "run.h5").string(), "--calibration", "--layer", "0"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (int h = 0; h < file["num_heads"].get<int>(); ++h) {
    const double e0 = file["layers"][0]["candidates"][0]["heads"][h]["rel_l2"], e1 = file["layers"][0]["candidates"][1]["heads"][h]["rel_l2"];
    std::istringstream lines(text.out);
    std::string line, found;
    while (std::getline(lines, line))
      if (line.rfind("0      " + std::to_string(h) + " ", 0) == 0) found = line;
    ASSERT_FALSE(found.empty()) << text.out;
    EXPECT_EQ(found.substr(found.size() - 2), e1 < e0 ? "c1" : "c0") << found;
  }
  EXPECT_NE(run_luka({"inspect", (dir / "run.h5").string()}).out.find("calibration interwoven"), std::string::npos);

  // Refused: not a calibration; a calibration of other layers and heads. No capture is written.
  std::ofstream(dir / "bad.json") << R"({"calibration": 1, "source": "x"})";
  const RunResult bad = with({"--calibration", (dir / "bad.json").string(), "--out", (dir / "bad.h5").string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.json: not a calibration from luka calibrate"), std::string::npos) << bad.err;
  json other = file;
  other["num_layers"] = file["num_layers"].get<int>() + 1;
  other["layers"].push_back(file["layers"][0]);
  other["layers"].back()["layer"] = file["num_layers"];
  std::ofstream(dir / "other.json") << other.dump();
  const RunResult mismatch = with({"--calibration", (dir / "other.json").string(), "--out", (dir / "other.h5").string()});
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_NE(mismatch.err.find("is a calibration of a model with"), std::string::npos) << mismatch.err;
  EXPECT_FALSE(fs::exists(dir / "bad.h5"));
  EXPECT_FALSE(fs::exists(dir / "other.h5"));
  // A capture without one says so.
  const RunResult plain = with({"--out", (dir / "plain.h5").string()});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const RunResult none = run_luka({"inspect", (dir / "plain.h5").string(), "--calibration"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("has no calibration attached"), std::string::npos) << none.err;
}
