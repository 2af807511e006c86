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

}  // namespace
