// Command-line options of one subcommand, on CLI11: each option is declared once, with its value
// name, help and default, so parsing, --help and the value the code reads agree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/util/error.h"

namespace luka::cli {

// Bad command line (unknown option, missing or malformed value): exit code 2 and a pointer to --help.
class UsageError : public luka::Error {
 public:
  using luka::Error::Error;
};

// An option's default, written where the option is declared. Its type is the option's: an integer
// default makes an integer option, a floating-point one a number option, text a text option.
class Default {
 public:
  using Value = std::variant<std::int64_t, double, std::string>;
  Default(int v) : value_(std::int64_t{v}) {}
  Default(long v) : value_(std::int64_t{v}) {}
  Default(long long v) : value_(std::int64_t{v}) {}
  Default(double v) : value_(v) {}
  Default(const char* v) : value_(std::string(v)) {}
  Default(std::string v) : value_(std::move(v)) {}
  // A default the command works out when the option is not given (the model's context, the
  // stored dtype): --help shows `shown`, and the code reads the option only where has() is true.
  static Default described_integer(std::string shown) { return Default(std::int64_t{0}, std::move(shown)); }
  static Default described_text(std::string shown) { return Default(std::string(), std::move(shown)); }
  // An integer option with no default (the command requires it, or does without it).
  static Default integer() { return described_integer(""); }
  const Value& value() const { return value_; }
  bool described() const { return described_; }
  const std::string& shown() const { return shown_; }

 private:
  Default(Value v, std::string shown) : value_(std::move(v)), shown_(std::move(shown)), described_(true) {}
  Value value_;
  std::string shown_;
  bool described_ = false;
};

class ArgParser {
 public:
  ArgParser(std::string command, std::string synopsis, std::string description);
  ~ArgParser();
  ArgParser(const ArgParser&) = delete;
  ArgParser& operator=(const ArgParser&) = delete;

  // --name VALUE (or --name=VALUE) with no default: has() says whether it was given, get() is ""
  // when it was not. Given more than once, get() reads the last and get_all() every one.
  ArgParser& option(const std::string& name, const std::string& value_name, const std::string& help);
  // --name VALUE with its default, declared only here: --help shows it, and get/get_int/get_double
  // return it when the option is not given (a described default: get_int/get_double throw
  // std::logic_error, get is ""). A value that is not of the default's type is a usage
  // error when parsing (integers in base 10).
  ArgParser& option(const std::string& name, const std::string& value_name, const std::string& help,
                    const Default& fallback);
  // The last declared option's value must lie in [min, max]: a usage error when parsing.
  ArgParser& range(double min, double max);
  // --name, no value.
  ArgParser& flag(const std::string& name, const std::string& help);
  // NAME: one positional argument (optional at parse; the command says when it is missing).
  ArgParser& positional(const std::string& name, const std::string& help);
  // Free text appended to --help (examples, environment).
  ArgParser& epilog(const std::string& text);

  // Parses argv[first..argc). Returns false when there is nothing to run: --help was asked for
  // (help is printed), or --check-args (hidden) asked only to check the command line, which
  // parsed. Throws UsageError with one line otherwise.
  bool parse(int argc, char** argv, int first);

  // Reading an option the command did not declare is a bug in the code, not in the command line:
  // has/get/get_* throw std::logic_error naming it (a misspelled name never reads as "not given"),
  // as does reading an option as another type than its default's.
  // declares() lets a helper shared by several commands skip what one of them lacks.
  bool declares(const std::string& name) const { return find(name) != nullptr; }
  bool has(const std::string& name) const;
  std::string get(const std::string& name) const;
  // Every value given for a repeatable option, in order (get() returns the last).
  std::vector<std::string> get_all(const std::string& name) const;
  std::int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_flag(const std::string& name) const;

  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  enum class Kind { kText, kInteger, kNumber, kFlag, kPositional };
  struct Spec;
  struct Cli;
  const Spec* find(const std::string& name) const;
  const Spec& require_declared(const std::string& name) const;
  const Default::Value& fallback_of(const Spec& spec) const;
  Spec& add(const std::string& name, const std::string& value_name, const std::string& help, Kind kind);
  std::string command_, synopsis_, description_, epilog_;
  std::vector<std::unique_ptr<Spec>> specs_;
  std::unique_ptr<Cli> cli_;
};

// Runs f(), which reads an option's value: a luka::Error from it is the command line's fault, the
// UsageError (exit 2) with the same message. `option` (without "--"), when given, prefixes a
// message that does not already start with it.
template <typename F>
decltype(auto) option_value(const std::string& option, F&& f) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    const std::string what = e.what();
    if (option.empty() || what.rfind("--" + option, 0) == 0) throw UsageError(what);
    if (what.rfind(option + ": ", 0) == 0) throw UsageError("--" + what);  // "dtype: unknown ..."
    throw UsageError("--" + option + ": " + what);
  }
}

// Splits "1,2,3" into integers (in order, repeats kept: token ids); throws UsageError naming the
// option on a bad entry.
std::vector<std::int64_t> parse_int_list(const std::string& option, const std::string& text);

// A --layer or --head list in the grammar of every layer list (core/util/layer_range.h: N, A-B,
// several separated by ',' or '|', or all), ascending. With `count` >= 0 the indices are checked
// against it, else only read ("all" is then empty: every one). Throws UsageError naming the option.
std::vector<int> parse_layer_list(const std::string& option, const std::string& text, const std::string& noun,
                                  std::int64_t count = -1);

}  // namespace luka::cli
