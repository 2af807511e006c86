// --graph and --no-graph (app/cli/luka_options): they parse on every command that takes
// --device, contradict each other, and --graph is refused where it cannot run: on the CPU (a
// usage error, exit 2) and, on a GPU, by the commands that do not record their steps (exit 1;
// luka generate does).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/luka_options.h"
#include "core/util/error.h"
#include "tests/process_util.h"
#include "tests/random_checkpoint.h"

namespace luka::cli {
namespace {

bool parse(ArgParser& p, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return p.parse(static_cast<int>(argv.size()), argv.data(), 2);
}

TEST(GraphOptions, EagerUnlessGraphIsAskedForAndNeverBoth) {
  {
    ArgParser p("demo", "", "");
    add_graph_options(p);
    ASSERT_TRUE(parse(p, {"luka", "demo"}));
    EXPECT_EQ(graph_option(p), DecodeIssue::kEager);
    EXPECT_NO_THROW(check_graph_option(p, false));
  }
  {
    ArgParser p("demo", "", "");
    add_graph_options(p);
    ASSERT_TRUE(parse(p, {"luka", "demo", "--no-graph"}));
    EXPECT_EQ(graph_option(p), DecodeIssue::kEager);
    EXPECT_NO_THROW(check_graph_option(p, true));
  }
  {
    ArgParser p("demo", "", "");
    add_graph_options(p);
    ASSERT_TRUE(parse(p, {"luka", "demo", "--graph"}));
    EXPECT_EQ(graph_option(p), DecodeIssue::kGraph);
    EXPECT_THROW(check_graph_option(p, false), UsageError);  // the CPU has no CUDA graph
    EXPECT_THROW(check_graph_option(p, false, true), UsageError);
    EXPECT_NO_THROW(check_graph_option(p, true, true));  // generate on a GPU records its steps
    try {
      check_graph_option(p, true);
      ADD_FAILURE() << "--graph was accepted by a command that does not record its steps";
    } catch (const UsageError&) {
      ADD_FAILURE() << "a command without the recorded step is not a usage error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("only luka generate"), std::string::npos) << e.what();
    }
  }
  {
    ArgParser p("demo", "", "");
    add_graph_options(p);
    ASSERT_TRUE(parse(p, {"luka", "demo", "--graph", "--no-graph"}));
    EXPECT_THROW(graph_option(p), UsageError);
  }
}

TEST(GraphOptions, HelpSaysTheEagerStepIsTheDefault) {
  ArgParser p("demo", "", "");
  add_graph_options(p);
  const std::string help = p.help();
  EXPECT_NE(help.find("--no-graph"), std::string::npos) << help;
  EXPECT_NE(help.find("the default until the graph path"), std::string::npos) << help;
  EXPECT_NE(help.find("GPU only"), std::string::npos) << help;
}

// Every command that declares --device parses both flags (--check-args: the command line only).
TEST(GraphOptions, ParseOnEveryCommandThatTakesDevice) {
  const auto dir = test::test_dir("graph_options");
  const std::vector<std::vector<std::string>> commands = {{"generate"}, {"forward"},           {"perplexity"},
                                                          {"capture"},  {"eval", "wikisalad"}, {"calibrate"}};
  for (const auto& command : commands) {
    for (const char* flag : {"--no-graph", "--graph"}) {
      std::vector<std::string> args = command;
      args.push_back("--device");
      args.push_back("cpu");
      args.push_back(flag);
      args.push_back("--check-args");
      const test::RunResult r = test::run_program(LUKA_CLI_PATH, args, dir);
      EXPECT_EQ(r.exit_code, 0) << command[0] << " " << flag << ": " << r.err;
    }
    std::vector<std::string> both = command;
    for (const char* a : {"--graph", "--no-graph", "--check-args"}) both.push_back(a);
    const test::RunResult r = test::run_program(LUKA_CLI_PATH, both, dir);
    EXPECT_EQ(r.exit_code, 0) << "parsing alone accepts both; the command refuses them: " << r.err;
    const test::RunResult help = test::run_program(
        LUKA_CLI_PATH,
        [&] {
          std::vector<std::string> h = command;
          h.push_back("--help");
          return h;
        }(),
        dir);
    EXPECT_NE(help.out.find("--no-graph"), std::string::npos) << command[0];
  }
}

// Run for real on the CPU (luka forward on ids needs no tokenizer): --graph is a usage error naming
// the device it needs, and both flags together contradict.
TEST(GraphOptions, GraphOnTheCpuIsAUsageError) {
  const auto dir = test::test_dir("graph_options");
  const std::string model = test::write_random_qwen3(dir / "random-qwen3").string();
  const std::string out = (dir / "logits.npy").string();
  const test::RunResult r =
      test::run_program(LUKA_CLI_PATH, {"forward", "--model", model, "--device", "cpu", "--graph", "--ids", "1,2,3", "--out", out}, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--graph records CUDA graphs"), std::string::npos) << r.err;
  const test::RunResult both = test::run_program(
      LUKA_CLI_PATH, {"forward", "--model", model, "--device", "cpu", "--graph", "--no-graph", "--ids", "1,2,3", "--out", out}, dir);
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("contradict"), std::string::npos) << both.err;
  // --no-graph runs the eager step as before.
  const test::RunResult eager =
      test::run_program(LUKA_CLI_PATH, {"forward", "--model", model, "--device", "cpu", "--no-graph", "--ids", "1,2,3", "--out", out}, dir);
  EXPECT_EQ(eager.exit_code, 0) << eager.err;
}

}  // namespace
}  // namespace luka::cli
