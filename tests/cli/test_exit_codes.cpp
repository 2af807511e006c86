// One exit-code rule for the whole command line (README: 2 for a bad command line, option values
// included; 1 for bad files and data; 0 only for success), enforced by walking every option of
// every subcommand as its --help lists it, each with a bad value. An option the walk has no bad
// value for fails the test, so a new option must say here how it is refused (or why any value is
// accepted).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/process_util.h"

namespace fs = std::filesystem;
using luka::test::quote;
using luka::test::read_file;
using luka::test::RunResult;

namespace {

// What one bad value of an option must do.
struct Bad {
  std::string value;   // the value given
  int exit_code = 2;   // 2: the command line's fault; 1: a bad file
  std::string names;   // text the one error line must hold: the option, or the file
  std::vector<std::string> with = {};  // other options the bad one needs to be read
};

// How the walk treats an option: bad values to try, or the reason any value is accepted.
struct Rule {
  std::vector<Bad> bad;
  std::string accepted;  // non-empty: any value is valid (free text, an output name)
};

// A folder per test: ctest runs this file's tests as processes side by side, and each case's
// output files (case0/, case1/) must not be another test's.
const fs::path& work() {
  static const fs::path dir = [] {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return fs::path(LUKA_TEST_WORK) / "exit_codes" / (test ? test->name() : "outside-a-test");
  }();
  return dir;
}

// The battery's inputs (tests/battery/run_battery.py --inputs-only, the battery_inputs fixture): a
// random two-layer checkpoint with a byte-level tokenizer, a text, a WikiSalad file, a capture.
fs::path inputs() { return fs::path(LUKA_TEST_WORK) / "battery-inputs" / "inputs"; }
fs::path tiny_model() { return inputs() / "model"; }
fs::path tiny_capture() { return inputs() / "capture.h5"; }
fs::path text_file() { return inputs() / "prompts" / "text.txt"; }

RunResult run_in(const fs::path& dir, const std::vector<std::string>& args) {
  fs::create_directories(dir);
  std::string cmd = "env -u LUKA_MODEL " + quote(LUKA_CLI_PATH);
  for (const auto& a : args) cmd += " " + quote(a);
  return luka::test::run_shell(cmd, dir);
}

// The options of `luka <command...> --help`: name -> value name ("" for a flag), from the lines
// of its "options:" section.
std::map<std::string, std::string> options_of(const std::vector<std::string>& command) {
  std::vector<std::string> args = command;
  args.push_back("--help");
  const RunResult r = run_in(work() / "help", args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::string> out;
  std::istringstream in(r.out);
  bool in_options = false;
  static const std::regex line(R"(^  --([a-z0-9-]+)(?: (\S+))?)");
  for (std::string l; std::getline(in, l);) {
    if (l == "options:") {
      in_options = true;
    } else if (l.empty()) {
      in_options = false;
    } else if (std::smatch m; in_options && std::regex_search(l, m, line)) {
      out[m[1]] = m[2];
    }
  }
  return out;
}

// Bad values by the value name --help shows, for options whose name alone says what is valid.
Rule rule_by_value_name(const std::string& option, const std::string& value_name) {
  const std::string flag = "--" + option;
  static const std::map<std::string, std::vector<std::string>> numbers = {
      {"N", {"x", "-5"}}, {"K", {"x", "-1"}}, {"L", {"x", "-1"}}, {"H", {"x", "-1"}}, {"S", {"x", "-1"}},
      {"I", {"x", "-1"}}, {"Q", {"x", "-1"}}, {"T", {"x", "-1"}}, {"P", {"x", "2"}},  {"B", {"x", "2"}},
      {"LEVEL", {"x", "-1"}}};
  if (const auto it = numbers.find(value_name); it != numbers.end()) {
    Rule r;
    for (const std::string& v : it->second) r.bad.push_back({v, 2, flag});
    return r;
  }
  if (value_name == "fp32|bf16" || value_name == "fp32|bf16|fp16") return {{{"fp64", 2, flag}}, ""};
  if (value_name == "auto|cpu|cuda|cuda:N") return {{{"tpu", 2, flag}, {"cuda:x", 2, flag}}, ""};
  if (value_name == "auto|quantized|dequantized") return {{{"half", 2, flag}}, ""};
  if (value_name == "log|linear" || value_name == "heads|layers" || value_name == "HOW") return {{{"sideways", 2, flag}}, ""};
  if (value_name == "STR" || value_name == "TEXT") return {{}, "free text"};
  return {};
}

// Options whose bad values depend on what they mean, not their value name (keyed by the option;
// "command:option" where one command differs).
const std::map<std::string, Rule>& special_rules() {
  const std::string missing = (work() / "absent" / "nothing.json").string();
  static const std::map<std::string, Rule> rules = {
      {"model", {{{missing, 1, missing}, {"", 2, "--model"}}, ""}},
      {"preset", {{{"nonsense", 2, "--preset"}, {"mixed(x,2)", 2, "--preset"}, {"auto:", 2, "--preset"}}, ""}},
      {"presets", {{{"nonsense", 2, "--presets"}}, ""}},
      {"layers-config", {{{missing, 1, missing}}, ""}},
      {"set", {{{"mode=bogus", 2, "--set"}, {"layer=99,mode=lined", 2, "--set"}, {"nokey=1", 2, "--set"}}, ""}},
      {"schedule", {{{"step=x", 2, "--schedule"}, {"step=2:layers=99:mode=lined", 2, "--schedule"}}, ""}},
      {"record", {{{"bogus", 2, "--record"}, {"layers=99", 2, "--record"}}, ""}},
      {"deflate", {{{"-1", 2, "--deflate"}, {"10", 2, "--deflate"}, {"fast", 2, "--deflate"}}, ""}},
      {"ids", {{{"1,x", 2, "--ids"}, {"1,-2", 2, "--ids"}}, ""}},
      {"jsonl", {{{missing, 1, missing}}, ""}},
      {"text-file", {{{missing, 1, missing}}, ""}},
      {"prompt-file", {{{missing, 1, missing}}, ""}},
      {"segments", {{{missing, 1, missing}}, ""}},
      {"wikisalad", {{{missing, 1, missing}}, ""}},
      {"calibration", {{{missing, 1, missing}}, ""}},
      {"capture", {{{missing, 1, missing}}, ""}},
      {"compare", {{{missing, 1, missing}}, ""}},
      {"file", {{{missing, 1, missing}}, ""}},
      {"data", {{{(work() / "absent").string(), 1, (work() / "absent").string()}}, ""}},
      {"candidates", {{{"bogus", 2, "--candidates"}, {"lined:nokey=1", 2, "--candidates"}}, ""}},
      {"kascade-heads", {{{"sideways", 2, "--kascade-heads", {"--kascade", "1"}}}, ""}},
      {"grid", {{{"nokey", 2, "--grid"}}, ""}},
      {"baseline", {{{"nokey", 2, "--baseline"}}, ""}},
      {"metric", {{{"speed", 2, "--metric"}}, ""}},
      {"x", {{{"nokey", 2, "--x"}}, ""}},
      {"slurm-time", {{{"soon", 2, "--slurm-time"}}, ""}},
      {"slurm-partition", {{}, "a partition name is the cluster's to check"}},
      // (An item past the manifest's is checked against the manifest, which this walk has none of.)
      {"run-item", {{{"x", 2, "--run-item"}}, ""}},
      {"title", {{}, "free text"}},
      {"track", {{{"x-y", 2, "--track"}}, ""}},
      {"decode-topic", {{{"?", 2, "--decode-topic"}}, ""}},
      {"view", {{{"sideways", 2, "--view"}}, ""}},
      {"size", {{{"99999x99999", 2, "--size"}, {"12x12", 2, "--size"}, {"wide", 2, "--size"}}, ""}},
      {"format", {{{"sideways", 2, "--format"}}, ""}},
      {"capture-record", {{{"bogus", 2, "--capture-record"}}, ""}},
      {"capture-dir", {{}, "an output folder: made when needed"}},
      {"lengths", {{{"x", 2, "--lengths"}}, ""}},
      {"depths", {{{"x", 2, "--depths"}}, ""}},
      {"tasks", {{{"nope", 2, "--tasks"}}, ""}},
      {"haystack", {{{missing, 1, missing}}, ""}},
      {"essay", {{{missing, 1, missing}}, ""}},
      {"qa-data", {{{missing, 1, missing}}, ""}},
      {"script", {{{missing, 1, missing}}, ""}},
      {"studio:model", {{}, "the Studio loads its model in the window, and says there when it cannot"}},
      {"export:out", {{{(work() / "figure.bmp").string(), 2, "--out"}}, ""}},
      {"forward:out", {{{(work() / "absent" / "o.npy").string(), 1, (work() / "absent").string()}}, ""}},
      {"sweep:out", {{}, "a new folder is made"}},
      {"out", {{}, "an output name: a new file or folder is made"}},
      {"config-out", {{}, "an output name: a new file is made"}},
  };
  return rules;
}

// The command lines the walk starts from: each valid apart from the option under test.
struct Command {
  std::vector<std::string> name;
  std::vector<std::string> base;
};

std::vector<Command> commands() {
  const std::string model = tiny_model().string(), capture = tiny_capture().string();
  const std::string dir = work().string();
  std::vector<Command> out = {
      {{"info"}, {"--model", model}},
      {{"tokenize"}, {"--model", model}},  // JSON lines from standard input (empty)
      {{"forward"}, {"--model", model, "--ids", "1,2", "--device", "cpu", "--threads", "1", "--out", dir + "/o.npy"}},
      {{"generate"}, {"--model", model, "--prompt", "hi", "--max-new-tokens", "1", "--device", "cpu", "--threads", "1"}},
      {{"perplexity"}, {"--model", model, "--text-file", text_file().string(), "--device", "cpu", "--threads", "1"}},
      {{"eval", "wikisalad"}, {"--model", model, "--file", (inputs() / "eval" / "good.json").string(), "--examples", "1",
                               "--max-new-tokens", "1", "--out", dir + "/eval", "--device", "cpu", "--threads", "1"}},
      {{"sweep"}, {"--grid", "preset=dense", "--metric", "perplexity", "--out", dir + "/sweep", "--plan", "--quiet", "--",
                   "--model", model, "--text-file", text_file().string()}},
      {{"calibrate"}, {"--model", model, "--prompt", "hello there world", "--out", dir + "/cal.json", "--max-tokens", "8",
                       "--device", "cpu", "--threads", "1", "--quiet"}},
      {{"capture"}, {"--model", model, "--prompt", "hi", "--out", dir + "/c.h5", "--max-new-tokens", "2", "--device", "cpu",
                     "--threads", "1", "--quiet"}},
      {{"inspect"}, {capture}},
      {{"export"}, {"--capture", capture, "--layer", "0", "--head", "0", "--out", dir + "/f.png"}},
  };
  // The Studio, where this build has it: a bad option fails before any window opens.
  if (run_in(work() / "help", {"--help"}).out.find("  studio ") != std::string::npos) out.push_back({{"studio"}, {}});
  // The long-context evaluations, where this build has them.
  const RunResult evals = run_in(work() / "help", {"eval", "--help"});
  for (const char* name : {"niah", "ruler"})
    if (evals.out.find(std::string("  ") + name + " ") != std::string::npos)
      // 512 tokens: room for the question and the needle (NIAH's take about 370 of the Qwen3 tokenizer's).
      out.push_back({{"eval", name}, {"--model", model, "--lengths", "512", "--samples", "1", "--max-new-tokens", "1", "--out",
                                      dir + "/" + name, "--quiet", "--device", "cpu", "--threads", "1"}});
  return out;
}

std::string describe(const std::vector<std::string>& args) {
  std::string s = "luka";
  for (const auto& a : args) s += " " + quote(a);
  return s;
}

// The error lines of standard error: progress and notes ("device: cpu", "attention: ...") may
// come before an error, which is one line, "luka ...: error: ...".
std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);)
    if (l.find(": error: ") != std::string::npos || l.rfind("luka", 0) == 0) out.push_back(l);
  return out;
}

struct Case {
  std::vector<std::string> args;
  Bad bad;
};

// Runs the cases two at a time (each is a process of its own) and checks each: its exit code, and
// one error line, "luka ...: error: ...", naming the option or the file.
void run_cases(const std::vector<Case>& cases) {
  std::vector<RunResult> results(cases.size());
  const auto run = [&](std::size_t i) { results[i] = run_in(work() / ("case" + std::to_string(i % 2)), cases[i].args); };
  for (std::size_t i = 0; i < cases.size(); i += 2) {
    auto other = std::async(std::launch::async, run, i);
    if (i + 1 < cases.size()) run(i + 1);
    other.get();
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const RunResult& r = results[i];
    const Case& c = cases[i];
    const std::vector<std::string> lines = error_lines(r.err);
    EXPECT_EQ(r.exit_code, c.bad.exit_code) << describe(c.args) << "\n" << r.err;
    if (lines.empty()) {
      ADD_FAILURE() << describe(c.args) << ": no error line";
      continue;
    }
    EXPECT_EQ(lines.size(), 1u) << describe(c.args) << "\n" << r.err;
    EXPECT_NE(lines[0].find(c.bad.names), std::string::npos) << describe(c.args) << " names '" << c.bad.names << "'?\n" << r.err;
    EXPECT_EQ(lines[0].rfind("luka", 0), 0u) << r.err;
    EXPECT_NE(lines[0].find(": error: "), std::string::npos) << r.err;
  }
}

class ExitCodes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(tiny_model() / "config.json") || !fs::exists(tiny_capture()))
      GTEST_SKIP() << "no tiny model or capture in " << inputs() << " (the battery_inputs fixture)";
    fs::create_directories(work());
  }
};

// Every option of every subcommand with a bad value: 2 for a bad value, 1 for a file that is not
// there (an option this walk does not know fails, naming itself).
TEST_F(ExitCodes, EveryOptionOfEverySubcommandWithABadValue) {
  std::vector<Case> cases;
  for (const Command& c : commands()) {
    const std::string cmd = c.name[0];
    for (const auto& [option, value_name] : options_of(c.name)) {
      if (value_name.empty() || option == "help") continue;  // a flag
      Rule rule;
      const auto& special = special_rules();
      if (const auto it = special.find(cmd + ":" + option); it != special.end()) {
        rule = it->second;
      } else if (const auto it2 = special.find(option); it2 != special.end()) {
        rule = it2->second;
      } else {
        rule = rule_by_value_name(option, value_name);
      }
      if (rule.bad.empty() && rule.accepted.empty()) {
        ADD_FAILURE() << describe(c.name) << " --" << option << " " << value_name
                      << ": the exit-code walk has no bad value for it (add one to special_rules)";
        continue;
      }
      for (const Bad& bad : rule.bad) {
        std::vector<std::string> args = c.name;
        // The option under test replaces the base's value of it (and the prompt it stands for), and
        // goes before a sweep's "--".
        std::vector<std::string> base = c.base;
        const bool prompt = option == "prompt-file" || option == "wikisalad";
        for (std::size_t i = 0; i + 1 < base.size();) {
          if ((base[i] == "--" + option || (prompt && base[i] == "--prompt")) && base[i + 1] != "--")
            base.erase(base.begin() + static_cast<long>(i), base.begin() + static_cast<long>(i) + 2);
          else
            ++i;
        }
        const auto dashes = std::find(base.begin(), base.end(), "--");
        const long at = dashes - base.begin();
        base.insert(base.begin() + at, {"--" + option, bad.value});
        base.insert(base.begin() + at, bad.with.begin(), bad.with.end());
        args.insert(args.end(), base.begin(), base.end());
        cases.push_back({args, bad});
      }
    }
  }
  ASSERT_GT(cases.size(), 60u);
  run_cases(cases);
}

// The base command lines themselves succeed, so each refusal above is the option's.
TEST_F(ExitCodes, TheWalksBaseCommandLinesSucceed) {
  for (const Command& c : commands()) {
    // eval and calibrate: slow, and their data is the battery's; studio: its base opens a window
    // (tests/studio runs it under a virtual display).
    if (c.name[0] == "eval" || c.name[0] == "calibrate" || c.name[0] == "studio") continue;
    std::vector<std::string> args = c.name;
    args.insert(args.end(), c.base.begin(), c.base.end());
    const RunResult r = run_in(work() / "base", args);
    EXPECT_EQ(r.exit_code, 0) << describe(args) << "\n" << r.err;
  }
}

// Outside an option: an unknown command or option, a missing value, a missing positional file.
TEST_F(ExitCodes, CommandsOptionsAndArgumentsThatAreNotThere) {
  const std::string absent = (work() / "absent.h5").string();
  const std::vector<Case> cases = {
      {{"frobnicate"}, {"", 2, "frobnicate"}},
      {{"info", "--no-such-option"}, {"", 2, "--no-such-option"}},
      {{"info", "--model"}, {"", 2, "--model"}},
      {{"eval", "nope"}, {"", 2, "nope"}},
      {{"inspect", absent}, {"", 1, absent}},
      {{"inspect"}, {"", 2, "FILE"}},
      {{"export", "--capture", tiny_capture().string()}, {"", 2, "--out"}},
  };
  run_cases(cases);
}

}  // namespace
