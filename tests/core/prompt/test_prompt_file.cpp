// The interwoven prompt file (docs/prompt-format.md §1), assemble(), and the built-in demo prompt.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/prompt/prompt_file.h"
#include "tests/core/prompt/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json valid_prompt() {
  return {{"title", "Two topics"},
          {"pattern", "ABA"},
          {"separator", "\n---\n"},
          {"topics", {{"A", {{"label", "Sea"}, {"colour", "#00AAff"}}}, {"B", {{"label", "Bread"}}}}},
          {"segments", json::array({{{"topic", "A"}, {"text", "Waves at dusk."}},
                                    {{"topic", "B"}, {"text", "Knead the dough."}},
                                    {{"topic", "A"}, {"text", "Gulls, then calm \xC3\xA9t\xC3\xA9."}}})},
          {"question", "What was calm?"}};
}

TEST(PromptFile, ReadsEveryField) {
  const fs::path file = test::write_file(test::scratch_dir() / "p.json", valid_prompt().dump());
  const InterwovenPrompt p = load_prompt_file(file);
  EXPECT_EQ(p.title, "Two topics");
  EXPECT_EQ(p.pattern, "ABA");
  EXPECT_EQ(p.separator, "\n---\n");
  EXPECT_EQ(p.question, "What was calm?");
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0].label, "Sea");
  EXPECT_EQ(p.segments[0].colour, "#00aaff");  // lower-cased
  EXPECT_EQ(p.segments[1].label, "Bread");
  EXPECT_EQ(p.segments[1].colour, "#e69f00");  // palette colour of topic B
  EXPECT_EQ(p.segments[2].colour, "#00aaff");
  EXPECT_EQ(p.segments[2].text, "Gulls, then calm \xC3\xA9t\xC3\xA9.");
}

TEST(PromptFile, DefaultsForOptionalFields) {
  json j = valid_prompt();
  j.erase("title");
  j.erase("pattern");
  j.erase("separator");
  j.erase("question");
  j["topics"]["A"] = json::object();
  j["topics"]["C"] = {{"label", "unused"}};  // defined but unused is fine
  const fs::path file = test::write_file(test::scratch_dir() / "my_prompt.json", j.dump());
  const InterwovenPrompt p = load_prompt_file(file);
  EXPECT_EQ(p.title, "my_prompt");
  EXPECT_EQ(p.pattern, "ABA");
  EXPECT_EQ(p.separator, "\n\n");
  EXPECT_EQ(p.question, "");
  EXPECT_EQ(p.segments[0].label, "Topic A");
  EXPECT_EQ(p.segments[0].colour, "#0072b2");
  EXPECT_EQ(default_topic_colour(0), "#0072b2");
  EXPECT_EQ(default_topic_colour(8), default_topic_colour(0));  // wraps
}

// Each bad input and what its message must name besides the file.
struct BadCase {
  const char* name;
  std::string content;
  std::vector<const char*> mentions;
};

std::vector<BadCase> bad_cases() {
  const auto with = [](auto&& edit) {
    json j = valid_prompt();
    edit(j);
    return j.dump();
  };
  return {
      {"not_json", "{\"topics\": {\"A\": ", {"malformed JSON"}},
      {"not_object", "[1, 2]", {"expected a JSON object"}},
      {"unknown_field", with([](json& j) { j["segmnts"] = 1; }), {"unknown field \"segmnts\"", "segments"}},
      {"missing_segments", with([](json& j) { j.erase("segments"); }), {"\"segments\" is missing"}},
      {"empty_segments", with([](json& j) { j["segments"] = json::array(); }), {"\"segments\" must be a non-empty list"}},
      {"segments_not_list", with([](json& j) { j["segments"] = "text"; }), {"\"segments\" must be a non-empty list"}},
      {"segment_not_object", with([](json& j) { j["segments"][1] = "text"; }), {"segments[1] must be an object"}},
      {"segment_unknown_field", with([](json& j) { j["segments"][0]["colour"] = "#000000"; }),
       {"unknown field \"colour\" in segments[0]"}},
      {"segment_missing_topic", with([](json& j) { j["segments"][2].erase("topic"); }), {"segments[2].topic is missing"}},
      {"unknown_topic", with([](json& j) { j["segments"][1]["topic"] = "C"; }),
       {"segments[1].topic \"C\" is not defined", "defined: A, B"}},
      {"segment_missing_text", with([](json& j) { j["segments"][0].erase("text"); }), {"segments[0].text is missing"}},
      {"segment_text_not_string", with([](json& j) { j["segments"][0]["text"] = 42; }),
       {"segments[0].text must be a string"}},
      {"segment_empty_text", with([](json& j) { j["segments"][0]["text"] = ""; }), {"segments[0].text is empty"}},
      {"missing_topics", with([](json& j) { j.erase("topics"); }), {"\"topics\" is missing"}},
      {"empty_topics", with([](json& j) { j["topics"] = json::object(); }), {"\"topics\" must be a non-empty object"}},
      {"topic_key_not_letter", with([](json& j) { j["topics"]["ab"] = json::object(); }),
       {"topic \"ab\"", "one capital letter"}},
      {"topic_not_object", with([](json& j) { j["topics"]["B"] = "Bread"; }), {"topics.B must be an object"}},
      {"topic_unknown_field", with([](json& j) { j["topics"]["B"]["color"] = "#000000"; }),
       {"unknown field \"color\" in topics.B"}},
      {"bad_colour_digits", with([](json& j) { j["topics"]["A"]["colour"] = "#12345g"; }),
       {"topics.A.colour must be a colour", "#12345g"}},
      {"bad_colour_name", with([](json& j) { j["topics"]["A"]["colour"] = "red"; }), {"topics.A.colour", "#rrggbb"}},
      {"bad_colour_type", with([](json& j) { j["topics"]["B"]["colour"] = 255; }), {"topics.B.colour", "255"}},
      {"label_not_string", with([](json& j) { j["topics"]["B"]["label"] = json::array(); }),
       {"topics.B.label must be a string"}},
      {"title_not_string", with([](json& j) { j["title"] = 3; }), {"title must be a string"}},
      {"separator_not_string", with([](json& j) { j["separator"] = nullptr; }), {"separator must be a string"}},
      {"pattern_too_short", with([](json& j) { j["pattern"] = "AB"; }),
       {"\"pattern\" \"AB\" does not match", "\"ABA\"", "2 letters for 3 segments"}},
      {"pattern_wrong_letter", with([](json& j) { j["pattern"] = "ABB"; }),
       {"\"pattern\" \"ABB\" does not match", "letter 3 is B but segments[2] has topic A"}},
      {"question_topic_undefined", with([](json& j) { j["question_topic"] = "Z"; }),
       {"\"question_topic\" \"Z\" is not a topic defined in \"topics\"", "A, B"}},
      {"question_topic_unused", with([](json& j) {
         j["topics"]["C"] = {{"label", "unused"}};
         j["question_topic"] = "C";
       }),
       {"\"question_topic\" C has no segment", "ABA"}},
      {"question_topic_not_string", with([](json& j) { j["question_topic"] = 1; }), {"question_topic must be a string"}},
  };
}

// The topic the question asks about: a letter of the file, its label for a capture's manifest,
// and saved again.
TEST(PromptFile, QuestionTopicNamesTheTopicTheQuestionAsksAbout) {
  json j = valid_prompt();
  j["question_topic"] = "B";
  const fs::path file = test::write_file(test::scratch_dir() / "asked.json", j.dump());
  const InterwovenPrompt p = load_prompt_file(file);
  EXPECT_EQ(p.question_topic, 'B');
  EXPECT_EQ(question_topic_label(p), "Bread");
  EXPECT_EQ(question_topic_label(load_prompt_file(test::write_file(test::scratch_dir() / "plain.json", valid_prompt().dump()))), "");
  const fs::path saved = test::scratch_dir() / "asked-saved.json";
  save_prompt_file(p, saved);
  EXPECT_EQ(load_prompt_file(saved).question_topic, 'B');
}

TEST(PromptFile, EveryBadInputGetsAClearError) {
  const fs::path dir = test::scratch_dir();
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.name);
    const fs::path file = test::write_file(dir / (std::string(c.name) + ".json"), c.content);
    const std::string message = test::load_error([&] { load_prompt_file(file); });
    ASSERT_FALSE(message.empty()) << "loaded without error";
    for (const char* part : c.mentions)
      EXPECT_NE(message.find(part), std::string::npos) << "want \"" << part << "\" in: " << message;
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
  const fs::path missing = dir / "nowhere.json";
  EXPECT_ERROR_MENTIONS(test::load_error([&] { load_prompt_file(missing); }), missing, "no such file");
}

TEST(Assemble, JoinsSegmentsAndQuestionWithSpans) {
  const fs::path file = test::write_file(test::scratch_dir() / "p.json", valid_prompt().dump());
  const AssembledPrompt a = assemble(load_prompt_file(file));
  const std::string want =
      "Waves at dusk.\n---\nKnead the dough.\n---\nGulls, then calm \xC3\xA9t\xC3\xA9.\n---\nWhat was calm?";
  EXPECT_EQ(a.text, want);
  ASSERT_EQ(a.spans.size(), 3u);
  const std::vector<std::pair<std::size_t, std::size_t>> spans = {{0, 14}, {19, 35}, {40, 63}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.spans[i].segment, i);
    EXPECT_EQ(a.spans[i].begin, spans[i].first) << i;
    EXPECT_EQ(a.spans[i].end, spans[i].second) << i;
  }

  InterwovenPrompt p;
  p.segments = {{"x", "#000000", "one"}, {"y", "#ffffff", "two"}};
  p.separator = "";
  AssembledPrompt b = assemble(p);  // no question: nothing after the last segment
  EXPECT_EQ(b.text, "onetwo");
  EXPECT_EQ(b.spans[1].begin, 3u);
  EXPECT_EQ(b.spans[1].end, 6u);
  EXPECT_TRUE(assemble(InterwovenPrompt{}).text.empty());
}

std::size_t count_words(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST(DemoPrompt, LoadsAndHasTheAnswerInTheFirstSegmentOnly) {
  const fs::path demo = fs::path(LUKA_SOURCE_DIR) / "assets" / "prompts" / "demo.json";
  const InterwovenPrompt p = load_prompt_file(demo);
  EXPECT_EQ(p.pattern, "ABA");
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0].label, p.segments[2].label);
  EXPECT_NE(p.segments[0].label, p.segments[1].label);
  EXPECT_NE(p.segments[0].colour, p.segments[1].colour);
  for (const PromptSegment& s : p.segments) {
    EXPECT_GE(count_words(s.text), 100u) << s.label;
    EXPECT_LE(count_words(s.text), 200u) << s.label;
  }
  EXPECT_NE(p.question.find("fog signal"), std::string::npos) << p.question;
  // The answer (01:10 until 07:50) is in the first A segment and nowhere else.
  for (const char* answer : {"01:10", "07:50"}) {
    EXPECT_NE(p.segments[0].text.find(answer), std::string::npos) << answer;
    EXPECT_EQ(p.segments[1].text.find(answer), std::string::npos) << answer;
    EXPECT_EQ(p.segments[2].text.find(answer), std::string::npos) << answer;
  }
  const AssembledPrompt a = assemble(p);
  EXPECT_EQ(a.text.substr(a.spans[2].end), p.separator + p.question);
}

}  // namespace
}  // namespace luka
