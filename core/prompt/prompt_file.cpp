#include "core/prompt/prompt_file.h"

#include <fstream>

#include <map>

#include "core/prompt/json_input.h"
#include "core/util/error.h"
#include "core/util/output_file.h"
#include "core/util/text_file.h"

namespace luka {

using prompt_json::json;

namespace {

struct Topic {
  std::string label;
  std::string colour;
};

std::map<char, Topic> read_topics(const json& root, const std::string& where) {
  if (!root.contains("topics")) fail(where, "\"topics\" is missing (an object such as {\"A\": {\"label\": ...}})");
  const json& topics = root["topics"];
  if (!topics.is_object() || topics.empty())
    fail(where, "\"topics\" must be a non-empty object keyed by topic letter (\"A\", \"B\", ...), not " +
                    topics.dump().substr(0, 80));
  std::map<char, Topic> out;
  for (const auto& item : topics.items()) {
    const std::string& key = item.key();
    const std::string field = "topics." + key;
    if (key.size() != 1 || topic_index(key[0]) < 0)
      fail(where, "topic \"" + key + "\" in \"topics\" must be one capital letter A-Z");
    const json& topic = item.value();
    if (!topic.is_object()) fail(where, field + " must be an object with \"label\" and \"colour\", not " + topic.dump());
    prompt_json::check_keys(topic, {"label", "colour"}, where, field);
    Topic t;
    t.label = prompt_json::string_field(topic, "label", "Topic " + key, where, field);
    t.colour = topic.contains("colour") ? prompt_json::colour(topic["colour"], where, field + ".colour")
                                        : default_topic_colour(topic_index(key[0]));
    out.emplace(key[0], std::move(t));
  }
  return out;
}

std::string defined_topics(const std::map<char, Topic>& topics) {
  std::string names;
  for (const auto& [letter, topic] : topics) names += std::string(names.empty() ? "" : ", ") + letter;
  return names;
}

}  // namespace

InterwovenPrompt load_prompt_file(const std::filesystem::path& file) {
  return parse_prompt_file(read_text_file(file, "prompt file"), file);
}

InterwovenPrompt parse_prompt_file(const std::string& text, const std::filesystem::path& file) {
  const std::string where = file.string();
  const json root = prompt_json::parse(text, file, "prompt file");
  if (!root.is_object()) fail(where, "expected a JSON object with \"topics\" and \"segments\"");
  prompt_json::check_keys(root, {"title", "pattern", "separator", "topics", "segments", "question", "question_topic"}, where, "");

  InterwovenPrompt prompt;
  prompt.title = prompt_json::string_field(root, "title", file.stem().string(), where, "");
  prompt.separator = prompt_json::string_field(root, "separator", prompt.separator, where, "");
  prompt.question = prompt_json::string_field(root, "question", "", where, "");
  const std::map<char, Topic> topics = read_topics(root, where);
  if (root.contains("question_topic")) {
    const std::string letter = prompt_json::required_string(root, "question_topic", where, "");
    if (letter.size() != 1 || !topics.count(letter[0]))
      fail(where, "\"question_topic\" \"" + letter + "\" is not a topic defined in \"topics\" (defined: " + defined_topics(topics) + ")");
    prompt.question_topic = letter[0];
  }

  if (!root.contains("segments")) fail(where, "\"segments\" is missing (a list of {\"topic\", \"text\"})");
  const json& segments = root["segments"];
  if (!segments.is_array() || segments.empty())
    fail(where, "\"segments\" must be a non-empty list of {\"topic\", \"text\"}, not " + segments.dump().substr(0, 80));
  std::string letters;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const std::string field = "segments[" + std::to_string(i) + "]";
    const json& s = segments[i];
    if (!s.is_object()) fail(where, field + " must be an object {\"topic\", \"text\"}, not " + s.dump().substr(0, 80));
    prompt_json::check_keys(s, {"topic", "text"}, where, field);
    const std::string letter = prompt_json::required_string(s, "topic", where, field);
    const auto topic = letter.size() == 1 ? topics.find(letter[0]) : topics.end();
    if (topic == topics.end())
      fail(where, field + ".topic \"" + letter + "\" is not defined in \"topics\" (defined: " + defined_topics(topics) + ")");
    PromptSegment segment;
    segment.label = topic->second.label;
    segment.colour = topic->second.colour;
    segment.text = prompt_json::required_string(s, "text", where, field);
    if (segment.text.empty()) fail(where, field + ".text is empty");
    prompt.segments.push_back(std::move(segment));
    letters += letter;
  }

  prompt.pattern = prompt_json::string_field(root, "pattern", letters, where, "");
  if (prompt.pattern != letters) {
    std::string why;
    if (prompt.pattern.size() != letters.size()) {
      why = "it has " + std::to_string(prompt.pattern.size()) + " letters for " + std::to_string(letters.size()) + " segments";
    } else {
      std::size_t i = 0;
      while (prompt.pattern[i] == letters[i]) ++i;
      why = "letter " + std::to_string(i + 1) + " is " + prompt.pattern[i] + " but segments[" + std::to_string(i) +
            "] has topic " + letters[i];
    }
    fail(where, "\"pattern\" \"" + prompt.pattern + "\" does not match the segments' topics \"" + letters + "\": " + why);
  }
  if (prompt.question_topic != 0 && letters.find(prompt.question_topic) == std::string::npos)
    fail(where, std::string("\"question_topic\" ") + prompt.question_topic + " has no segment (the segments' topics: " + letters + ")");
  return prompt;
}

namespace {

void check_pattern(const InterwovenPrompt& p, const std::string& where) {
  if (p.pattern.size() != p.segments.size())
    fail(where, "the pattern \"" + p.pattern + "\" has " + std::to_string(p.pattern.size()) + " letters for " +
                    std::to_string(p.segments.size()) + " segments");
  for (const char c : p.pattern)
    if (topic_index(c) < 0) fail(where, std::string("pattern letter '") + c + "' is not A-Z");
}

}  // namespace

void save_prompt_file(const InterwovenPrompt& prompt, const std::filesystem::path& file) {
  const std::string where = file.string();
  check_pattern(prompt, where);
  json topics = json::object(), segments = json::array();
  for (std::size_t i = 0; i < prompt.segments.size(); ++i) {
    const PromptSegment& s = prompt.segments[i];
    const std::string letter(1, prompt.pattern[i]);
    if (s.text.empty()) fail(where, "segment " + std::to_string(i) + " is empty");
    if (!topics.contains(letter)) {
      topics[letter] = {{"label", s.label}, {"colour", s.colour}};
    } else if (topics[letter]["label"] != s.label || topics[letter]["colour"] != s.colour) {
      fail(where, "topic " + letter + ": segments disagree on its label or colour");
    }
    segments.push_back({{"topic", letter}, {"text", s.text}});
  }
  json root = {{"title", prompt.title}, {"pattern", prompt.pattern}, {"separator", prompt.separator}, {"topics", topics},
               {"segments", segments}};
  if (!prompt.question.empty()) root["question"] = prompt.question;
  if (prompt.question_topic != 0) {
    if (prompt.pattern.find(prompt.question_topic) == std::string::npos)
      fail(where, std::string("the question's topic ") + prompt.question_topic + " has no segment");
    root["question_topic"] = std::string(1, prompt.question_topic);
  }
  AtomicOutput output(file);
  {
    std::ofstream out(output.path(), std::ios::binary | std::ios::trunc);
    out << root.dump(2) << "\n";
    out.close();
    if (!out) fail(where, "cannot write the prompt file");
  }
  output.commit();
}

void apply_pattern(InterwovenPrompt& prompt, const std::string& pattern) {
  check_pattern(prompt, "prompt");
  std::map<char, std::vector<PromptSegment>> by_topic;
  for (std::size_t i = 0; i < prompt.segments.size(); ++i) by_topic[prompt.pattern[i]].push_back(prompt.segments[i]);
  std::map<char, std::size_t> used;
  std::vector<PromptSegment> out;
  for (const char c : pattern) {
    if (topic_index(c) < 0) fail("pattern", std::string("'") + c + "' is not a letter A-Z");
    const auto it = by_topic.find(c);
    if (it == by_topic.end()) fail("pattern", std::string("topic ") + c + " has no segments in this prompt");
    if (used[c] >= it->second.size())
      fail("pattern", "\"" + pattern + "\" needs more segments of topic " + std::string(1, c) + " than the " +
                          std::to_string(it->second.size()) + " it has");
    out.push_back(it->second[used[c]++]);
  }
  if (out.empty()) fail("pattern", "the pattern is empty");
  prompt.segments = std::move(out);
  prompt.pattern = pattern;
}

}  // namespace luka
