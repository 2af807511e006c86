// The segments file of a plain prompt (docs/prompt-format.md §3).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/prompt/segments_file.h"
#include "tests/core/prompt/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "Intro. " (7 bytes), "Café crème" (12 bytes: two 2-byte characters), " | ", "Sea story." (10).
const std::string kPrompt = "Intro. Caf\xC3\xA9 cr\xC3\xA8me | Sea story.";

TEST(SegmentsFile, ReadsSpansLabelsAndColours) {
  const json file_json = json::array({{{"label", "Food"}, {"begin", 7}, {"end", 19}},
                                      {{"label", "Sea"}, {"colour", "#ABCDEF"}, {"begin", 22}, {"end", 26}},
                                      {{"label", "Food"}, {"begin", 26}, {"end", 32}}});
  const fs::path file = test::write_file(test::scratch_dir() / "segments.json", file_json.dump());
  ASSERT_EQ(kPrompt.size(), 32u);
  const SegmentTable t = load_segments_file(file, kPrompt);
  ASSERT_EQ(t.segments.size(), 3u);
  ASSERT_EQ(t.spans.size(), 3u);
  EXPECT_EQ(t.segments[0].text, "Caf\xC3\xA9 cr\xC3\xA8me");
  EXPECT_EQ(t.segments[1].text, "Sea ");
  EXPECT_EQ(t.segments[2].text, "story.");
  EXPECT_EQ(t.segments[0].colour, default_topic_colour(0));
  EXPECT_EQ(t.segments[1].colour, "#abcdef");
  EXPECT_EQ(t.segments[2].colour, t.segments[0].colour);  // same label, same colour
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t.spans[i].segment, i);
    EXPECT_EQ(kPrompt.substr(t.spans[i].begin, t.spans[i].end - t.spans[i].begin), t.segments[i].text);
  }
}

TEST(SegmentsFile, EveryBadInputGetsAClearError) {
  const fs::path dir = test::scratch_dir();
  const auto entry = [](std::uint64_t begin, std::uint64_t end) {
    return json{{"label", "A"}, {"begin", begin}, {"end", end}};
  };
  struct Case {
    const char* name;
    std::string content;
    std::vector<const char*> mentions;
  };
  json unknown = entry(0, 5);
  unknown["topic"] = "A";
  json no_label = entry(0, 5);
  no_label.erase("label");
  json empty_label = entry(0, 5);
  empty_label["label"] = "";
  json no_end = entry(0, 5);
  no_end.erase("end");
  json negative = entry(0, 5);
  negative["begin"] = -1;
  json fractional = entry(0, 5);
  fractional["end"] = 4.5;
  json bad_colour = entry(0, 5);
  bad_colour["colour"] = "#fff";
  const std::vector<Case> cases = {
      {"not_json", "[{", {"malformed JSON"}},
      {"not_list", "{\"label\": \"A\"}", {"expected a non-empty JSON list"}},
      {"empty_list", "[]", {"expected a non-empty JSON list"}},
      {"entry_not_object", "[3]", {"entry [0] must be an object"}},
      {"unknown_field", json::array({unknown}).dump(), {"unknown field \"topic\" in entry [0]"}},
      {"missing_label", json::array({no_label}).dump(), {"[0].label is missing"}},
      {"empty_label", json::array({empty_label}).dump(), {"[0].label is empty"}},
      {"missing_end", json::array({entry(0, 5), no_end}).dump(), {"[1].end is missing"}},
      {"negative_begin", json::array({negative}).dump(), {"[0].begin must be a non-negative integer", "-1"}},
      {"fractional_end", json::array({fractional}).dump(), {"[0].end must be a non-negative integer", "4.5"}},
      {"empty_span", json::array({entry(3, 3)}).dump(), {"[0] [3, 3) is empty or reversed"}},
      {"reversed_span", json::array({entry(5, 2)}).dump(), {"[0] [5, 2) is empty or reversed"}},
      {"past_the_end", json::array({entry(20, 33)}).dump(), {"[0] [20, 33) ends past the prompt", "32 bytes"}},
      {"cuts_a_character", json::array({entry(7, 11)}).dump(), {"[0] [7, 11) cuts a UTF-8 character"}},
      {"overlap", json::array({entry(0, 10), entry(9, 12)}).dump(), {"[1] [9, 12) overlaps or precedes", "ends at 10"}},
      {"out_of_order", json::array({entry(20, 25), entry(0, 5)}).dump(), {"[1] [0, 5) overlaps or precedes"}},
      {"bad_colour", json::array({bad_colour}).dump(), {"[0].colour must be a colour", "#fff"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path file = test::write_file(dir / (std::string(c.name) + ".json"), c.content);
    const std::string message = test::load_error([&] { load_segments_file(file, kPrompt); });
    ASSERT_FALSE(message.empty()) << "loaded without error";
    for (const char* part : c.mentions)
      EXPECT_NE(message.find(part), std::string::npos) << "want \"" << part << "\" in: " << message;
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
  const fs::path missing = dir / "nowhere.json";
  EXPECT_ERROR_MENTIONS(test::load_error([&] { load_segments_file(missing, kPrompt); }), missing, "no such file");
}

}  // namespace
}  // namespace luka
