// Attention by topic and head scores (captures/analysis.h, core/eval/head_scores.h) on a hand-made
// capture: every expected number is worked out by hand from the maps and rows below.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "captures/analysis.h"
#include "core/eval/head_scores.h"
#include "core/util/error.h"

namespace {

using namespace luka::capture;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One recorded layer (3) and two heads (0, 1); six prompt tokens and two decode steps.
//   position  0   1   2    3   4   5  | 6   7 (generated)
//   id        10  11  12   10  11  13 | 10  14
//   segment   0   0   -    1   1   -  | -   -      segment 0 "Bees" (topic A), segment 1 "Tides" (B)
// Pages of 2 tokens: [0,2) A, [2,4) one "other" token then one B (a tie: the first met, "other"),
// [4,6) B then "other" (B).
class HandMadeCapture final : public CaptureView {
 public:
  static constexpr std::int64_t n = 6;
  // prefill[head][q][k]
  std::vector<std::vector<std::vector<float>>> prefill = {
      {{1},
       {0.5f, 0.5f},
       {0.25f, 0.5f, 0.25f},
       {0.25f, 0.25f, 0.5f, 0},
       {0.5f, 0, 0.25f, 0.25f, 0},
       {0.125f, 0.125f, 0.125f, 0.125f, 0.25f, 0.25f}},
      {{1}, {0, 1}, {0, 0, 1}, {0, 0, 0, 1}, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 1}},  // each query on itself
  };
  // rows[step - 1][head]
  std::vector<std::vector<std::vector<float>>> rows = {
      {{0.25f, 0.125f, 0, 0.125f, 0.25f, 0.125f, 0.125f}, {0, 0, 0, 0, 0, 0, 1}},
      {{0.5f, 0, 0, 0, 0, 0, 0.25f, 0.25f}, {0, 0, 0, 0, 0, 0, 0, 1}},
  };
  std::vector<std::vector<std::vector<std::uint8_t>>> covers = {
      {{kHeavy, kRaw, kRaw, kHeavy, kRaw, kRaw, kRaw}, {kRaw, kRaw, kRaw, kRaw, kRaw, kRaw, kRaw}},
      {{kHeavy, kDropped, kHeavy, kDropped, kHeavy, kRaw, kRaw, kRaw}, {kRaw, kRaw, kRaw, kRaw, kRaw, kRaw, kRaw, kRaw}},
  };
  std::vector<std::vector<std::vector<std::uint8_t>>> page_state = {
      {{kPageRefined, kPageRefined, kPageSummarized}, {kPageSummarized, kPageSummarized, kPageSummarized}},
      {{kPageSummarized, kPageRefined, kPageRefined}, {kPageSummarized, kPageSummarized, kPageRefined}},
  };
  std::vector<std::vector<float>> kl = {{0.5f, 0.25f}, {kNaN, 0.75f}};  // [step - 1][head]
  std::vector<Segment> segs = {{"Bees", "#0072b2", 0, 2}, {"Tides", "#e69f00", 3, 5}};
  std::vector<int> levels = {0, 1};
  bool with_rows = true;

  Summary summary() const override {
    Summary s;
    s.layout.num_layers = 4, s.layout.num_heads = 2, s.layout.num_kv_heads = 1;
    s.layout.layers = {3}, s.layout.heads = {0, 1}, s.layout.page_size = {2};
    s.layout.prompt_tokens = n, s.layout.levels = levels;
    s.layout.rows = with_rows, s.layout.covers = true;
    s.complete_steps = 2, s.finished = true, s.num_tokens = 8;
    return s;
  }
  std::vector<Token> tokens() const override {
    const std::int32_t ids[] = {10, 11, 12, 10, 11, 13, 10, 14}, seg[] = {0, 0, -1, 1, 1, -1, -1, -1};
    std::vector<Token> t(8);
    for (int i = 0; i < 8; ++i) t[i].id = ids[i], t[i].segment = seg[i], t[i].generated = i >= n;
    return t;
  }
  std::vector<Segment> segments() const override { return segs; }
  MapWindow map_window(int layer, int head, int level, std::int64_t row0, std::int64_t col0, std::int64_t r, std::int64_t c) const override {
    if (layer != 3 || level != 0) throw luka::Error("hand-made capture: only layer 3, level 0");
    MapWindow w;
    w.row0 = row0, w.col0 = col0, w.rows = std::min(r, n - row0), w.cols = std::min(c, n - col0);
    w.values.assign(static_cast<std::size_t>(w.rows * w.cols), 0.0f);
    for (std::int64_t i = 0; i < w.rows; ++i)
      for (std::int64_t j = 0; j < w.cols; ++j) {
        const auto& row = prefill.at(static_cast<std::size_t>(head)).at(static_cast<std::size_t>(row0 + i));
        if (col0 + j < static_cast<std::int64_t>(row.size())) w.values[static_cast<std::size_t>(i * w.cols + j)] = row[static_cast<std::size_t>(col0 + j)];
      }
    return w;
  }
  std::vector<float> row(std::int64_t step, int, int head) const override { return rows.at(static_cast<std::size_t>(step - 1)).at(static_cast<std::size_t>(head)); }
  std::vector<float> dense_row(std::int64_t, int, int) const override { throw luka::Error("no shadow rows"); }
  std::vector<std::uint8_t> cover(std::int64_t step, int, int head) const override {
    return covers.at(static_cast<std::size_t>(step - 1)).at(static_cast<std::size_t>(head));
  }
  std::vector<std::uint8_t> page_states(std::int64_t step, int, int head) const override {
    return page_state.at(static_cast<std::size_t>(step - 1)).at(static_cast<std::size_t>(head));
  }
  std::vector<float> summary_mass(std::int64_t, int, int) const override { return {0, 0, 0}; }
  std::vector<PageInfo> pages(int) const override { return {{0, 2, 0}, {2, 4, 0}, {4, 6, 0}}; }
  StepMetrics metrics(std::int64_t step, int) const override {
    StepMetrics m;
    m.tokens = n + step;
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) m.fidelity.push_back(k == 0 ? kl[static_cast<std::size_t>(step - 1)][static_cast<std::size_t>(h)] : kNaN);
    return m;
  }
};

void expect_vector(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << what << "[" << i << "]";
}

TEST(CaptureAnalysis, HeadScoresOfOneRowIncludingPreviousTokenAndInduction) {
  // Query at q = 5 (id 7) over keys 0..5; ids 7 _ 7 _ 7 7: earlier occurrences at j = 0, 2 (<= q - 2)
  // give keys 1 and 3; j = 4 is the previous token, whose successor is the query itself (left out).
  const std::vector<float> p = {0.125f, 0.25f, 0.0625f, 0.0625f, 0.375f, 0.125f};
  const std::vector<std::int32_t> ids = {7, 1, 7, 2, 7, 7};
  const auto s = luka::eval::head_scores(p.data(), 6, nullptr, ids.data());
  EXPECT_DOUBLE_EQ(s.previous_token, 0.375);
  EXPECT_DOUBLE_EQ(s.induction, 0.25 + 0.0625);
  EXPECT_DOUBLE_EQ(s.sink, 0.125);
  EXPECT_DOUBLE_EQ(s.locality, 0.125 * 5 + 0.25 * 4 + 0.0625 * 3 + 0.0625 * 2 + 0.375 * 1);
  // No earlier occurrence, no ids, or a one-token row: NaN where the score is not defined.
  const std::vector<std::int32_t> fresh = {1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(std::isnan(luka::eval::head_scores(p.data(), 6, nullptr, fresh.data()).induction));
  EXPECT_TRUE(std::isnan(luka::eval::head_scores(p.data(), 6, nullptr).induction));
  const float one = 1;
  EXPECT_TRUE(std::isnan(luka::eval::head_scores(&one, 1, nullptr).previous_token));
  // The query's topic given explicitly (a decode query): keys of topics other than 1.
  const std::vector<std::int32_t> topic = {0, 0, -1, 1, 2, -1};
  EXPECT_DOUBLE_EQ(luka::eval::head_scores(p.data(), 6, topic.data(), 1, nullptr).cross_topic, 0.125 + 0.25 + 0.375);
  EXPECT_DOUBLE_EQ(luka::eval::cross_topic_mass(p.data(), 6, topic.data(), 0), 0.0625 + 0.375);
  EXPECT_TRUE(std::isnan(luka::eval::cross_topic_mass(p.data(), 6, topic.data(), -1)));
}

TEST(CaptureAnalysis, TopicIndexNumbersTopicsByFirstSegmentAndMeasuresDecodeAgainstTheLast) {
  HandMadeCapture c;
  c.segs = {{"Bees", "#0072b2", 0, 2}, {"Tides", "#e69f00", 3, 4}, {"Bees", "#0072b2", 4, 5}};
  const TopicIndex t = topic_index(c);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"Bees", "Tides"}));
  EXPECT_EQ(t.letters, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(t.segment_topic, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(t.decode_topic, 0);  // segment 2 starts last
  EXPECT_EQ(topic_index(c, 1).decode_topic, 1);
  EXPECT_THROW(topic_index(c, 2), luka::Error);
  // Token topics follow the tokens' segment indices (from the tokens list).
  EXPECT_EQ(t.token_topic, (std::vector<std::int32_t>{0, 0, -1, 1, 1, -1, -1, -1}));
}

TEST(CaptureAnalysis, PrefillSegmentMatrixAndLeakage) {
  HandMadeCapture c;
  const TopicAnalysis a = analyze_topics(c);
  ASSERT_TRUE(a.prefill && a.decode && a.covers);
  ASSERT_EQ(a.heads.size(), 2u);
  const HeadTopics& h0 = *a.find(3, 0);
  // Columns: segment 0, segment 1, other. Row 0: queries 0 and 1, all mass on segment 0.
  // Row 1: queries 3 [0.5 on seg 0, 0 on seg 1, 0.5 other] and 4 [0.5, 0.25, 0.25].
  // Row "other": queries 2 [0.75, 0, 0.25] and 5 [0.25, 0.375, 0.375].
  expect_vector(h0.prefill_matrix, {1, 0, 0, 0.5, 0.125, 0.375, 0.5, 0.1875, 0.3125}, "head 0 matrix");
  EXPECT_EQ(h0.prefill_queries, (std::vector<std::int64_t>{2, 2, 2}));
  // Queries in segments: 0, 1 (nothing of topic B before them), 3 and 4 (0.5 each on topic A).
  EXPECT_NEAR(h0.prefill_leakage, (0 + 0 + 0.5 + 0.5) / 4, 1e-12);
  const HeadTopics& h1 = *a.find(3, 1);  // each query on itself: the identity
  expect_vector(h1.prefill_matrix, {1, 0, 0, 0, 1, 0, 0, 0, 1}, "head 1 matrix");
  EXPECT_NEAR(h1.prefill_leakage, 0, 1e-12);
}

TEST(CaptureAnalysis, DecodeStepsByTopicRefinedPagesAndHeavyHitters) {
  HandMadeCapture c;
  const TopicAnalysis a = analyze_topics(c);
  EXPECT_EQ(a.topics.decode_topic, 1);  // "Tides", the last segment's topic
  ASSERT_EQ(a.steps_by_head.size(), 4u);  // 2 steps x 1 layer x 2 heads, step-major
  const StepTopics& s1 = a.steps_by_head[0];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.head, 0);
  expect_vector(s1.segment_mass, {0.375, 0.375, 0.25}, "step 1 segments");
  expect_vector(s1.topic_mass, {0.375, 0.375, 0.25}, "step 1 topics");
  EXPECT_NEAR(s1.generated, 0.125, 1e-12);
  EXPECT_NEAR(s1.leakage, 0.375, 1e-12);  // topic A's mass, against topic B
  // Step 1 refines pages 0 (A) and 1 (tie between "other" and B: "other" comes first); heavy
  // hitters 0 (A) and 3 (B).
  EXPECT_EQ(s1.refined_pages, (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(s1.heavy_hitters, (std::vector<std::int64_t>{1, 1, 0}));
  const StepTopics& s2 = a.steps_by_head[2];
  EXPECT_EQ(s2.step, 2);
  EXPECT_EQ(s2.head, 0);
  expect_vector(s2.segment_mass, {0.5, 0, 0.5}, "step 2 segments");
  EXPECT_NEAR(s2.generated, 0.5, 1e-12);
  EXPECT_NEAR(s2.leakage, 0.5, 1e-12);
  EXPECT_EQ(s2.refined_pages, (std::vector<std::int64_t>{0, 1, 1}));  // pages 1 (other) and 2 (tie B / other: B first)
  EXPECT_EQ(s2.heavy_hitters, (std::vector<std::int64_t>{1, 1, 1}));  // tokens 0 (A), 2 (other), 4 (B)
  const HeadTopics& h0 = *a.find(3, 0);
  EXPECT_NEAR(h0.decode_leakage, (0.375 + 0.5) / 2, 1e-12);
  EXPECT_EQ(h0.refined_pages, (std::vector<std::int64_t>{1, 1, 2}));
  EXPECT_EQ(h0.heavy_hitters, (std::vector<std::int64_t>{2, 2, 1}));
  const HeadTopics& h1 = *a.find(3, 1);  // on the generated query itself
  EXPECT_NEAR(h1.decode_leakage, 0, 1e-12);
  EXPECT_EQ(h1.refined_pages, (std::vector<std::int64_t>{0, 1, 0}));  // step 2: page 2
  expect_vector(a.steps_by_head[1].topic_mass, {0, 0, 1}, "head 1 step 1");
  EXPECT_NEAR(a.steps_by_head[1].generated, 1, 1e-12);
  // Measured against topic A instead: the mass on topic B.
  AnalysisOptions o;
  o.decode_topic = 0;
  EXPECT_NEAR(analyze_topics(c, o).find(3, 0)->decode_leakage, (0.375 + 0) / 2, 1e-12);
  // Against every topic at once: the same two numbers, whichever topic the analysis was asked for.
  expect_vector(h0.decode_leakage_by_topic, {(0.375 + 0) / 2, (0.375 + 0.5) / 2}, "head 0 by topic");
  expect_vector(analyze_topics(c, o).find(3, 0)->decode_leakage_by_topic, {(0.375 + 0) / 2, (0.375 + 0.5) / 2}, "asked for A");
}

TEST(CaptureAnalysis, HeadScoresFromPrefillAndDecodeRows) {
  HandMadeCapture c;
  const HeadScoreAnalysis a = analyze_heads(c);
  ASSERT_TRUE(a.prefill && a.decode && a.topics);
  ASSERT_EQ(a.heads.size(), 2u);
  const HeadScoreRow& h0 = a.heads[0];
  // Prefill, every row: sink = mean of p[q][0].
  EXPECT_NEAR(h0.prefill.sink, (1 + 0.5 + 0.25 + 0.25 + 0.5 + 0.125) / 6, 1e-12);
  double entropy = 0, locality = 0;
  for (std::size_t q = 0; q < 6; ++q)
    for (std::size_t k = 0; k <= q; ++k) {
      const double p = c.prefill[0][q][k];
      if (p > 0) entropy -= p * std::log(p) / 6;
      locality += p * static_cast<double>(q - k) / 6;
    }
  EXPECT_NEAR(h0.prefill.entropy, entropy, 1e-12);
  EXPECT_NEAR(h0.prefill.locality, locality, 1e-12);
  EXPECT_EQ(h0.prefill.rows, 6);
  // Previous token over q = 1..5: 0.5, 0.5, 0.5, 0.25, 0.25.
  EXPECT_NEAR(h0.prefill.previous_token, 2.0 / 5, 1e-12);
  EXPECT_EQ(h0.prefill.previous_rows, 5);
  // Induction: q = 3 (id 10, after 0: key 1, 0.25) and q = 4 (id 11, after 1: key 2, 0.25).
  EXPECT_NEAR(h0.prefill.induction, 0.25, 1e-12);
  EXPECT_EQ(h0.prefill.induction_rows, 2);
  EXPECT_NEAR(h0.prefill.cross_topic, 0.25, 1e-12);  // = the prefill leakage
  EXPECT_EQ(h0.prefill.cross_rows, 4);
  // Decode: step 1 (q = 6, id 10 after positions 0 and 3: keys 1 and 4) and step 2 (q = 7, id 14).
  EXPECT_NEAR(h0.decode.sink, (0.25 + 0.5) / 2, 1e-12);
  EXPECT_NEAR(h0.decode.previous_token, (0.125 + 0.25) / 2, 1e-12);
  EXPECT_NEAR(h0.decode.induction, 0.125 + 0.25, 1e-12);
  EXPECT_EQ(h0.decode.induction_rows, 1);
  EXPECT_NEAR(h0.decode.cross_topic, (0.375 + 0.5) / 2, 1e-12);
  EXPECT_NEAR(h0.decode.locality, (0.25 * 6 + 0.125 * 5 + 0.125 * 3 + 0.25 * 2 + 0.125 * 1 + 0.5 * 7 + 0.25 * 1) / 2, 1e-12);
  // KL: the mean over the steps the shadow ran (step 2 of head 0 did not).
  EXPECT_NEAR(h0.kl, 0.5, 1e-7);
  EXPECT_EQ(h0.kl_steps, 1);
  // Head 1 looks at itself only.
  const HeadScoreRow& h1 = a.heads[1];
  EXPECT_NEAR(h1.prefill.sink, 1.0 / 6, 1e-12);
  EXPECT_NEAR(h1.prefill.entropy, 0, 1e-12);
  EXPECT_NEAR(h1.prefill.locality, 0, 1e-12);
  EXPECT_NEAR(h1.prefill.previous_token, 0, 1e-12);
  EXPECT_NEAR(h1.prefill.induction, 0, 1e-12);
  EXPECT_NEAR(h1.kl, 0.5, 1e-7);
  EXPECT_EQ(h1.kl_steps, 2);
}

TEST(CaptureAnalysis, SelectionMissingPartsAndCancelling) {
  HandMadeCapture c;
  AnalysisOptions o;
  o.heads = {1};
  const auto one = analyze_heads(c, o);
  ASSERT_EQ(one.heads.size(), 1u);
  EXPECT_EQ(one.heads[0].head, 1);
  o.layers = {2};  // not recorded
  EXPECT_THROW(analyze_heads(c, o), luka::Error);

  // Without level 0 (a prompt longer than the map cap) the decode rows still give numbers.
  HandMadeCapture coarse;
  coarse.levels = {1};
  const auto t = analyze_topics(coarse);
  EXPECT_FALSE(t.prefill);
  EXPECT_NE(t.prefill_note.find("level 0"), std::string::npos) << t.prefill_note;
  EXPECT_TRUE(std::isnan(t.heads[0].prefill_leakage));
  EXPECT_NEAR(t.heads[0].decode_leakage, 0.4375, 1e-12);
  // Neither level 0 nor rows: nothing to analyse.
  coarse.with_rows = false;
  EXPECT_THROW(analyze_topics(coarse), luka::Error);
  EXPECT_THROW(analyze_heads(coarse), luka::Error);

  // No segments: no topics; head scores without cross-topic mass.
  HandMadeCapture plain;
  plain.segs.clear();
  EXPECT_THROW(analyze_topics(plain), luka::Error);
  const auto h = analyze_heads(plain);
  EXPECT_FALSE(h.topics);
  EXPECT_TRUE(std::isnan(h.heads[0].prefill.cross_topic));
  EXPECT_NEAR(h.heads[0].prefill.previous_token, 2.0 / 5, 1e-12);

  // A progress callback that stops after the first report.
  AnalysisOptions stop;
  std::vector<double> seen;
  stop.progress = [&](double f) {
    seen.push_back(f);
    return false;
  };
  const auto cut = analyze_topics(c, stop);
  EXPECT_TRUE(cut.cancelled);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NEAR(seen[0], 1.0 / 4, 1e-12);  // 2 heads' prefill + 2 steps
}

}  // namespace
