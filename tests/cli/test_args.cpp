// The option parser shared by every subcommand (app/cli/args.h): declared options parse, an
// undeclared one on the command line is a usage error, and code that reads an option its command
// never declared (a misspelled name) fails loudly instead of reading "not given".
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

ArgParser parser() {
  ArgParser p("demo", "[options]", "a test command");
  p.option("max-new-tokens", "N", "tokens", "64").option("set", "K=V", "repeatable").flag("quiet", "no progress");
  return p;
}

TEST(Args, DeclaredOptionsParse) {
  ArgParser p = parser();
  ASSERT_TRUE(parse(p, {"luka", "demo", "--max-new-tokens", "8", "--set", "a=1", "--set=b=2", "--quiet"}));
  EXPECT_EQ(p.get_int("max-new-tokens", 64), 8);
  EXPECT_EQ(p.get_all("set"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(p.get("set"), "b=2");
  EXPECT_TRUE(p.get_flag("quiet"));
  EXPECT_TRUE(p.declares("quiet"));
  EXPECT_FALSE(p.declares("verbose"));
}

TEST(Args, UnknownOptionsAndBadNumbersAreUsageErrors) {
  ArgParser p = parser();
  EXPECT_THROW(parse(p, {"luka", "demo", "--verbose"}), UsageError);
  ArgParser q = parser();
  ASSERT_TRUE(parse(q, {"luka", "demo", "--max-new-tokens", "eight"}));
  EXPECT_THROW(q.get_int("max-new-tokens", 64), UsageError);
}

TEST(Args, ReadingAnUndeclaredOptionIsABugNotAFallback) {
  ArgParser p = parser();
  ASSERT_TRUE(parse(p, {"luka", "demo"}));
  EXPECT_THROW(p.has("max-new-token"), std::logic_error);  // misspelled
  EXPECT_THROW(p.get("threads", "0"), std::logic_error);
  EXPECT_THROW(p.get_int("threads", 0), std::logic_error);
  EXPECT_THROW(p.get_double("tau", 1), std::logic_error);
  EXPECT_THROW(p.get_all("sets"), std::logic_error);
  EXPECT_THROW(p.get_flag("verbose"), std::logic_error);
  try {
    p.get("threads");
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "luka demo: the code reads --threads, an option this command does not declare");
  }
  EXPECT_EQ(p.get_int("max-new-tokens", 64), 64);  // declared and not given: the fallback
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
