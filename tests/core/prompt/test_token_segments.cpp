// token_segments: hand-built spans with known answers, and WikiSalad prompts in a chat turn against
// segment ids computed in Python from Hugging Face `tokenizers` offsets
// (tests/fixtures/prompt_segments_reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/prompt/prompt_file.h"
#include "core/prompt/tokenized_prompt.h"
#include "core/prompt/wikisalad.h"
#include "tests/core/tokenizer/test_util.h"
#include "tests/python_reference.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kWikiSalad = fs::path(LUKA_SHARED_DATA) / "wikisalad";

TEST(TokenSegments, KnownAnswers) {
  // Text "....." spans: segment 0 = [0, 5), segment 1 = [7, 12); the text starts at byte 3.
  const std::vector<SegmentSpan> spans = {{0, 0, 5}, {1, 7, 12}};
  const std::vector<TokenSpan> tokens = {
      {10, 0, 3},    // before the text (chat prefix)
      {11, 2, 4},    // starts before the text, ends inside segment 0: its first byte decides
      {12, 3, 8},    // first byte of the text
      {13, 7, 9},    // inside segment 0
      {14, 8, 11},   // starts in the gap [5, 7) and runs into segment 1
      {15, 10, 11},  // first byte of segment 1
      {16, 14, 15},  // last byte of segment 1
      {17, 15, 16},  // one past segment 1's end
      {18, 40, 41},  // far past the text
  };
  const std::vector<int> want = {-1, -1, 0, 0, -1, 1, 1, -1, -1};
  EXPECT_EQ(token_segments(tokens, spans, 3), want);
  // Span order does not matter; segment ids come from the spans, not their positions.
  EXPECT_EQ(token_segments(tokens, {{1, 7, 12}, {0, 0, 5}}, 3), want);
  EXPECT_EQ(token_segments(tokens, {{4, 0, 5}, {9, 7, 12}}, 3), (std::vector<int>{-1, -1, 4, 4, -1, 9, 9, -1, -1}));
  // Without an offset; empty inputs.
  EXPECT_EQ(token_segments({{1, 0, 1}, {2, 5, 6}, {3, 6, 7}}, spans), (std::vector<int>{0, -1, -1}));
  EXPECT_TRUE(token_segments({}, spans).empty());
  // A token that covers no bytes (a BOS put in front) has no first byte: in no segment.
  EXPECT_EQ(token_segments({{1, 0, 0}, {2, 0, 1}}, spans), (std::vector<int>{-1, 0}));
  EXPECT_EQ(token_segments({{1, 0, 1}}, {}), (std::vector<int>{-1}));
}

// 100,000 segments of one token each (the builder was quadratic in segments: 36 s for this);
// every token lands in its own segment. bench/run_reliability.sh times it.
TEST(TokenSegments, HundredThousandSegmentsEachGetTheirToken) {
  constexpr int kSegments = 100000;
  std::vector<TokenSpan> tokens;
  std::vector<SegmentSpan> spans;
  for (int i = 0; i < kSegments; ++i) {
    tokens.push_back({i, static_cast<std::size_t>(3 * i), static_cast<std::size_t>(3 * i + 1)});  // "x\n\n" per segment
    spans.push_back({i, static_cast<std::size_t>(3 * i), static_cast<std::size_t>(3 * i + 1)});
  }
  const std::vector<int> got = token_segments(tokens, spans);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kSegments));
  for (int i = 0; i < kSegments; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], i) << "token " << i;
  InterwovenPrompt p;
  p.separator = "\n\n";
  for (int i = 0; i < kSegments; ++i) {
    p.pattern += static_cast<char>('A' + i % 3);
    p.segments.push_back({std::string(1, static_cast<char>('A' + i % 3)), "#1f77b4", "x"});
  }
  const AssembledPrompt a = assemble(p);
  ASSERT_EQ(a.spans.size(), static_cast<std::size_t>(kSegments));
  EXPECT_EQ(a.spans.back().begin, static_cast<std::size_t>(3 * (kSegments - 1)));
}

// A prompt longer than the limit (the context): encoding stops as soon as it is known to be
// longer, so 100,000 segments (about 1.2 million tokens) cost 1,001 tokens; those are the first
// tokens of the whole encoding, with their segments.
TEST(TokenSegments, EncodingStopsPastTheLimit) {
  LUKA_REQUIRE_QWEN3();
  const Tokenizer& tok = *test::qwen3();
  InterwovenPrompt p;
  p.separator = "\n\n";
  for (int i = 0; i < 100000; ++i) {
    p.pattern += static_cast<char>('A' + i % 3);
    p.segments.push_back({std::string(1, static_cast<char>('A' + i % 3)), "#1f77b4", "Segment " + std::to_string(i) + " says one short thing."});
  }
  const AssembledPrompt a = assemble(p);
  const TokenizedPrompt cut = tokenize_prompt(tok, a.text, p.segments, a.spans, false, "", 1000);
  EXPECT_FALSE(cut.complete);
  ASSERT_EQ(cut.ids.size(), 1001u);  // what was encoded: the limit and one more
  ASSERT_EQ(cut.segment.size(), 1001u);

  // The whole encoding of the first 200 segments (about 2,000 tokens) starts with the same tokens.
  InterwovenPrompt head = p;
  head.segments.resize(200);
  head.pattern.resize(200);
  const AssembledPrompt h = assemble(head);
  const TokenizedPrompt whole = tokenize_prompt(tok, h.text, head.segments, h.spans, false, "");
  EXPECT_TRUE(whole.complete);
  ASSERT_GT(whole.ids.size(), 1001u);
  EXPECT_EQ(cut.ids, std::vector<std::int32_t>(whole.ids.begin(), whole.ids.begin() + 1001));
  EXPECT_EQ(cut.segment, std::vector<std::int32_t>(whole.segment.begin(), whole.segment.begin() + 1001));
  // Segments before the last one reached keep their token spans; those after it have none.
  const int last = cut.segment.back();
  ASSERT_GT(last, 10);
  for (int s = 0; s < last; ++s) {
    EXPECT_EQ(cut.segments[static_cast<std::size_t>(s)].begin, whole.segments[static_cast<std::size_t>(s)].begin) << s;
    EXPECT_EQ(cut.segments[static_cast<std::size_t>(s)].end, whole.segments[static_cast<std::size_t>(s)].end) << s;
  }
  ASSERT_EQ(cut.segments.size(), 100000u);
  EXPECT_EQ(cut.segments[static_cast<std::size_t>(last) + 1].begin, cut.segments[static_cast<std::size_t>(last) + 1].end);
  EXPECT_EQ(cut.segments.back().end, 0);

  // A limit the prompt meets exactly: complete. One less: incomplete, and all of it was encoded.
  const std::size_t n = whole.ids.size();
  const TokenizedPrompt exact = tokenize_prompt(tok, h.text, head.segments, h.spans, false, "", n);
  EXPECT_TRUE(exact.complete);
  EXPECT_EQ(exact.ids, whole.ids);
  const TokenizedPrompt over = tokenize_prompt(tok, h.text, head.segments, h.spans, false, "", n - 1);
  EXPECT_FALSE(over.complete);
  EXPECT_EQ(over.ids, whole.ids);
  // In a chat turn the template's added tokens count too.
  const TokenizedPrompt chat = tokenize_prompt(tok, h.text, head.segments, h.spans, true, "");
  const TokenizedPrompt chat_cut = tokenize_prompt(tok, h.text, head.segments, h.spans, true, "", 5);
  EXPECT_FALSE(chat_cut.complete);
  EXPECT_EQ(chat_cut.ids, std::vector<std::int32_t>(chat.ids.begin(), chat.ids.begin() + 6));
}

TEST(TokenSegments, DemoPromptInAChatTurn) {
  LUKA_REQUIRE_QWEN3();
  const InterwovenPrompt p = load_prompt_file(fs::path(LUKA_SOURCE_DIR) / "assets" / "prompts" / "demo.json");
  const AssembledPrompt a = assemble(p);
  const std::string prefix = "<|im_start|>user\n", suffix = "<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<TokenSpan> tokens = test::qwen3()->encode_with_offsets(prefix + a.text + suffix);
  const std::vector<int> segments = token_segments(tokens, a.spans, prefix.size());
  ASSERT_EQ(segments.size(), tokens.size());
  std::vector<int> per_segment(p.segments.size(), 0);
  std::string question;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::size_t first = tokens[i].begin;
    if (segments[i] >= 0) {
      const SegmentSpan& s = a.spans[static_cast<std::size_t>(segments[i])];
      EXPECT_GE(first, prefix.size() + s.begin) << i;
      EXPECT_LT(first, prefix.size() + s.end) << i;
      ++per_segment[static_cast<std::size_t>(segments[i])];
    } else if (first >= prefix.size() + a.spans.back().end && first < prefix.size() + a.text.size()) {
      question += (prefix + a.text).substr(first, tokens[i].end - first);
    }
  }
  for (std::size_t k = 0; k < per_segment.size(); ++k) EXPECT_GT(per_segment[k], 20) << "segment " << k;
  EXPECT_EQ(segments.front(), -1);  // <|im_start|>
  EXPECT_EQ(segments.back(), -1);   // "\n" after assistant
  // The question's tokens, less the separator when the segment's last token took it (".\n\n").
  EXPECT_TRUE(question == p.question || question == p.separator + p.question) << question;
}

TEST(TokenSegments, WikiSaladMatchesHuggingFaceReference) {
  LUKA_REQUIRE_QWEN3();
  if (!fs::exists(kWikiSalad)) GTEST_SKIP() << "WikiSalad data not found at " << kWikiSalad << " (set LUKA_SHARED_DATA)";
  std::string why;
  const fs::path reference =
      test::python_reference(LUKA_PROMPT_SEGMENTS_REFERENCE_SCRIPT, {test::qwen3_dir().string(), kWikiSalad.string()},
                             fs::path(LUKA_TEST_WORK) / "prompt_segments_reference.json", why);
  if (reference.empty()) GTEST_SKIP() << why;
  const json cases = json::parse(std::ifstream(reference));
  ASSERT_EQ(cases.size(), 12u);  // three examples of each of the four files
  for (const json& c : cases) {
    const std::string file = c.at("file").get<std::string>();
    const int example = c.at("example").get<int>();
    SCOPED_TRACE(file + " example " + std::to_string(example));
    const AssembledPrompt a = assemble(from_wikisalad(kWikiSalad / file, example));
    const std::string prefix = c.at("prefix").get<std::string>();
    const std::vector<TokenSpan> tokens =
        test::qwen3()->encode_with_offsets(prefix + a.text + c.at("suffix").get<std::string>());
    std::vector<std::int32_t> ids;
    for (const TokenSpan& t : tokens) ids.push_back(t.id);
    ASSERT_EQ(ids, c.at("ids").get<std::vector<std::int32_t>>());
    const std::vector<int> got = token_segments(tokens, a.spans, prefix.size());
    const auto want = c.at("segments").get<std::vector<int>>();
    ASSERT_EQ(got.size(), want.size());
    std::size_t same = 0;
    for (std::size_t i = 0; i < got.size(); ++i) same += got[i] == want[i];
    EXPECT_EQ(same, got.size());
    EXPECT_EQ(*std::max_element(got.begin(), got.end()), static_cast<int>(a.spans.size()) - 1);
  }
}

}  // namespace
}  // namespace luka
