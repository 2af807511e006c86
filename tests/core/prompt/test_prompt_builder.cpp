// Saving prompt files (load gives back what was saved) and re-laying segments out in a pattern.
#include <gtest/gtest.h>

#include "core/prompt/prompt_file.h"
#include "core/prompt/wikisalad.h"
#include "core/util/error.h"
#include "tests/core/prompt/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

void expect_equal(const InterwovenPrompt& a, const InterwovenPrompt& b) {
  EXPECT_EQ(a.title, b.title);
  EXPECT_EQ(a.pattern, b.pattern);
  EXPECT_EQ(a.separator, b.separator);
  EXPECT_EQ(a.question, b.question);
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (std::size_t i = 0; i < a.segments.size(); ++i) {
    EXPECT_EQ(a.segments[i].label, b.segments[i].label) << i;
    EXPECT_EQ(a.segments[i].colour, b.segments[i].colour) << i;
    EXPECT_EQ(a.segments[i].text, b.segments[i].text) << i;
  }
  EXPECT_EQ(assemble(a).text, assemble(b).text);
}

TEST(PromptBuilder, SavedFilesLoadBackEqual) {
  const InterwovenPrompt demo = load_prompt_file(fs::path(LUKA_SOURCE_DIR) / "assets" / "prompts" / "demo.json");
  const fs::path out = test::scratch_dir() / "saved.json";
  save_prompt_file(demo, out);
  expect_equal(load_prompt_file(out), demo);

  const fs::path ws = fs::path(LUKA_SHARED_DATA) / "wikisalad" / "hard_3topic_short.json";
  if (fs::exists(ws)) {  // a WikiSalad example, saved as a prompt file, keeps its text byte for byte
    InterwovenPrompt p = from_wikisalad(ws, 7);
    save_prompt_file(p, out);
    InterwovenPrompt back = load_prompt_file(out);
    expect_equal(back, p);
  }
}

TEST(PromptBuilder, ApplyPatternTakesEachTopicsSegmentsInOrder) {
  InterwovenPrompt p;
  p.pattern = "ABAB";
  for (const char* t : {"a1", "b1", "a2", "b2"}) p.segments.push_back({std::string("Topic ") + t[0], t[0] == 'a' ? "#111111" : "#222222", t});
  apply_pattern(p, "AABB");
  ASSERT_EQ(p.pattern, "AABB");
  std::string texts;
  for (const auto& s : p.segments) texts += s.text + " ";
  EXPECT_EQ(texts, "a1 a2 b1 b2 ");
  apply_pattern(p, "BA");  // fewer segments: the first of each topic
  EXPECT_EQ(p.segments[0].text, "b1");
  EXPECT_EQ(p.segments[1].text, "a1");
  EXPECT_THROW(apply_pattern(p, "AAB"), Error);   // topic A has one segment now
  EXPECT_THROW(apply_pattern(p, "AC"), Error);    // no topic C
  EXPECT_THROW(apply_pattern(p, "a"), Error);     // not A-Z
  EXPECT_THROW(apply_pattern(p, ""), Error);
  EXPECT_EQ(p.pattern, "BA");  // unchanged after errors

  InterwovenPrompt bad = p;
  bad.segments[1].colour = "#333333";
  bad.pattern = "BB";  // two B segments with different colours
  EXPECT_THROW(save_prompt_file(bad, test::scratch_dir() / "bad.json"), Error);
  bad.pattern = "B";
  EXPECT_THROW(save_prompt_file(bad, test::scratch_dir() / "bad.json"), Error);
  EXPECT_THROW(save_prompt_file(p, "/nonexistent-dir/p.json"), Error);
}

}  // namespace
}  // namespace luka
