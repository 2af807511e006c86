// Sampler: greedy, top-k, top-p and seeding.
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "core/generate/sampler.h"
#include "core/util/error.h"

namespace luka {
namespace {

std::vector<float> logits_of(std::vector<float> v) { return v; }

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  Sampler s(SamplingParams{});
  const auto l = logits_of({0.1f, 2.0f, -1.0f, 2.0f, 1.9f});
  EXPECT_EQ(s.sample(l.data(), 5), 1);
  const auto m = logits_of({-3.0f, -2.0f, -2.5f});
  EXPECT_EQ(s.sample(m.data(), 3), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  const auto l = logits_of({0.5f, 0.4f, 0.45f, 0.5f, -2.0f, 0.3f});
  for (float t : {0.1f, 1.0f, 5.0f, 100.0f}) {
    Sampler s(SamplingParams{t, 1, 1.0f, 42});
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l.data(), 6), 0);
  }
}

TEST(Sampler, SameSeedSameSequence) {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[static_cast<std::size_t>(i)] = static_cast<float>((i * 7) % 13) * 0.3f;
  auto run = [&](std::uint64_t seed) {
    Sampler s(SamplingParams{1.0f, 0, 1.0f, seed});
    std::vector<std::int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(l.data(), 50));
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
  const auto seq = run(7);
  EXPECT_GT(std::set<std::int32_t>(seq.begin(), seq.end()).size(), 5u);  // it does sample
}

TEST(Sampler, TopPKeepsTheNucleus) {
  // probabilities 0.5, 0.25, 0.15, 0.1 (as logits): the smallest set with mass >= 0.7 is {0, 1}.
  const auto l = logits_of({std::log(0.1f), std::log(0.5f), std::log(0.15f), std::log(0.25f)});
  Sampler s(SamplingParams{1.0f, 0, 0.7f, 3});
  std::set<std::int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(s.sample(l.data(), 4));
  EXPECT_EQ(seen, (std::set<std::int32_t>{1, 3}));
  // p = 0.8 adds the third most likely (mass 0.75 < 0.8), never the last.
  Sampler s2(SamplingParams{1.0f, 0, 0.8f, 3});
  seen.clear();
  for (int i = 0; i < 2000; ++i) seen.insert(s2.sample(l.data(), 4));
  EXPECT_EQ(seen, (std::set<std::int32_t>{1, 2, 3}));
}

TEST(Sampler, TopKRestricts) {
  const auto l = logits_of({1.0f, 3.0f, 2.0f, 2.5f, 0.0f});
  Sampler s(SamplingParams{10.0f, 2, 1.0f, 11});
  std::set<std::int32_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(s.sample(l.data(), 5));
  EXPECT_EQ(seen, (std::set<std::int32_t>{1, 3}));
}

TEST(Sampler, RejectsBadInput) {
  const auto l = logits_of({1.0f, std::nanf(""), 0.0f});
  Sampler s(SamplingParams{});
  EXPECT_THROW(s.sample(l.data(), 3), Error);
  EXPECT_THROW(Sampler(SamplingParams{-1.0f, 0, 1.0f, 0}), Error);
  EXPECT_THROW(Sampler(SamplingParams{1.0f, 0, 0.0f, 0}), Error);
}

}  // namespace
}  // namespace luka
