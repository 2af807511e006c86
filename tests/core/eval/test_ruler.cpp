// RULER's synthetic tasks with the real Qwen3 tokenizer, Emma as the essay haystack and the shared
// WikiSalad files: every task's samples have exactly the asked tokens and are the same for a seed;
// each task's answers are recomputed here from the sample's text alone (the needles' values, the
// variable chain, the word counts of the list, the gold document) and each task's scoring is
// checked on hand-made answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/eval/ruler.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace fs = std::filesystem;
using namespace luka::eval;

namespace {

const fs::path kShared = LUKA_SHARED_DATA;

#define REQUIRE_SHARED()                                                                                            \
  if (!fs::exists(kShared / "qwen3-tokenizer" / "tokenizer.json") || !fs::exists(kShared / "texts" / "emma.txt") || \
      !fs::exists(kShared / "wikisalad"))                                                                           \
  GTEST_SKIP() << "needs the Qwen3 tokenizer, emma.txt and the WikiSalad files under " << kShared                   \
               << " (../shared/data is absent)"

struct Fixture {
  luka::Tokenizer tokenizer = luka::Tokenizer::load(kShared / "qwen3-tokenizer");
  Haystack essay = Haystack::load(kShared / "texts" / "emma.txt");
  QaPool qa = load_qa_pool(kShared / "wikisalad");
  RulerSources sources;
  Fixture() {
    sources.essay = &essay;
    sources.qa = &qa;
    sources.words = RulerSources::vocabulary(essay);
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

LongContextSample sample(const std::string& task, std::int64_t length, int index = 0, std::uint64_t seed = 3,
                         bool chat = true) {
  const PromptFormat format{chat, std::nullopt, true};
  return make_ruler_sample(task, fixture().sources, fixture().tokenizer, format, length, index, seed);
}

// The context between the task's first line and its question.
std::string between(const std::string& text, const std::string& a, const std::string& b) {
  const std::size_t i = text.find(a);
  const std::size_t j = text.rfind(b);
  if (i == std::string::npos || j == std::string::npos || j < i + a.size()) return "";
  return text.substr(i + a.size(), j - i - a.size());
}

std::vector<std::smatch> all_matches(const std::string& text, const std::regex& re) {
  std::vector<std::smatch> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(*it);
  return out;
}

}  // namespace

TEST(Ruler, EveryTaskHasExactlyTheAskedTokensAndIsDeterministic) {
  REQUIRE_SHARED();
  EXPECT_EQ(ruler_tasks().size(), 12u);
  for (const std::string& task : ruler_tasks())
    for (const std::int64_t length : {512, 1024}) {
      SCOPED_TRACE(task + " at " + std::to_string(length));
      const LongContextSample s = sample(task, length);
      ASSERT_EQ(static_cast<std::int64_t>(s.ids.size()), length);
      EXPECT_EQ(s.ids, prompt_ids(fixture().tokenizer, s.text));
      EXPECT_FALSE(s.answers.empty());
      EXPECT_EQ(s.metric, task == "qa" ? ScoreMetric::kPart : ScoreMetric::kAll);
      const LongContextSample again = sample(task, length);
      EXPECT_EQ(again.text, s.text);
      EXPECT_EQ(again.answers, s.answers);
      const LongContextSample other = sample(task, length, 1);
      EXPECT_NE(other.text, s.text);
      EXPECT_EQ(static_cast<std::int64_t>(other.ids.size()), length);
      const LongContextSample raw = sample(task, length, 0, 3, false);
      EXPECT_EQ(static_cast<std::int64_t>(raw.ids.size()), length);
      EXPECT_EQ(raw.text.find("<|im_start|>"), std::string::npos);
    }
  const LongContextSample longer = sample("niah_multikey_1", 2048);
  EXPECT_EQ(longer.ids.size(), 2048u);
  EXPECT_THROW(sample("niah_single_4", 512), luka::Error);
  EXPECT_THROW(sample("cwe", 60), luka::Error);
}

TEST(Ruler, NeedleTasksHideWhatTheyAskFor) {
  REQUIRE_SHARED();
  const std::regex needle("One of the special magic (numbers|uuids) for ([^ ]+) is: ([0-9a-f-]+)\\.");
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  struct Want {
    const char* task;
    std::size_t needles_min, keys, answers;
    bool uuid_keys, uuid_values, noise;
  };
  for (const Want& w :
       {Want{"niah_single_1", 1, 1, 1, false, false, true}, Want{"niah_single_2", 1, 1, 1, false, false, false},
        Want{"niah_single_3", 1, 1, 1, false, true, false}, Want{"niah_multikey_1", 4, 4, 1, false, false, false},
        Want{"niah_multikey_2", 30, 30, 1, false, false, false}, Want{"niah_multikey_3", 10, 10, 1, true, true, false},
        Want{"niah_multivalue", 4, 1, 4, false, false, false}, Want{"niah_multiquery", 4, 4, 4, false, false, false}}) {
    SCOPED_TRACE(w.task);
    const LongContextSample s = sample(w.task, 1024, 2);
    std::map<std::string, std::vector<std::string>> by_key;
    std::size_t count = 0;
    for (const std::smatch& m : all_matches(s.text, needle)) {
      by_key[m[2]].push_back(m[3]);
      ++count;
      EXPECT_EQ(m[1] == "uuids", w.uuid_values);
      EXPECT_EQ(std::regex_match(std::string(m[3]), uuid), w.uuid_values) << m[3];
      EXPECT_EQ(std::regex_match(std::string(m[2]), uuid), w.uuid_keys) << m[2];
    }
    EXPECT_GE(count, w.needles_min);
    EXPECT_GE(by_key.size(), w.keys);
    if (w.needles_min < 10) {
      EXPECT_EQ(by_key.size(), w.keys);
    }
    // The answers are exactly the values of the queried keys.
    std::vector<std::string> want;
    std::size_t queried = 0;
    for (const auto& [key, values] : by_key)
      if (s.query.find(key) != std::string::npos) {
        ++queried;
        want.insert(want.end(), values.begin(), values.end());
      }
    EXPECT_EQ(queried, std::string(w.task) == "niah_multiquery" ? 4u : 1u) << s.query;
    std::vector<std::string> got = s.answers;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(s.answers.size(), w.answers);
    if (w.noise) {
      EXPECT_NE(s.text.find("The grass is green."), std::string::npos) << "the noise haystack";
    }
    if (!w.noise && w.needles_min < 10) {
      EXPECT_EQ(s.text.find("The grass is green."), std::string::npos) << "the essay haystack";
    }
    if (std::string(w.task) == "niah_multiquery") {
      EXPECT_NE(s.query.find(", and "), std::string::npos) << s.query;
    }
  }
  // Scoring: all values of a multi-value answer, partly.
  const LongContextSample mv = sample("niah_multivalue", 1024);
  EXPECT_DOUBLE_EQ(
      score(mv.metric, mv.answers[0] + ", " + mv.answers[1] + ", " + mv.answers[2] + ", " + mv.answers[3], mv.answers),
      1.0);
  EXPECT_DOUBLE_EQ(score(mv.metric, mv.answers[1] + " and " + mv.answers[3], mv.answers), 0.5);
  EXPECT_DOUBLE_EQ(score(mv.metric, "I do not know.", mv.answers), 0.0);
}

TEST(Ruler, VariableTrackingAnswersAreTheChainOfTheQueriedValue) {
  REQUIRE_SHARED();
  const LongContextSample s = sample("vt", 1024, 4);
  std::map<std::string, std::string> assigned;  // variable -> value or variable
  for (const std::smatch& m : all_matches(s.text, std::regex("VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|([0-9]+))\\.")))
    assigned[m[1]] = m[3].matched ? std::string(m[3]) : std::string(m[4]);
  EXPECT_EQ(assigned.size(), 5u);
  std::set<std::string> want;
  for (const auto& [var, rhs] : assigned) {
    std::string v = rhs;
    for (int hop = 0; hop < 10 && assigned.count(v); ++hop) v = assigned[v];
    if (v == s.query) want.insert(var);
  }
  EXPECT_EQ(std::set<std::string>(s.answers.begin(), s.answers.end()), want);
  EXPECT_NE(s.text.find("5 variables are assigned the value " + s.query), std::string::npos);
  // Partial credit per variable named.
  EXPECT_DOUBLE_EQ(score(s.metric, s.answers[0] + " " + s.answers[2] + " " + s.answers[4], s.answers), 0.6);
}

TEST(Ruler, CommonWordsAreTheTenMostFrequentOfTheList) {
  REQUIRE_SHARED();
  for (const std::int64_t length : {1024, 4096}) {
    SCOPED_TRACE(length);
    const LongContextSample s = sample("cwe", length);
    const std::string list =
        between(s.text, "Memorize the ones that appear most often.\n", "\nQuestion: What are the 10");
    std::map<std::string, int> counts;
    int expected_number = 1;
    for (const std::smatch& m : all_matches(list, std::regex("([0-9]+)\\. ([a-z]+)"))) {
      EXPECT_EQ(std::stoi(m[1]), expected_number++);
      ++counts[m[2]];
    }
    std::vector<std::pair<int, std::string>> ranked;
    for (const auto& [w, c] : counts) ranked.emplace_back(c, w);
    std::sort(ranked.rbegin(), ranked.rend());
    ASSERT_GT(ranked.size(), 10u);
    EXPECT_GT(ranked[9].first, ranked[10].first) << "the top ten stand apart";
    EXPECT_EQ(ranked[0].first, length >= 4096 ? 30 : 8);
    std::set<std::string> top;
    for (int i = 0; i < 10; ++i) top.insert(ranked[static_cast<std::size_t>(i)].second);
    EXPECT_EQ(std::set<std::string>(s.answers.begin(), s.answers.end()), top);
  }
  const LongContextSample s = sample("cwe", 1024);
  std::string seven;
  for (int i = 0; i < 7; ++i) seven += s.answers[static_cast<std::size_t>(i)] + ", ";
  EXPECT_DOUBLE_EQ(score(s.metric, seven, s.answers), 0.7);
}

TEST(Ruler, FrequentWordsAreTheThreeMostFrequentCodedWords) {
  REQUIRE_SHARED();
  const LongContextSample s = sample("fwe", 1024);
  std::string text =
      between(s.text, "Find the three most frequently appeared coded words. ", "\nQuestion: Do not provide");
  const std::size_t nl = text.rfind('\n');  // after the noise padding, if any
  if (nl != std::string::npos) text = text.substr(nl + 1);
  std::map<std::string, int> counts;
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    EXPECT_TRUE(std::regex_match(w, std::regex("[a-z]{5}"))) << w;
    ++counts[w];
  }
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [w, c] : counts) ranked.emplace_back(c, w);
  std::sort(ranked.rbegin(), ranked.rend());
  ASSERT_GT(ranked.size(), 4u);
  EXPECT_GT(ranked[0].first, ranked[1].first);
  EXPECT_GT(ranked[1].first, ranked[2].first);
  EXPECT_GT(ranked[2].first, ranked[3].first);
  EXPECT_EQ(std::set<std::string>(s.answers.begin(), s.answers.end()),
            (std::set<std::string>{ranked[0].second, ranked[1].second, ranked[2].second}));
  EXPECT_DOUBLE_EQ(score(s.metric, ranked[0].second + " " + ranked[2].second, s.answers), 2.0 / 3.0);
}

TEST(Ruler, QaPutsTheGoldParagraphAmongDistractorDocuments) {
  REQUIRE_SHARED();
  const QaPool& pool = fixture().qa;
  EXPECT_GT(pool.documents.size(), 20u);
  for (const QaPool::Item& item : pool.items) {
    ASSERT_LT(item.document, pool.documents.size());
    EXPECT_EQ(pool.documents[item.document].find("Question "), std::string::npos);
    EXPECT_EQ(pool.documents[item.document].find("# Segment"), std::string::npos);
  }
  const LongContextSample s = sample("qa", 2048, 1);
  EXPECT_EQ(s.ids.size(), 2048u);
  const auto item =
      std::find_if(pool.items.begin(), pool.items.end(), [&](const QaPool::Item& i) { return i.question == s.query; });
  ASSERT_NE(item, pool.items.end());
  EXPECT_NE(s.text.find(pool.documents[item->document]), std::string::npos) << "the gold paragraph is there";
  EXPECT_NE(s.text.find("Document 1:\n"), std::string::npos);
  EXPECT_NE(s.text.find("Document 3:\n"), std::string::npos) << "with distractors";
  EXPECT_NE(s.text.find("Question: " + s.query), std::string::npos);
  // string_match_part: one of the gold answers suffices.
  EXPECT_DOUBLE_EQ(score(s.metric, "Answer: " + s.answers.back() + ".", s.answers), 1.0);
  EXPECT_DOUBLE_EQ(score(s.metric, "zzzz", s.answers), 0.0);
}

// Query-agnostic runs split every task's prompt before its question: the leading ids are the
// context's own encoding, every needle lies in them, and the question lies after them.
TEST(Ruler, EveryTaskSplitsBeforeItsQuestion) {
  REQUIRE_SHARED();
  for (const std::string& task : ruler_tasks()) {
    SCOPED_TRACE(task);
    const LongContextSample s = sample(task, 512);
    ASSERT_NE(s.question_at, std::string::npos);
    const std::int64_t n = context_token_count(fixture().tokenizer, s.text, s.question_at, s.ids);
    const std::vector<std::int32_t> head = prompt_ids(fixture().tokenizer, s.text.substr(0, s.question_at));
    // The split may give at most the one token that joins the context and the question to the question.
    EXPECT_GE(n + 1, static_cast<std::int64_t>(head.size()));
    EXPECT_LT(n, static_cast<std::int64_t>(s.ids.size()));
    EXPECT_TRUE(std::equal(s.ids.begin(), s.ids.begin() + n, head.begin()));
    for (const TokenSpanBytes& needle : s.needles) EXPECT_LE(needle.end, s.question_at);
    const std::string rest = fixture().tokenizer.decode(std::vector<std::int32_t>(s.ids.begin() + n, s.ids.end()));
    EXPECT_NE(rest.find(s.text.substr(s.question_at, 12)), std::string::npos) << rest;
  }
}
