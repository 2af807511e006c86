#include "core/prompt/segments_file.h"

#include <map>

#include "core/prompt/json_input.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

using prompt_json::json;

namespace {

bool on_character_boundary(std::string_view text, std::size_t pos) {
  return pos == text.size() || (static_cast<unsigned char>(text[pos]) & 0xC0) != 0x80;
}

}  // namespace

SegmentTable load_segments_file(const std::filesystem::path& file, std::string_view prompt_text) {
  return parse_segments_file(read_text_file(file, "segments file"), file, prompt_text);
}

SegmentTable parse_segments_file(const std::string& text, const std::filesystem::path& file, std::string_view prompt_text) {
  const std::string where = file.string();
  const json root = prompt_json::parse(text, file, "segments file");
  if (!root.is_array() || root.empty())
    fail(where, "expected a non-empty JSON list of {\"label\", \"colour\", \"begin\", \"end\"}");
  SegmentTable table;
  std::map<std::string, int> label_topics;  // label -> palette index, in order of first appearance
  for (std::size_t i = 0; i < root.size(); ++i) {
    const std::string field = "[" + std::to_string(i) + "]";
    const json& entry = root[i];
    if (!entry.is_object())
      fail(where, "entry " + field + " must be an object {\"label\", \"colour\", \"begin\", \"end\"}, not " +
                      entry.dump().substr(0, 80));
    prompt_json::check_keys(entry, {"label", "colour", "begin", "end"}, where, "entry " + field);
    PromptSegment segment;
    segment.label = prompt_json::required_string(entry, "label", where, field);
    if (segment.label.empty()) fail(where, field + ".label is empty");
    const std::uint64_t begin = prompt_json::required_offset(entry, "begin", where, field);
    const std::uint64_t end = prompt_json::required_offset(entry, "end", where, field);
    const std::string range = field + " [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
    if (begin >= end) fail(where, range + " is empty or reversed (need begin < end)");
    if (end > prompt_text.size())
      fail(where, range + " ends past the prompt, which has " + std::to_string(prompt_text.size()) + " bytes");
    if (!on_character_boundary(prompt_text, begin) || !on_character_boundary(prompt_text, end))
      fail(where, range + " cuts a UTF-8 character (offsets are bytes, not characters)");
    if (!table.spans.empty() && begin < table.spans.back().end)
      fail(where, range + " overlaps or precedes the entry before it, which ends at " +
                      std::to_string(table.spans.back().end) + " (entries must be in order and not overlap)");
    const auto topic = label_topics.emplace(segment.label, static_cast<int>(label_topics.size())).first->second;
    segment.colour = entry.contains("colour") ? prompt_json::colour(entry["colour"], where, field + ".colour")
                                              : default_topic_colour(topic);
    segment.text = std::string(prompt_text.substr(begin, end - begin));
    table.spans.push_back({static_cast<int>(i), static_cast<std::size_t>(begin), static_cast<std::size_t>(end)});
    table.segments.push_back(std::move(segment));
  }
  return table;
}

}  // namespace luka
