// Sampler: greedy, top-k, top-p and seeding.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include <ATen/ATen.h>

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

// The draw (core/generate/sampling_math.h, which the CUDA sampler runs too) against the inverse
// CDF written out here in long double: softmax of logit / T over the top-k, cut to the nucleus,
// and the first candidate whose running mass passes u times the nucleus's mass.
TEST(Sampler, DrawIsTheInverseCdfOfTheNucleus) {
  std::mt19937_64 gen(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (int trial = 0; trial < 400; ++trial) {
    const std::int64_t n = 1 + static_cast<std::int64_t>(gen() % 60);
    std::vector<float> l(static_cast<std::size_t>(n));
    for (auto& x : l) x = trial % 5 == 0 ? std::round(normal(gen)) : normal(gen);  // rounded: many ties
    const int top_k = static_cast<int>(gen() % 8);
    const float t = 0.25f + static_cast<float>(gen() % 8) * 0.25f;
    const float top_p = gen() % 3 == 0 ? 1.0f : 0.2f + static_cast<float>(gen() % 8) * 0.1f;
    const std::uint64_t seed = gen();
    // Reference: order by (logit desc, id asc), then the formula.
    std::vector<std::int32_t> order(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return l[a] > l[b]; });
    const std::size_t keep = top_k > 0 && top_k < n ? static_cast<std::size_t>(top_k) : static_cast<std::size_t>(n);
    std::vector<long double> p(keep);
    long double z = 0;
    for (std::size_t i = 0; i < keep; ++i) z += p[i] = std::exp((static_cast<long double>(l[order[i]]) - l[order[0]]) / t);
    for (auto& x : p) x /= z;
    std::size_t cut = keep;
    long double mass = 0;
    if (top_p < 1.0f)
      for (std::size_t i = 0; i < keep; ++i)
        if ((mass += p[i]) >= top_p) {
          cut = i + 1;
          break;
        }
    long double nucleus = 0;
    for (std::size_t i = 0; i < cut; ++i) nucleus += p[i];
    std::mt19937_64 rng(seed);
    const long double u = static_cast<long double>(rng() >> 11) / 9007199254740992.0L * (top_p < 1.0f ? nucleus : 1.0L);
    std::int32_t expect = order[cut - 1];
    long double acc = 0;
    for (std::size_t i = 0; i < cut; ++i)
      if (u < (acc += p[i])) {
        expect = order[i];
        break;
      }
    Sampler s(SamplingParams{t, top_k, top_p, seed});
    const std::int32_t got = s.sample(l.data(), n);
    if (top_k == 1) {
      EXPECT_EQ(got, order[0]) << "trial " << trial;
      continue;
    }
    // Only a draw within rounding of a boundary may differ: then both are neighbours in the order.
    if (got != expect) {
      const auto at = [&](std::int32_t id) { return std::find(order.begin(), order.end(), id) - order.begin(); };
      EXPECT_LE(std::abs(at(got) - at(expect)), 1) << "trial " << trial;
    }
    EXPECT_LT(static_cast<std::size_t>(std::find(order.begin(), order.end(), got) - order.begin()), cut) << "trial " << trial;
  }
}

TEST(Sampler, TokenSamplerReadsTensorsAndGivesTheProbability) {
  const at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f, 2.5f});
  double p = 0;
  const auto s = make_cpu_sampler(SamplingParams{});
  EXPECT_EQ(s->sample(logits, &p), 1);
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(2.5);
  EXPECT_NEAR(p, std::exp(3.0) / z, 1e-12);
  // A seeded sampler over a tensor draws what the raw sampler draws.
  const auto t = make_cpu_sampler(SamplingParams{1.0f, 0, 0.9f, 9});
  Sampler raw(SamplingParams{1.0f, 0, 0.9f, 9});
  const std::vector<float> v = {1.0f, 3.0f, 2.0f, 2.5f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(t->sample(logits, nullptr), raw.sample(v.data(), 4));
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
