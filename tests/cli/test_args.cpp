// The option parser shared by every subcommand (app/cli/args.h, on CLI11): declared options parse
// with the default declared beside them, an undeclared option or a malformed value on the command
// line is a one-line usage error, and code that reads an option its command never declared (a
// misspelled name) fails loudly instead of reading "not given".
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "app/cli/args.h"

namespace {

using luka::cli::ArgParser;
using luka::cli::UsageError;

bool parse(ArgParser& p, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return p.parse(static_cast<int>(argv.size()), argv.data(), 2);
}

// The message of the UsageError that parsing `words` throws ("" when it parses).
std::string usage_error(ArgParser& p, std::vector<std::string> words) {
  try {
    parse(p, std::move(words));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

void declare(ArgParser& p) {
  p.option("max-new-tokens", "N", "tokens", 64)
      .range(0, 1000)
      .option("top-p", "P", "mass", 0.95)
      .option("dtype", "fp32|bf16", "compute dtype", "fp32")
      .option("context", "N", "tokens", luka::cli::Default::described_integer("the model's context"))
      .option("set", "K=V", "repeatable")
      .flag("quiet", "no progress");
}

TEST(Args, DeclaredOptionsParse) {
  ArgParser p("demo", "[options]", "a test command");
  declare(p);
  ASSERT_TRUE(parse(p, {"luka", "demo", "--max-new-tokens", "8", "--set", "a=1", "--set=b=2", "--quiet", "--top-p=0.5",
                        "--context", "-3"}));
  EXPECT_EQ(p.get_int("max-new-tokens"), 8);
  EXPECT_EQ(p.get_double("top-p"), 0.5);
  EXPECT_EQ(p.get_int("context"), -3);
  EXPECT_EQ(p.get_all("set"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(p.get("set"), "b=2");
  EXPECT_TRUE(p.get_flag("quiet"));
  EXPECT_TRUE(p.declares("quiet"));
  EXPECT_FALSE(p.declares("verbose"));
}

// Each default is written once, where the option is declared: the code reads it and --help shows it.
TEST(Args, DefaultsAreDeclaredOnceAndShownInHelp) {
  ArgParser p("demo", "[options]", "a test command");
  declare(p);
  ASSERT_TRUE(parse(p, {"luka", "demo"}));
  EXPECT_FALSE(p.has("max-new-tokens"));
  EXPECT_EQ(p.get_int("max-new-tokens"), 64);
  EXPECT_EQ(p.get_double("top-p"), 0.95);
  EXPECT_EQ(p.get("dtype"), "fp32");
  EXPECT_EQ(p.get("set"), "");
  EXPECT_EQ(p.get_all("set"), std::vector<std::string>{});
  EXPECT_FALSE(p.get_flag("quiet"));
  EXPECT_FALSE(p.has("context"));
  EXPECT_THROW(p.get_int("context"), std::logic_error);  // worked out by the command, never a made-up number
  const std::string help = p.help();
  EXPECT_EQ(help.rfind("usage: luka demo [options]\n\na test command\n", 0), 0u) << help;
  EXPECT_NE(help.find("  --max-new-tokens N        tokens (default: 64)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --top-p P                 mass (default: 0.95)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --dtype fp32|bf16         compute dtype (default: fp32)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --context N               tokens (default: the model's context)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --set K=V                 repeatable\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --quiet                   no progress\n"), std::string::npos) << help;
  EXPECT_EQ(help.find("check-args"), std::string::npos) << help;  // hidden
}

TEST(Args, UnknownOptionsBadValuesAndMissingValuesAreOneLineUsageErrors) {
  const auto error = [](std::vector<std::string> words) {
    ArgParser p("demo", "[options]", "a test command");
    declare(p);
    words.insert(words.begin(), {"luka", "demo"});
    return usage_error(p, words);
  };
  EXPECT_EQ(error({"--verbose"}), "unknown option --verbose (see luka demo --help)");
  EXPECT_EQ(error({"--verbose=3"}), "unknown option --verbose (see luka demo --help)");
  EXPECT_EQ(error({"stray"}), "unexpected argument 'stray' (see luka demo --help)");
  EXPECT_EQ(error({"--max-new-tokens", "eight"}), "--max-new-tokens: expects an integer, got 'eight' (see luka demo --help)");
  EXPECT_EQ(error({"--max-new-tokens", "0x10"}), "--max-new-tokens: expects an integer, got '0x10' (see luka demo --help)");
  EXPECT_EQ(error({"--max-new-tokens", "1001"}), "--max-new-tokens: must be in 0..1000, got 1001 (see luka demo --help)");
  EXPECT_EQ(error({"--max-new-tokens", "-1"}), "--max-new-tokens: must be in 0..1000, got -1 (see luka demo --help)");
  EXPECT_EQ(error({"--top-p", "high"}), "--top-p: expects a number, got 'high' (see luka demo --help)");
  EXPECT_EQ(error({"--quiet=1"}), "--quiet takes no value (see luka demo --help)");
  EXPECT_EQ(error({"--max-new-tokens"}), "--max-new-tokens needs a value (N) (see luka demo --help)");
  for (const auto& words : std::vector<std::vector<std::string>>{{"--max-new-tokens"}, {"--set"}, {"--verbose"}, {"--top-p", "x"}}) {
    const std::string e = error(words);
    EXPECT_FALSE(e.empty()) << words[0];
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_EQ(error({"--max-new-tokens", "1000", "--set", "x"}), "");
}

// --check-args: the command line is parsed and checked, and the command is told there is nothing to run.
TEST(Args, CheckArgsParsesWithoutRunning) {
  ArgParser p("demo", "FILE [options]", "a test command");
  p.positional("FILE", "the input");
  declare(p);
  EXPECT_FALSE(parse(p, {"luka", "demo", "in.h5", "--max-new-tokens", "3", "--check-args"}));
  EXPECT_EQ(p.get("FILE"), "in.h5");
  ArgParser q("demo", "FILE [options]", "a test command");
  q.positional("FILE", "the input");
  declare(q);
  EXPECT_THROW(parse(q, {"luka", "demo", "in.h5", "--max-new-token", "3", "--check-args"}), UsageError);
  ArgParser r("demo", "FILE [options]", "a test command");
  r.positional("FILE", "the input");
  EXPECT_EQ(usage_error(r, {"luka", "demo", "a.h5", "b.h5"}), "unexpected argument 'b.h5' (see luka demo --help)");
}

TEST(Args, ReadingAnUndeclaredOptionIsABugNotAFallback) {
  ArgParser p("demo", "[options]", "a test command");
  declare(p);
  ASSERT_TRUE(parse(p, {"luka", "demo"}));
  EXPECT_THROW(p.has("max-new-token"), std::logic_error);  // misspelled
  EXPECT_THROW(p.get("threads"), std::logic_error);
  EXPECT_THROW(p.get_int("threads"), std::logic_error);
  EXPECT_THROW(p.get_double("tau"), std::logic_error);
  EXPECT_THROW(p.get_all("sets"), std::logic_error);
  EXPECT_THROW(p.get_flag("verbose"), std::logic_error);
  // Read as another type than the declared default's.
  EXPECT_THROW(p.get_double("max-new-tokens"), std::logic_error);
  EXPECT_THROW(p.get_int("dtype"), std::logic_error);
  EXPECT_THROW(p.get_flag("dtype"), std::logic_error);
  EXPECT_THROW(p.get("quiet"), std::logic_error);
  try {
    p.get("threads");
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "luka demo: the code reads --threads, an option this command does not declare");
  }
}

// --layer and --head (luka inspect): the grammar of every layer list, as a one-line usage error.
TEST(Args, LayerListsTakeTheOneGrammar) {
  using luka::cli::parse_layer_list;
  for (const char* list : {"0-2,5", "0-2|5", "5,0-2", "0,1,2,5", " 0 - 2 | 5 ", "0-2,2,5,1"})
    EXPECT_EQ(parse_layer_list("layer", list, "layer"), (std::vector<int>{0, 1, 2, 5})) << list;
  EXPECT_EQ(parse_layer_list("layer", "all", "layer"), std::vector<int>{});       // every recorded one
  EXPECT_EQ(parse_layer_list("head", "all", "head", 3), (std::vector<int>{0, 1, 2}));
  try {
    parse_layer_list("head", "0-3", "head", 2);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--head: head range '0-3' is out of range [0, 2)");
  }
  try {
    parse_layer_list("layer", "1,x", "layer");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--layer: 'x' in '1,x' is not a layer number or range (expected N, A-B, several separated by ',' or '|', or all)");
  }
  // Token ids stay a plain list: order and repeats are the ids'.
  EXPECT_EQ(luka::cli::parse_int_list("ids", "5,1,5"), (std::vector<std::int64_t>{5, 1, 5}));
}

}  // namespace
