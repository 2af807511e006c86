// WikiSalad examples (docs/prompt-format.md §2): segments recomputed from the "# Segment i: Title"
// headers, the round trip to the original prompt on every example of every file, and bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/prompt/wikisalad.h"
#include "tests/core/prompt/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kWikiSalad = fs::path(LUKA_SHARED_DATA) / "wikisalad";

std::size_t utf8_chars(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

json example(const std::string& prompt, const std::string& pattern = "") {
  json e = {{"example_id", 0}, {"prompt", prompt}, {"questions", json::array()}};
  if (!pattern.empty()) e["metadata"] = {{"pattern", pattern}};
  return e;
}

TEST(WikiSalad, KnownSegmentation) {
  const std::string prompt =
      "# Segment 1: Cats\n\nCats purr.\n\n\nQuestion 1: Do cats purr?\n\n"
      "# Segment 2: Dogs\n\nDogs bark.\n\n\nQuestion 2: Bark?\n\n"
      "# Segment 3: Cats\n\nMore cats.\n\n\nQuestion 3: More?\n";
  const fs::path file = test::write_file(test::scratch_dir() / "tiny.json", json::array({example(prompt, "ABA")}).dump());
  const InterwovenPrompt p = from_wikisalad(file, 0);
  EXPECT_EQ(p.title, "tiny #0");
  EXPECT_EQ(p.pattern, "ABA");
  EXPECT_EQ(p.separator, "\n\n");
  EXPECT_EQ(p.question, "");
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0].text, "# Segment 1: Cats\n\nCats purr.\n\n\nQuestion 1: Do cats purr?");
  EXPECT_EQ(p.segments[1].text, "# Segment 2: Dogs\n\nDogs bark.\n\n\nQuestion 2: Bark?");
  EXPECT_EQ(p.segments[2].text, "# Segment 3: Cats\n\nMore cats.\n\n\nQuestion 3: More?\n");
  EXPECT_EQ(p.segments[0].label, "Cats");
  EXPECT_EQ(p.segments[1].label, "Dogs");
  EXPECT_EQ(p.segments[0].colour, default_topic_colour(0));
  EXPECT_EQ(p.segments[1].colour, default_topic_colour(1));
  EXPECT_EQ(p.segments[2].colour, p.segments[0].colour);
  const AssembledPrompt a = assemble(p);
  EXPECT_EQ(a.text, prompt);
  EXPECT_EQ(a.spans[1].begin, prompt.find("# Segment 2"));
  EXPECT_EQ(a.spans[1].end, prompt.find("# Segment 3") - 2);
  // No metadata pattern: nothing to check against.
  test::write_file(file, json::array({example(prompt)}).dump());
  EXPECT_EQ(from_wikisalad(file, 0).pattern, "ABA");
}

TEST(WikiSalad, EveryExampleOfEveryFileRoundTrips) {
  if (!fs::exists(kWikiSalad)) GTEST_SKIP() << "WikiSalad data not found at " << kWikiSalad << " (set LUKA_SHARED_DATA)";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kWikiSalad))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 4u);
  std::size_t examples = 0, segments = 0;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const json raw = json::parse(std::ifstream(file));
    const std::vector<InterwovenPrompt> prompts = load_wikisalad(file);
    ASSERT_EQ(prompts.size(), raw.size());
    for (std::size_t e = 0; e < raw.size(); ++e) {
      SCOPED_TRACE("example " + std::to_string(e));
      const InterwovenPrompt& p = prompts[e];
      const json& ex = raw[e];
      const json& boundaries = ex.at("metadata").at("segment_boundaries");
      const json& questions = ex.at("questions");
      EXPECT_EQ(assemble(p).text, ex.at("prompt").get<std::string>());
      EXPECT_EQ(p.pattern, ex.at("metadata").at("pattern").get<std::string>());
      EXPECT_EQ(p.question, "");
      ASSERT_EQ(p.segments.size(), boundaries.size());
      ASSERT_EQ(p.segments.size(), questions.size());
      for (std::size_t i = 0; i < p.segments.size(); ++i) {
        const PromptSegment& s = p.segments[i];
        const std::string title = boundaries[i].at("article").get<std::string>();
        const std::string header = "# Segment " + std::to_string(i + 1) + ": " + title + "\n\n";
        EXPECT_EQ(s.text.compare(0, header.size(), header), 0) << s.text.substr(0, 80);
        EXPECT_EQ(s.text.find("\n# Segment "), std::string::npos) << "a segment holds another header";
        EXPECT_EQ(s.label, title);
        EXPECT_EQ(questions[i].at("article").get<std::string>(), title);
        EXPECT_EQ(std::string(1, p.pattern[i]), boundaries[i].at("topic").get<std::string>());
        EXPECT_EQ(s.colour, default_topic_colour(topic_index(p.pattern[i])));
        // The embedded question stays with its segment.
        const std::string question = "\n\n\nQuestion " + std::to_string(i + 1) + ": " + questions[i].at("question").get<std::string>();
        const std::size_t q = s.text.find(question);
        ASSERT_NE(q, std::string::npos) << question;
        // The metadata offsets are wrong, but their lengths are the paragraph's, in characters.
        const std::string paragraph = s.text.substr(header.size(), q - header.size());
        EXPECT_EQ(utf8_chars(paragraph),
                  boundaries[i].at("end_char").get<std::size_t>() - boundaries[i].at("start_char").get<std::size_t>());
        ++segments;
      }
      ++examples;
    }
    // One example at a time gives the same as the whole file.
    for (int e : {0, static_cast<int>(raw.size()) - 1}) {
      const InterwovenPrompt one = from_wikisalad(file, e);
      EXPECT_EQ(assemble(one).text, assemble(prompts[static_cast<std::size_t>(e)]).text);
      EXPECT_EQ(one.pattern, prompts[static_cast<std::size_t>(e)].pattern);
      EXPECT_EQ(one.title, file.stem().string() + " #" + std::to_string(e));
    }
  }
  EXPECT_EQ(examples, 350u);
  EXPECT_EQ(segments, 2700u);
}

TEST(WikiSalad, BadFilesAndExamplesGetClearErrors) {
  const fs::path dir = test::scratch_dir();
  const std::string good = "# Segment 1: A\n\nx\n\n\nQuestion 1: q?\n\n# Segment 2: B\n\ny\n";
  const fs::path two = test::write_file(dir / "two.json", json::array({example(good), example(good)}).dump());
  EXPECT_ERROR_MENTIONS(test::load_error([&] { from_wikisalad(two, 2); }), two, "example 2 is out of range", "2 examples: 0 to 1");
  EXPECT_ERROR_MENTIONS(test::load_error([&] { from_wikisalad(two, -1); }), two, "example -1 is out of range");
  EXPECT_TRUE(test::load_error([&] { from_wikisalad(two, 1); }).empty());

  struct Case {
    const char* name;
    std::string content;
    std::vector<const char*> mentions;
  };
  std::string many_titles;
  for (int i = 1; i <= 27; ++i)
    many_titles += "# Segment " + std::to_string(i) + ": T" + std::to_string(i) + "\n\nx" + (i < 27 ? "\n\n" : "\n");
  const std::vector<Case> cases = {
      {"not_json", "[{\"prompt\": ", {"malformed JSON"}},
      {"not_list", "{\"prompt\": \"x\"}", {"expected a JSON list of WikiSalad examples"}},
      {"empty_list", "[]", {"the file has no examples"}},
      {"no_prompt", "[{\"questions\": []}]", {"example 0", "\"prompt\" string"}},
      {"no_headers", json::array({example("Just text.\n")}).dump(), {"example 0", "no \"# Segment i: Title\" header"}},
      {"text_before_header", json::array({example("Intro\n" + good)}).dump(), {"6 bytes before its first segment header"}},
      {"misnumbered", json::array({example("# Segment 1: A\n\nx\n\n# Segment 3: B\n\ny\n")}).dump(),
       {"segment header 2 is numbered 3"}},
      {"no_blank_line", json::array({example("# Segment 1: A\n\nx\n# Segment 2: B\n\ny\n")}).dump(),
       {"segment 1 is not followed by a blank line"}},
      {"pattern_mismatch", json::array({example(good, "AA")}).dump(),
       {"metadata.pattern \"AA\" does not match", "\"AB\""}},
      {"too_many_titles", json::array({example(many_titles)}).dump(), {"more than 26 different segment titles"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path file = test::write_file(dir / (std::string(c.name) + ".json"), c.content);
    const std::string message = test::load_error([&] { from_wikisalad(file, 0); });
    ASSERT_FALSE(message.empty()) << "loaded without error";
    for (const char* part : c.mentions)
      EXPECT_NE(message.find(part), std::string::npos) << "want \"" << part << "\" in: " << message;
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    EXPECT_EQ(test::load_error([&] { load_wikisalad(file); }).empty(), false);
  }
  const fs::path missing = dir / "nowhere.json";
  EXPECT_ERROR_MENTIONS(test::load_error([&] { from_wikisalad(missing, 0); }), missing, "no such file");

  if (fs::exists(kWikiSalad / "easy_2topic_short.json")) {
    const fs::path easy = kWikiSalad / "easy_2topic_short.json";
    EXPECT_ERROR_MENTIONS(test::load_error([&] { from_wikisalad(easy, 100); }), easy, "example 100 is out of range",
                          "100 examples");
  }
}

}  // namespace
}  // namespace luka
