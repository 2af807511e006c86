// Token survival (captures/survival.h) on a capture whose covers are known: a clustered layer
// whose page [0, 4) is refined for head 1 from step 2, and a lined layer that drops token 1.
#include <gtest/gtest.h>

#include <cmath>

#include "captures/survival.h"
#include "core/util/error.h"

using namespace luka::capture;

namespace {

// Prompt of 6 tokens "t0".."t5", then one generated token per step; layers 2 (clustered) and 5
// (lined) recorded, heads 0 and 1.
class KnownCapture final : public CaptureView {
 public:
  Summary summary() const override {
    Summary s;
    s.layout.layers = {2, 5};
    s.layout.heads = {0, 1};
    s.layout.prompt_tokens = 6;
    s.complete_steps = 3;
    s.num_tokens = 9;
    return s;
  }
  std::vector<Token> tokens() const override {
    std::vector<Token> t;
    for (int i = 0; i < 9; ++i) t.push_back({i, i == 3 ? " Paris" : "t" + std::to_string(i), i >= 6, -1});
    return t;
  }
  std::vector<Segment> segments() const override { return {}; }
  MapWindow map_window(int, int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t) const override { return {}; }
  // Step s attends T = 6 + s tokens; each token gets 1/T.
  std::vector<float> row(std::int64_t step, int, int) const override { return std::vector<float>(6 + step, 1.0f / (6 + step)); }
  std::vector<float> dense_row(std::int64_t, int, int) const override { throw luka::Error("no shadow"); }
  std::vector<std::uint8_t> cover(std::int64_t step, int layer, int head) const override {
    const std::size_t T = static_cast<std::size_t>(6 + step);
    std::vector<std::uint8_t> c(T, kRaw);
    if (layer == 2) {  // page [0, 4) summarized; head 1 refines it from step 2
      for (int i = 0; i < 4; ++i) c[i] = head == 1 && step >= 2 ? kRefined : kSummarized;
    } else {  // lined: token 0 a heavy hitter, token 1 dropped
      c[0] = kHeavy;
      c[1] = kDropped;
    }
    return c;
  }
  std::vector<std::uint8_t> page_states(std::int64_t, int, int) const override { return {}; }
  std::vector<float> summary_mass(std::int64_t, int, int) const override { return {}; }
  std::vector<PageInfo> pages(int) const override { return {}; }
  StepMetrics metrics(std::int64_t, int) const override { return {}; }
};

}  // namespace

TEST(Survival, ParsesRangesAndFindsText) {
  const KnownCapture c;
  const auto tokens = c.tokens();
  EXPECT_EQ(parse_track("2-4", tokens).begin, 2);
  EXPECT_EQ(parse_track("2-4", tokens).end, 5);
  EXPECT_EQ(parse_track("7", tokens).end, 8);
  const TokenSpan paris = parse_track("text:Paris", tokens);  // inside token 3's " Paris"
  EXPECT_EQ(paris.begin, 3);
  EXPECT_EQ(paris.end, 4);
  const TokenSpan across = parse_track("text:t2 Paris", tokens);
  EXPECT_EQ(across.begin, 2);
  EXPECT_EQ(across.end, 4);
  for (const char* bad : {"4-2", "9", "a-b", "", "-3", "text:", "text:Rome", "1-99999999999999999999"})
    EXPECT_THROW(parse_track(bad, tokens), luka::Error) << bad;
}

// A prompt segment by label, and the needles luka eval niah and ruler mark: "needle" spans from the
// first needle segment to the last (a multi-value cell's needles sit side by side).
TEST(Survival, TracksASegmentAndTheNeedles) {
  const KnownCapture c;
  const auto tokens = c.tokens();
  const std::vector<Segment> segments = {{"haystack", "#888888", 0, 2}, {"needle 1", "#ff0000", 2, 4}, {"needle 2", "#ff0000", 4, 6}};
  const TokenSpan one = parse_track("segment:needle 2", tokens, segments);
  EXPECT_EQ(one.begin, 4);
  EXPECT_EQ(one.end, 6);
  const TokenSpan needles = parse_track("needle", tokens, segments);
  EXPECT_EQ(needles.begin, 2);
  EXPECT_EQ(needles.end, 6);
  EXPECT_THROW(parse_track("needle", tokens, {{"haystack", "#888888", 0, 2}}), luka::Error);
  EXPECT_THROW(parse_track("needle", tokens), luka::Error);
  EXPECT_THROW(parse_track("segment:needle 3", tokens, segments), luka::Error);
  EXPECT_THROW(parse_track("segment:needle 1", tokens, {{"needle 1", "#ff0000", 2, 99}}), luka::Error);
}

TEST(Survival, StatesAndAttentionPerStepLayerAndHead) {
  const KnownCapture c;
  const auto rows = track_tokens(c, {3, 8}, {}, {});  // tokens 3..7: 7 exists from step 2 on
  ASSERT_EQ(rows.size(), 3u * 2 * 2);
  const SurvivalRow& first = rows[0];  // step 1, layer 2, head 0
  EXPECT_EQ(first.step, 1);
  EXPECT_EQ(first.layer, 2);
  EXPECT_EQ(first.states, (std::vector<std::uint8_t>{kSummarized, kRaw, kRaw, kRaw, kAbsent}));
  EXPECT_FLOAT_EQ(first.attention[0], 1.0f / 7);
  EXPECT_FLOAT_EQ(first.attention[4], 0.0f);
  const SurvivalRow& refined = rows[4 + 1];  // step 2, layer 2, head 1
  EXPECT_EQ(refined.step, 2);
  EXPECT_EQ(refined.head, 1);
  EXPECT_EQ(refined.states, (std::vector<std::uint8_t>{kRefined, kRaw, kRaw, kRaw, kRaw}));

  const auto lined = track_tokens(c, {0, 2}, {5}, {0});
  ASSERT_EQ(lined.size(), 3u);
  for (const auto& r : lined) EXPECT_EQ(r.states, (std::vector<std::uint8_t>{kHeavy, kDropped}));

  const auto summary = summarize_survival(rows);
  ASSERT_EQ(summary.size(), 4u);
  const SurvivalSummary& h1 = summary[1];  // layer 2, head 1
  EXPECT_EQ(h1.layer, 2);
  EXPECT_EQ(h1.head, 1);
  EXPECT_EQ(h1.steps, 3);
  EXPECT_EQ(h1.counts[kSummarized], 1);  // token 3 at step 1
  EXPECT_EQ(h1.counts[kRefined], 2);     // token 3 at steps 2 and 3
  EXPECT_EQ(h1.counts[kAbsent], 1);      // token 7 at step 1
  EXPECT_EQ(h1.counts[kRaw], 11);
  // Attention on the span per step: 4/7, 5/8, 5/9 on average.
  EXPECT_NEAR(h1.mass, (4.0 / 7 + 5.0 / 8 + 5.0 / 9) / 3, 1e-6);
  EXPECT_THROW(track_tokens(c, {0, 1}, {3}, {}), luka::Error);  // layer 3 not recorded
  EXPECT_EQ(cover_state_letter(kRefined), 'R');
  EXPECT_STREQ(cover_state_name(kDropped), "dropped");
}
