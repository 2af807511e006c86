// The needle-in-a-haystack generator: RULER's scores on hand-made answers, sentence boundaries,
// needles inserted at a sentence boundary, and, with the real Qwen3 tokenizer and Emma, samples of
// exactly the asked length, with the needle within one sentence of the asked depth, the same for
// the same seed and different for another.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include "core/eval/niah.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace fs = std::filesystem;
using namespace luka::eval;

namespace {

const fs::path kShared = LUKA_SHARED_DATA;
const fs::path kTokenizer = kShared / "qwen3-tokenizer";
const fs::path kEmma = kShared / "texts" / "emma.txt";

#define REQUIRE_SHARED()                                                \
  if (!fs::exists(kTokenizer / "tokenizer.json") || !fs::exists(kEmma)) \
  GTEST_SKIP() << "needs the Qwen3 tokenizer and emma.txt under " << kShared << " (../shared/data is absent)"

const luka::Tokenizer& qwen3() {
  static const luka::Tokenizer t = luka::Tokenizer::load(kTokenizer);
  return t;
}

const Haystack& emma() {
  static const Haystack h = Haystack::load(kEmma);
  return h;
}

// Sentence ends in `text` [a, b): '.', '!' or '?' followed by whitespace, not after "Mr"/"Mrs"/"Dr".
int sentence_ends(const std::string& text, std::size_t a, std::size_t b) {
  int n = 0;
  for (std::size_t i = a; i < b && i + 1 < text.size(); ++i) {
    if (text[i] != '.' && text[i] != '!' && text[i] != '?') continue;
    std::size_t j = i + 1;
    while (j < text.size() && (text[j] == '"' || text[j] == '\'' || text[j] == '_' || text[j] == ')')) ++j;
    if (j >= text.size() || !std::isspace(static_cast<unsigned char>(text[j]))) continue;
    const std::string before = text.substr(i >= 3 ? i - 3 : 0, i >= 3 ? 3 : i);
    if (text[i] == '.' && (before.size() >= 2 && (before.substr(before.size() - 2) == "Mr" ||
                                                  before.substr(before.size() - 2) == "Dr" || before == "Mrs")))
      continue;
    ++n;
  }
  return n;
}

}  // namespace

TEST(NiahScore, StringMatchAllIsThePartialRecallOfTheReferences) {
  const std::vector<std::string> refs = {"1234567", "7654321", "1111111", "2222222"};
  EXPECT_DOUBLE_EQ(string_match_all("The numbers are 1234567 and 7654321.", refs), 0.5);
  EXPECT_DOUBLE_EQ(string_match_all("1234567, 7654321, 1111111, 2222222", refs), 1.0);
  EXPECT_DOUBLE_EQ(string_match_all("none of them: 123456", refs), 0.0);
  EXPECT_DOUBLE_EQ(string_match_all("is 3339001.", {"3339001"}), 1.0);
  EXPECT_DOUBLE_EQ(string_match_all("is 333900.", {"3339001"}), 0.0);  // a prefix of the value is not the value
  EXPECT_DOUBLE_EQ(string_match_all("VAR ABCDE and var fghij", {"ABCDE", "FGHIJ", "KLMNO"}),
                   2.0 / 3.0);  // case-insensitive
  EXPECT_DOUBLE_EQ(string_match_all("anything", {}), 0.0);
}

TEST(NiahScore, StringMatchPartNeedsOneReference) {
  EXPECT_DOUBLE_EQ(string_match_part("It was the angel Gabriel.", {"Gabriel", "the angel Gabriel"}), 1.0);
  EXPECT_DOUBLE_EQ(string_match_part("It was Michael.", {"Gabriel", "Jibril"}), 0.0);
  EXPECT_DOUBLE_EQ(string_match_part("JIBRIL", {"Gabriel", "Jibril"}), 1.0);
  EXPECT_DOUBLE_EQ(score(ScoreMetric::kPart, "Jibril and Gabriel", {"Gabriel", "Jibril", "Azrael"}), 1.0);
  EXPECT_DOUBLE_EQ(score(ScoreMetric::kAll, "Jibril and Gabriel", {"Gabriel", "Jibril", "Azrael"}), 2.0 / 3.0);
}

TEST(NiahHaystack, SentenceBoundariesSkipTitlesAndInitials) {
  const std::string text = "Mr. Knightley came. She said \"yes.\" Then J. Smith left! Why? End";
  const std::vector<std::size_t> b = sentence_boundaries(text);
  // 0, after "came.", after "yes.\"", after "left!", after "Why?", the end.
  const std::vector<std::size_t> want = {
      0, text.find(" She"), text.find(" Then"), text.find(" Why"), text.find(" End"), text.size()};
  EXPECT_EQ(b, want);
}

TEST(NiahHaystack, InsertsGoToTheNearestSentenceBoundary) {
  // One "token" per word (its bytes without the space before it).
  const std::string window = "Aa bb. Cc dd ee. Ff gg. Hh";
  std::vector<TokenSpanBytes> spans;
  for (std::size_t at = 0; at < window.size();) {
    const std::size_t end = std::min(window.find(' ', at), window.size());
    spans.push_back({at, end});
    at = end + 1;
  }
  ASSERT_EQ(spans.size(), 8u);
  std::vector<TokenSpanBytes> where;
  // Depth 0.5 of 8 tokens: after "dd" (byte 12); the boundaries are after "bb." (6) and "ee." (16).
  EXPECT_EQ(cut_and_insert(window, spans, 8, {{0.5, "N."}}, &where), "Aa bb. Cc dd ee. N. Ff gg. Hh");
  ASSERT_EQ(where.size(), 1u);
  EXPECT_EQ(where[0].begin, 17u);
  EXPECT_EQ(where[0].end, 19u);
  EXPECT_EQ(cut_and_insert(window, spans, 8, {{0.0, "N."}}), "N. Aa bb. Cc dd ee. Ff gg. Hh");
  EXPECT_EQ(cut_and_insert(window, spans, 8, {{1.0, "N."}}), "Aa bb. Cc dd ee. Ff gg. Hh N.");
  EXPECT_EQ(cut_and_insert(window, spans, 5, {{0.6, "N."}}), "Aa bb. N. Cc dd ee.");  // 5 tokens kept
  EXPECT_EQ(cut_and_insert(window, spans, 8, {{0.3, "A."}, {0.9, "B."}}), "Aa bb. A. Cc dd ee. Ff gg. B. Hh");
}

TEST(NiahHaystack, RngIsDeterministicAndPerCell) {
  Rng a(7, "niah", 1024, 500000, 0), b(7, "niah", 1024, 500000, 0), c(7, "niah", 1024, 500000, 1),
      d(8, "niah", 1024, 500000, 0);
  const std::uint64_t x = a.next();
  EXPECT_EQ(x, b.next());
  EXPECT_NE(x, c.next());
  EXPECT_NE(x, d.next());
  Rng e(1, "t", 1, 1, 1);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(e.below(7), 7u);
  const std::string uuid = random_uuid(e);
  EXPECT_TRUE(std::regex_match(uuid, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << uuid;
  const std::string n = random_number(e);
  EXPECT_EQ(n.size(), 7u);
  EXPECT_NE(n[0], '0');
}

TEST(NiahSample, HasExactlyTheAskedTokensAndTheNeedleWithinOneSentenceOfItsDepth) {
  REQUIRE_SHARED();
  const PromptFormat chat{true, std::nullopt, true};
  for (const std::int64_t length : {300, 1000, 2048})
    for (const double depth : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0}) {
      SCOPED_TRACE("length " + std::to_string(length) + ", depth " + std::to_string(depth));
      const LongContextSample s = make_niah_sample(emma(), qwen3(), chat, length, depth, 1, 0, 42);
      ASSERT_EQ(static_cast<std::int64_t>(s.ids.size()), length);
      EXPECT_EQ(s.ids, prompt_ids(qwen3(), s.text)) << "the ids are the text's";
      ASSERT_EQ(s.answers.size(), 1u);
      const std::string needle = "The special magic number for " + s.query + " is " + s.answers[0] + ".";
      const std::size_t at = s.text.find(needle);
      ASSERT_NE(at, std::string::npos);
      EXPECT_EQ(s.text.find(needle, at + 1), std::string::npos) << "one needle";
      ASSERT_EQ(s.needles.size(), 1u);
      EXPECT_EQ(s.needles[0].begin, at);
      EXPECT_NE(s.text.find("<|im_start|>user\n"), std::string::npos);
      EXPECT_EQ(s.text.substr(s.text.size() - 16), "provided text is");

      // The haystack without the needle, and the needle's place in it.
      const std::string head = "I will quiz you about the numbers afterwards.\n";
      const std::size_t c0 = s.text.find(head) + head.size();
      const std::size_t c1 = s.text.find("\nWhat is the special magic number");
      ASSERT_LT(c0, c1);
      std::string context = s.text.substr(c0, c1 - c0);
      const std::size_t n = at - c0;
      std::string hay;
      std::size_t place;
      if (n == 0) {
        hay = context.substr(needle.size() + 1);
        place = 0;
      } else {
        EXPECT_EQ(context[n - 1], ' ');
        hay = context.substr(0, n - 1) + context.substr(n + needle.size());
        place = n - 1;
        // A sentence ends right before the needle.
        std::size_t e = place;
        while (e > 0 && (hay[e - 1] == '"' || hay[e - 1] == '\'' || hay[e - 1] == '_' || hay[e - 1] == ')')) --e;
        if (place != hay.size()) {
          EXPECT_TRUE(hay[e - 1] == '.' || hay[e - 1] == '!' || hay[e - 1] == '?') << hay.substr(e - 20, 40);
        }
      }
      // The asked depth, in tokens of the haystack, as a byte offset.
      const std::vector<luka::TokenSpan> tokens = qwen3().encode_with_offsets(hay);
      ASSERT_GT(tokens.size(), 0u);
      EXPECT_NEAR(static_cast<double>(tokens.size()), static_cast<double>(s.filler), 3.0);
      const std::size_t t = static_cast<std::size_t>(std::llround(depth * static_cast<double>(tokens.size())));
      const std::size_t c = t == 0 ? 0 : tokens[t - 1].end;
      EXPECT_LE(sentence_ends(hay, std::min(c, place), std::max(c, place)), 1)
          << "between the depth point and the needle: "
          << hay.substr(std::min(c, place), std::max(c, place) - std::min(c, place));
    }
}

TEST(NiahSample, IsTheSameForTheSameSeedAndDiffersOtherwise) {
  REQUIRE_SHARED();
  const PromptFormat raw{false, std::nullopt, false};
  const LongContextSample a = make_niah_sample(emma(), qwen3(), raw, 512, 0.5, 1, 0, 1);
  const LongContextSample b = make_niah_sample(emma(), qwen3(), raw, 512, 0.5, 1, 0, 1);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.answers, b.answers);
  EXPECT_EQ(a.text.rfind("Some special magic numbers are hidden", 0), 0u) << "raw: the text as it is";
  const LongContextSample other_seed = make_niah_sample(emma(), qwen3(), raw, 512, 0.5, 1, 0, 2);
  const LongContextSample other_index = make_niah_sample(emma(), qwen3(), raw, 512, 0.5, 1, 1, 1);
  EXPECT_NE(a.text, other_seed.text);
  EXPECT_NE(a.answers, other_seed.answers);
  EXPECT_NE(a.text, other_index.text);
  EXPECT_EQ(other_seed.ids.size(), 512u);
}

TEST(NiahSample, MultiValueCellsScoreByPartialRecall) {
  REQUIRE_SHARED();
  const PromptFormat chat{true, std::string("You are a helpful assistant."), false};
  const LongContextSample s = make_niah_sample(emma(), qwen3(), chat, 700, 0.3, 4, 0, 5);
  ASSERT_EQ(s.ids.size(), 700u);
  ASSERT_EQ(s.answers.size(), 4u);
  EXPECT_EQ(std::set<std::string>(s.answers.begin(), s.answers.end()).size(), 4u);
  ASSERT_EQ(s.needles.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(s.text.substr(s.needles[i].begin, s.needles[i].end - s.needles[i].begin),
              "The special magic number for " + s.query + " is " + s.answers[i] + ".");
  EXPECT_NE(s.text.find("What are all the special magic numbers for " + s.query), std::string::npos);
  EXPECT_NE(s.text.find("<|im_start|>system\nYou are a helpful assistant.<|im_end|>"), std::string::npos);
  EXPECT_DOUBLE_EQ(score(s.metric, "They are " + s.answers[2] + " and " + s.answers[0] + ".", s.answers), 0.5);
  EXPECT_DOUBLE_EQ(score(s.metric, s.answers[3], s.answers), 0.25);
}

TEST(NiahSample, RefusesALengthShorterThanTheQuestion) {
  REQUIRE_SHARED();
  const PromptFormat chat{true, std::nullopt, false};
  try {
    make_niah_sample(emma(), qwen3(), chat, 40, 0.5, 1, 0, 1);
    FAIL() << "no error";
  } catch (const luka::Error& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than the question"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_niah_sample(emma(), qwen3(), chat, 400, 1.5, 1, 0, 1), luka::Error);
  EXPECT_THROW(Haystack::load(kShared / "texts" / "no-such.txt"), luka::Error);
}

// Query-agnostic runs prefill a sample's context first: context_token_count gives the leading ids
// of the text before the question, the needle among them, and refuses an unknown split.
TEST(NiahSample, SplitsBeforeTheQuestion) {
  REQUIRE_SHARED();
  const PromptFormat chat{true, std::nullopt, false};
  const LongContextSample s = make_niah_sample(emma(), qwen3(), chat, 600, 0.5, 1, 0, 4);
  ASSERT_NE(s.question_at, std::string::npos);
  EXPECT_EQ(s.text.compare(s.question_at, 34, "\nWhat is the special magic number "), 0);
  const std::int64_t n = context_token_count(qwen3(), s.text, s.question_at, s.ids);
  const std::vector<std::int32_t> head = prompt_ids(qwen3(), s.text.substr(0, s.question_at));
  EXPECT_GE(n + 1, static_cast<std::int64_t>(head.size()));
  EXPECT_LT(n, 600);
  EXPECT_TRUE(std::equal(s.ids.begin(), s.ids.begin() + n, head.begin()));
  ASSERT_EQ(s.needles.size(), 1u);
  EXPECT_LE(s.needles[0].end, s.question_at);
  const std::string rest = qwen3().decode(std::vector<std::int32_t>(s.ids.begin() + n, s.ids.end()));
  EXPECT_NE(rest.find("special magic number for " + s.query), std::string::npos) << rest;
  EXPECT_THROW(context_token_count(qwen3(), s.text, std::string::npos, s.ids), luka::Error);
}
