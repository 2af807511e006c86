#include "app/cli/args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "core/util/layer_range.h"

namespace luka::cli {

ArgParser::ArgParser(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), description_(std::move(description)) {}

ArgParser& ArgParser::option(const std::string& name, const std::string& value_name,
                             const std::string& help, const std::string& fallback) {
  specs_.push_back({name, value_name, help, fallback, false});
  return *this;
}

ArgParser& ArgParser::flag(const std::string& name, const std::string& help) {
  specs_.push_back({name, "", help, "", true});
  return *this;
}

ArgParser& ArgParser::epilog(const std::string& text) {
  epilog_ = text;
  return *this;
}

const ArgParser::Spec* ArgParser::find(const std::string& name) const {
  for (const Spec& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

bool ArgParser::parse(int argc, char** argv, int first) {
  const std::string where = "luka " + command_;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2)
      throw UsageError(where + ": unexpected argument '" + arg + "' (see luka " + command_ + " --help)");
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Spec* spec = find(name);
    if (spec == nullptr)
      throw UsageError(where + ": unknown option --" + name + " (see luka " + command_ + " --help)");
    if (spec->is_flag) {
      if (inline_value) throw UsageError(where + ": --" + name + " takes no value");
      values_[name] = "1";
      continue;
    }
    if (inline_value) {
      values_[name] = *inline_value;
    } else {
      if (i + 1 >= argc) throw UsageError(where + ": --" + name + " needs a value (" + spec->value_name + ")");
      values_[name] = argv[++i];
    }
    all_[name].push_back(values_[name]);
  }
  return true;
}

void ArgParser::require_declared(const std::string& name) const {
  if (!find(name)) throw std::logic_error("luka " + command_ + ": the code reads --" + name + ", an option this command does not declare");
}

bool ArgParser::has(const std::string& name) const {
  require_declared(name);
  return values_.count(name) != 0;
}

std::vector<std::string> ArgParser::get_all(const std::string& name) const {
  require_declared(name);
  const auto it = all_.find(name);
  return it == all_.end() ? std::vector<std::string>{} : it->second;
}

std::string ArgParser::get(const std::string& name, const std::string& fallback) const {
  require_declared(name);
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::int64_t ArgParser::get_int(const std::string& name, std::int64_t fallback) const {
  require_declared(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("luka " + command_ + ": --" + name + " expects an integer, got '" + it->second + "'");
  return v;
}

double ArgParser::get_double(const std::string& name, double fallback) const {
  require_declared(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("luka " + command_ + ": --" + name + " expects a number, got '" + it->second + "'");
  return v;
}

bool ArgParser::get_flag(const std::string& name) const { return has(name); }

std::string ArgParser::help() const {
  std::ostringstream out;
  out << "usage: luka " << command_ << " " << synopsis_ << "\n\n" << description_ << "\n\noptions:\n";
  for (const Spec& s : specs_) {
    std::string left = "  --" + s.name + (s.is_flag ? "" : " " + s.value_name);
    if (left.size() < 28) left.resize(28, ' '); else left += "\n" + std::string(28, ' ');
    // Continuation lines of a multi-line help text line up under its first line.
    std::string help;
    for (const char c : s.help) help += c == '\n' ? "\n" + std::string(28, ' ') : std::string(1, c);
    out << left << help;
    if (!s.fallback.empty()) out << " (default: " << s.fallback << ")";
    out << "\n";
  }
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
