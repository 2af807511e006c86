#include "core/prompt/prompt_file.h"

#include <map>

#include "core/prompt/json_input.h"
#include "core/util/error.h"

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
  const std::string where = file.string();
  const json root = prompt_json::read_file(file);
  if (!root.is_object()) fail(where, "expected a JSON object with \"topics\" and \"segments\"");
  prompt_json::check_keys(root, {"title", "pattern", "separator", "topics", "segments", "question"}, where, "");

  InterwovenPrompt prompt;
  prompt.title = prompt_json::string_field(root, "title", file.stem().string(), where, "");
  prompt.separator = prompt_json::string_field(root, "separator", prompt.separator, where, "");
  prompt.question = prompt_json::string_field(root, "question", "", where, "");
  const std::map<char, Topic> topics = read_topics(root, where);

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
  return prompt;
}

}  // namespace luka
