#include "app/cli/args.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <CLI/CLI.hpp>

#include "core/util/layer_range.h"

namespace luka::cli {

struct ArgParser::Spec {
  std::string name, value_name;
  Kind kind = Kind::kText;
  std::optional<Default::Value> fallback;
  std::optional<std::pair<double, double>> range;
  CLI::Option* option = nullptr;
};

struct ArgParser::Cli {
  CLI::App app;
  CLI::Option* check_args = nullptr;
};

namespace {

// Strict base-10 integers and plain decimal numbers: CLI11's own conversion also takes 0x10 and
// reads 010 as octal, which a --seed or --example should not.
std::optional<double> read_number(const std::string& text, bool integer) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = 0;
  if (integer) {
    const long long i = std::strtoll(text.c_str(), &end, 10);
    v = static_cast<double>(i);
  } else {
    v = std::strtod(text.c_str(), &end);
    if (!std::isfinite(v)) return std::nullopt;
  }
  if (*end != '\0' || errno == ERANGE) return std::nullopt;
  return v;
}

std::string format_number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));  // 1000000, not 1e+06
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string default_text(const Default::Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return format_number(*d);
  return std::get<std::string>(v);
}

}  // namespace

ArgParser::ArgParser(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), description_(std::move(description)),
      cli_(std::make_unique<Cli>()) {
  cli_->app.name("luka " + command_);
  cli_->app.description(description_);
  cli_->app.set_help_flag("-h,--help", "show this help");
  // Parses and checks the command line, then runs nothing (tests/cli/test_doc_examples).
  cli_->check_args = cli_->app.add_flag("--check-args", "check the command line only")->group("");
}

ArgParser::~ArgParser() = default;

ArgParser::Spec& ArgParser::add(const std::string& name, const std::string& value_name, const std::string& help, Kind kind) {
  if (find(name)) throw std::logic_error("luka " + command_ + ": --" + name + " is declared twice");
  auto spec = std::make_unique<Spec>();
  spec->name = name;
  spec->value_name = value_name;
  spec->kind = kind;
  CLI::App& app = cli_->app;
  if (kind == Kind::kFlag) {
    spec->option = app.add_flag("--" + name, help)->disable_flag_override();
  } else {
    spec->option = app.add_option(kind == Kind::kPositional ? name : "--" + name, CLI::callback_t{}, help);
    spec->option->type_name(value_name)->expected(1);
  }
  // Given again, an option's last value counts (get_all reads every one: --set).
  spec->option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  specs_.push_back(std::move(spec));
  return *specs_.back();
}

ArgParser& ArgParser::option(const std::string& name, const std::string& value_name, const std::string& help) {
  add(name, value_name, help, Kind::kText);
  return *this;
}

ArgParser& ArgParser::option(const std::string& name, const std::string& value_name, const std::string& help,
                             const Default& fallback) {
  const Default::Value& v = fallback.value();
  const Kind kind = std::holds_alternative<std::int64_t>(v) ? Kind::kInteger
                    : std::holds_alternative<double>(v)     ? Kind::kNumber
                                                            : Kind::kText;
  Spec& spec = add(name, value_name, help, kind);
  if (!fallback.described()) spec.fallback = v;
  spec.option->default_str(fallback.described() ? fallback.shown() : default_text(v));
  if (kind != Kind::kText) {
    const Spec* s = &spec;  // specs_ holds it by pointer: the address stays
    spec.option->check(CLI::Validator(
        [s](std::string& text) -> std::string {
          const auto value = read_number(text, s->kind == Kind::kInteger);
          if (!value) return std::string(s->kind == Kind::kInteger ? "expects an integer" : "expects a number") + ", got '" + text + "'";
          if (s->range && (*value < s->range->first || *value > s->range->second))
            return "must be in " + format_number(s->range->first) + ".." + format_number(s->range->second) + ", got " + text;
          return "";
        },
        ""));
  }
  return *this;
}

ArgParser& ArgParser::range(double min, double max) {
  if (specs_.empty() || (specs_.back()->kind != Kind::kInteger && specs_.back()->kind != Kind::kNumber))
    throw std::logic_error("luka " + command_ + ": range() follows an integer or number option");
  specs_.back()->range = std::make_pair(min, max);
  return *this;
}

ArgParser& ArgParser::flag(const std::string& name, const std::string& help) {
  add(name, "", help, Kind::kFlag);
  return *this;
}

ArgParser& ArgParser::positional(const std::string& name, const std::string& help) {
  add(name, name, help, Kind::kPositional);
  return *this;
}

ArgParser& ArgParser::epilog(const std::string& text) {
  epilog_ = text;
  cli_->app.footer(text);
  return *this;
}

const ArgParser::Spec* ArgParser::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s->name == name) return s.get();
  return nullptr;
}

bool ArgParser::parse(int argc, char** argv, int first) {
  // CLI11 takes the words last first.
  std::vector<std::string> words(argv + std::min(first, argc), argv + argc);
  std::reverse(words.begin(), words.end());
  const std::string see = " (see luka " + command_ + " --help)";
  try {
    cli_->app.parse(words);
  } catch (const CLI::CallForHelp&) {
    std::fputs(help().c_str(), stdout);
    return false;
  } catch (const CLI::ExtrasError& e) {
    const std::vector<std::string> extra = cli_->app.remaining();
    if (extra.empty()) throw UsageError(e.what() + see);
    const std::string& word = extra.front();
    if (word.rfind("--", 0) == 0 && word.size() > 2)
      throw UsageError("unknown option " + word.substr(0, word.find('=')) + see);
    throw UsageError("unexpected argument '" + word + "'" + see);
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--ids: 1 required LIST missing" and "quiet was given a disallowed flag override".
    const std::string what = e.what();
    for (const auto& s : specs_) {
      if (what.rfind("--" + s->name + ": ", 0) == 0) throw UsageError("--" + s->name + " needs a value (" + s->value_name + ")" + see);
      if (what.rfind(s->name + " was given a disallowed flag override", 0) == 0) throw UsageError("--" + s->name + " takes no value" + see);
    }
    throw UsageError(what + see);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what() + see);
  }
  return cli_->check_args->count() == 0;
}

const ArgParser::Spec& ArgParser::require_declared(const std::string& name) const {
  const Spec* spec = find(name);
  if (!spec) throw std::logic_error("luka " + command_ + ": the code reads --" + name + ", an option this command does not declare");
  return *spec;
}

const Default::Value& ArgParser::fallback_of(const Spec& spec) const {
  if (!spec.fallback)
    throw std::logic_error("luka " + command_ + ": --" + spec.name + "'s default is worked out by the command: read it only when has()");
  return *spec.fallback;
}

bool ArgParser::has(const std::string& name) const { return require_declared(name).option->count() != 0; }

std::vector<std::string> ArgParser::get_all(const std::string& name) const {
  const Spec& spec = require_declared(name);
  if (spec.kind == Kind::kFlag) throw std::logic_error("luka " + command_ + ": --" + name + " is a flag: read it with get_flag");
  return spec.option->results();
}

std::string ArgParser::get(const std::string& name) const {
  const Spec& spec = require_declared(name);
  if (spec.kind == Kind::kFlag) throw std::logic_error("luka " + command_ + ": --" + name + " is a flag: read it with get_flag");
  if (spec.option->count() != 0) return spec.option->results().back();
  return spec.fallback ? default_text(*spec.fallback) : std::string();
}

std::int64_t ArgParser::get_int(const std::string& name) const {
  const Spec& spec = require_declared(name);
  if (spec.kind != Kind::kInteger) throw std::logic_error("luka " + command_ + ": --" + name + " is not declared with an integer default");
  if (spec.option->count() == 0) return std::get<std::int64_t>(fallback_of(spec));
  return static_cast<std::int64_t>(std::strtoll(spec.option->results().back().c_str(), nullptr, 10));  // checked at parse
}

double ArgParser::get_double(const std::string& name) const {
  const Spec& spec = require_declared(name);
  if (spec.kind != Kind::kNumber) throw std::logic_error("luka " + command_ + ": --" + name + " is not declared with a number default");
  if (spec.option->count() == 0) return std::get<double>(fallback_of(spec));
  return std::strtod(spec.option->results().back().c_str(), nullptr);  // checked at parse
}

bool ArgParser::get_flag(const std::string& name) const {
  const Spec& spec = require_declared(name);
  if (spec.kind != Kind::kFlag) throw std::logic_error("luka " + command_ + ": --" + name + " takes a value: read it with get");
  return spec.option->count() != 0;
}

// The layout of every luka help: usage, description, one option a line (value name, help,
// default) and the epilog. The texts are CLI11's option records, the ones it parses with.
std::string ArgParser::help() const {
  std::ostringstream out;
  out << "usage: luka " << command_ << " " << synopsis_ << "\n\n" << description_ << "\n";
  const auto line = [&](const Spec& s) {
    std::string left = s.kind == Kind::kPositional ? "  " + s.name
                                                   : "  --" + s.name + (s.kind == Kind::kFlag ? "" : " " + s.value_name);
    if (left.size() < 28) left.resize(28, ' '); else left += "\n" + std::string(28, ' ');
    // Continuation lines of a multi-line help text line up under its first line.
    std::string help;
    for (const char c : s.option->get_description()) help += c == '\n' ? "\n" + std::string(28, ' ') : std::string(1, c);
    out << left << help;
    if (const std::string d = s.option->get_default_str(); !d.empty()) out << " (default: " << d << ")";
    out << "\n";
  };
  bool any_positional = false;
  for (const auto& s : specs_) any_positional |= s->kind == Kind::kPositional;
  if (any_positional) {
    out << "\narguments:\n";
    for (const auto& s : specs_)
      if (s->kind == Kind::kPositional) line(*s);
  }
  out << "\noptions:\n";
  for (const auto& s : specs_)
    if (s->kind != Kind::kPositional) line(*s);
  out << "  --help                    show this help\n";
  if (!epilog_.empty()) out << "\n" << epilog_ << "\n";
  return out.str();
}

std::vector<std::int64_t> parse_int_list(const std::string& option, const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    if (b == std::string::npos) throw UsageError("--" + option + ": empty entry in '" + text + "'");
    item = item.substr(b, e - b + 1);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE)
      throw UsageError("--" + option + ": '" + item + "' is not an integer");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--" + option + ": no values given");
  return out;
}

std::vector<int> parse_layer_list(const std::string& option, const std::string& text, const std::string& noun,
                                  std::int64_t count) {
  std::vector<int> out;
  try {
    const LayerRange range = LayerRange::parse(text, "--" + option, noun);
    for (const std::int64_t v : count >= 0 ? range.indices(count) : range.listed()) out.push_back(static_cast<int>(v));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return out;
}

}  // namespace luka::cli
