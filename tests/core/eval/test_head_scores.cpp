// Head pattern scores (core/eval/head_scores.h) against the formulas worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/eval/head_scores.h"

using luka::eval::head_scores;

TEST(HeadScores, HandMadeRows) {
  // T = 4, query at 3: p = [0.5, 0.25, 0, 0.25].
  const std::vector<float> p = {0.5f, 0.25f, 0.0f, 0.25f};
  const auto s = head_scores(p.data(), 4, nullptr);
  EXPECT_DOUBLE_EQ(s.sink, 0.5);
  EXPECT_NEAR(s.entropy, -(0.5 * std::log(0.5) + 2 * 0.25 * std::log(0.25)), 1e-12);  // 1.0397 nats
  EXPECT_DOUBLE_EQ(s.locality, 0.5 * 3 + 0.25 * 2 + 0.25 * 0);
  EXPECT_TRUE(std::isnan(s.cross_topic));
  // Topics: keys 0-1 in topic 0, key 2 outside, the query in topic 1: cross = p0 + p1.
  const std::vector<std::int32_t> topic = {0, 0, -1, 1};
  EXPECT_DOUBLE_EQ(head_scores(p.data(), 4, topic.data()).cross_topic, 0.75);
  const std::vector<std::int32_t> same = {1, 0, 1, 1};
  EXPECT_DOUBLE_EQ(head_scores(p.data(), 4, same.data()).cross_topic, 0.25);
  const std::vector<std::int32_t> outside = {0, 0, 0, -1};  // the query in no segment
  EXPECT_TRUE(std::isnan(head_scores(p.data(), 4, outside.data()).cross_topic));
  // A one-hot row on the query itself: no entropy, no distance, no sink unless T = 1.
  const std::vector<float> self = {0, 0, 1};
  const auto d = head_scores(self.data(), 3, nullptr);
  EXPECT_DOUBLE_EQ(d.entropy, 0);
  EXPECT_DOUBLE_EQ(d.locality, 0);
  EXPECT_DOUBLE_EQ(d.sink, 0);
  // Uniform over T: entropy log T, locality (T - 1) / 2.
  const std::vector<float> u(8, 0.125f);
  const auto w = head_scores(u.data(), 8, nullptr);
  EXPECT_NEAR(w.entropy, std::log(8.0), 1e-12);
  EXPECT_DOUBLE_EQ(w.locality, 3.5);
}
