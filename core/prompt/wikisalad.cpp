#include "core/prompt/wikisalad.h"

#include <map>

#include "core/prompt/json_input.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

using prompt_json::json;

namespace {

constexpr const char* kSeparator = "\n\n";

struct Header {
  std::size_t at;      // byte offset of the '#'
  int number;          // the i of "# Segment i: Title"
  std::string title;
};

// Every line of the form "# Segment <digits>: <title>".
std::vector<Header> find_headers(const std::string& prompt) {
  static const std::string kPrefix = "# Segment ";
  std::vector<Header> out;
  for (std::size_t line = 0; line < prompt.size();) {
    std::size_t eol = prompt.find('\n', line);
    if (eol == std::string::npos) eol = prompt.size();
    if (prompt.compare(line, kPrefix.size(), kPrefix) == 0) {
      std::size_t pos = line + kPrefix.size();
      int number = 0;
      const std::size_t digits = pos;
      while (pos < eol && prompt[pos] >= '0' && prompt[pos] <= '9' && number < 1000000) number = number * 10 + (prompt[pos++] - '0');
      if (pos > digits && prompt.compare(pos, 2, ": ") == 0 && pos + 2 < eol)
        out.push_back({line, number, prompt.substr(pos + 2, eol - pos - 2)});
    }
    line = eol + 1;
  }
  return out;
}

InterwovenPrompt convert(const json& example, int index, const std::filesystem::path& file) {
  const std::string where = file.string() + ": example " + std::to_string(index);
  if (!example.is_object() || !example.contains("prompt") || !example["prompt"].is_string())
    fail(where, "expected an object with a \"prompt\" string");
  const std::string prompt = example["prompt"].get<std::string>();
  const std::vector<Header> headers = find_headers(prompt);
  if (headers.empty()) fail(where, "the prompt has no \"# Segment i: Title\" header line");
  if (headers.front().at != 0)
    fail(where, "the prompt has " + std::to_string(headers.front().at) + " bytes before its first segment header");
  const std::string separator = kSeparator;

  InterwovenPrompt out;
  out.title = file.stem().string() + " #" + std::to_string(index);
  out.separator = separator;
  std::map<std::string, char> letters;  // title -> topic letter, in order of first appearance
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const Header& h = headers[i];
    if (h.number != static_cast<int>(i) + 1)
      fail(where, "segment header " + std::to_string(i + 1) + " is numbered " + std::to_string(h.number) +
                      " (\"# Segment " + std::to_string(h.number) + ": " + h.title + "\")");
    std::size_t end = prompt.size();
    if (i + 1 < headers.size()) {
      end = headers[i + 1].at;
      if (end < h.at + separator.size() || prompt.compare(end - separator.size(), separator.size(), separator) != 0)
        fail(where, "segment " + std::to_string(i + 1) + " is not followed by a blank line before the next header");
      end -= separator.size();
    }
    auto [it, added] = letters.emplace(h.title, static_cast<char>('A' + letters.size()));
    if (added && letters.size() > 26) fail(where, "more than 26 different segment titles");
    out.pattern += it->second;
    out.segments.push_back({h.title, default_topic_colour(topic_index(it->second)), prompt.substr(h.at, end - h.at)});
  }

  // The metadata pattern must agree with the titles; its offsets are known to be wrong and unused.
  if (example.contains("metadata") && example["metadata"].is_object() && example["metadata"].contains("pattern")) {
    const json& pattern = example["metadata"]["pattern"];
    if (!pattern.is_string() || pattern.get<std::string>() != out.pattern)
      fail(where, "metadata.pattern " + pattern.dump() + " does not match the segment titles (pattern \"" +
                      out.pattern + "\")");
  }
  return out;
}

json parse_examples(const std::string& text, const std::filesystem::path& file) {
  json root = prompt_json::parse(text, file, "WikiSalad file");
  if (!root.is_array()) fail(file.string(), "expected a JSON list of WikiSalad examples");
  if (root.empty()) fail(file.string(), "the file has no examples");
  return root;
}

}  // namespace

InterwovenPrompt from_wikisalad(const std::filesystem::path& json_file, int example) {
  const json examples = parse_examples(read_text_file(json_file, "WikiSalad file"), json_file);
  if (example < 0 || static_cast<std::size_t>(example) >= examples.size())
    fail(json_file.string(), "example " + std::to_string(example) + " is out of range (the file has " +
                                 std::to_string(examples.size()) + " examples: 0 to " +
                                 std::to_string(examples.size() - 1) + ")");
  return convert(examples[static_cast<std::size_t>(example)], example, json_file);
}

std::vector<InterwovenPrompt> load_wikisalad(const std::filesystem::path& json_file) {
  return parse_wikisalad(read_text_file(json_file, "WikiSalad file"), json_file);
}

std::vector<InterwovenPrompt> parse_wikisalad(const std::string& text, const std::filesystem::path& json_file) {
  const json examples = parse_examples(text, json_file);
  std::vector<InterwovenPrompt> out;
  out.reserve(examples.size());
  for (std::size_t i = 0; i < examples.size(); ++i) out.push_back(convert(examples[i], static_cast<int>(i), json_file));
  return out;
}

}  // namespace luka
