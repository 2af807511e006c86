// Command-line options of one subcommand: declared once, so parsing and --help agree.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/util/error.h"

namespace luka::cli {

// Bad command line (unknown option, missing value): exit code 2 and a pointer to --help.
class UsageError : public luka::Error {
 public:
  using luka::Error::Error;
};

class ArgParser {
 public:
  ArgParser(std::string command, std::string synopsis, std::string description);

  // --name VALUE (or --name=VALUE). `fallback` is shown in --help only.
  ArgParser& option(const std::string& name, const std::string& value_name, const std::string& help,
                    const std::string& fallback = "");
  // --name, no value.
  ArgParser& flag(const std::string& name, const std::string& help);
  // Free text appended to --help (examples, environment).
  ArgParser& epilog(const std::string& text);

  // Parses argv[first..argc). Returns false when --help was asked for (help is printed).
  bool parse(int argc, char** argv, int first);

  // Reading an option the command did not declare is a bug in the code, not in the command line:
  // has/get/get_* throw std::logic_error naming it (a misspelled name never reads as "not given").
  // declares() lets a helper shared by several commands skip what one of them lacks.
  bool declares(const std::string& name) const { return find(name) != nullptr; }
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Every value given for a repeatable option, in order (get() returns the last).
  std::vector<std::string> get_all(const std::string& name) const;
  std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
  double get_double(const std::string& name, double fallback) const;
  bool get_flag(const std::string& name) const;

  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Spec {
    std::string name, value_name, help, fallback;
    bool is_flag = false;
  };
  const Spec* find(const std::string& name) const;
  void require_declared(const std::string& name) const;
  std::string command_, synopsis_, description_, epilog_;
  std::vector<Spec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_;
};

// Splits "1,2,3" into integers (in order, repeats kept: token ids); throws UsageError naming the
// option on a bad entry.
std::vector<std::int64_t> parse_int_list(const std::string& option, const std::string& text);

// A --layer or --head list in the grammar of every layer list (core/util/layer_range.h: N, A-B,
// several separated by ',' or '|', or all), ascending. With `count` >= 0 the indices are checked
// against it, else only read ("all" is then empty: every one). Throws UsageError naming the option.
std::vector<int> parse_layer_list(const std::string& option, const std::string& text, const std::string& noun,
                                  std::int64_t count = -1);

}  // namespace luka::cli
