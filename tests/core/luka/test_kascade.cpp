// Kascade's calibration (core/luka/methods/kascade.h): the similarity against a direct NumPy computation
// (tests/fixtures/kascade_reference.py), the anchor dynamic program against brute force over every
// anchor set, and head remapping on attention built so that the best map is known.
#include "core/luka/methods/kascade.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "core/util/error.h"
#include "core/util/npy.h"
#include "tests/python_reference.h"

namespace fs = std::filesystem;
using namespace luka;

namespace {

// ===== top-k sizes and ties ===================================================================

TEST(KascadeTopK, CountFractionAndMinimum) {
  KascadeTopK count;  // the paper's k = 64 for calibration
  EXPECT_EQ(count.size(1000), 64);
  EXPECT_EQ(count.size(10), 10);
  EXPECT_EQ(count.size(0), 0);
  KascadeTopK frac{0, 0.1, 128};  // the paper's runs: 10%, at least 128, at most all
  EXPECT_EQ(frac.size(5000), 500);
  EXPECT_EQ(frac.size(1001), 128);
  EXPECT_EQ(frac.size(100), 100);
  KascadeTopK ceil_frac{0, 0.25, 0};
  EXPECT_EQ(ceil_frac.size(9), 3);  // ceil(2.25)
  EXPECT_EQ(ceil_frac.size(1), 1);
}

TEST(KascadeTopK, TiesGoToTheLowerKey) {
  const float p[] = {0.2f, 0.5f, 0.2f, 0.5f, 0.1f};
  EXPECT_EQ(kascade_top_k(p, 5, 3), (std::vector<int>{1, 3, 0}));
  EXPECT_EQ(kascade_top_k(p, 5, 9), (std::vector<int>{1, 3, 0, 2, 4}));
}

// ===== similarity against NumPy ===============================================================

class KascadeReference : public ::testing::TestWithParam<const char*> {};

TEST_P(KascadeReference, SimilarityEqualsNumpy) {
  const std::string name = GetParam();
  std::string why;
  const fs::path script = fs::path(LUKA_SOURCE_DIR) / "tests/fixtures/kascade_reference.py";
  const fs::path dir = luka::test::python_reference(script, {name}, fs::path(LUKA_TEST_WORK) / "kascade" / name, why);
  if (dir.empty()) GTEST_SKIP() << why;
  const nlohmann::json cs = nlohmann::json::parse(std::ifstream(dir / "case.json"));
  const NpyArray att = read_npy_f32(dir / "attention.npy");
  const NpyArray ref_head = read_npy_f32(dir / "head.npy"), ref_layer = read_npy_f32(dir / "layer.npy");
  const NpyArray ref_map = read_npy_f32(dir / "head_map.npy");
  const int L = cs["layers"], H = cs["heads_q"], KV = cs["kv_heads"], Q = cs["queries"], N = cs["keys"];
  const int P = cs["prompts"];

  KascadeOptions opt;
  opt.top_k = {cs["k"].get<int>(), cs["fraction"].get<double>(), cs["min_count"].get<int>()};
  const std::string heads = cs["heads"];
  opt.heads = heads == "remap" ? KascadeHeads::kRemap : heads == "identity" ? KascadeHeads::kIdentity : KascadeHeads::kShared;
  opt.over_tokens = cs["reduce"] == "min" ? KascadeTokenReduce::kMin : KascadeTokenReduce::kMean;
  std::vector<PromptAttention> prompts;
  const std::size_t per_prompt = static_cast<std::size_t>(L) * H * Q * N;
  for (int p = 0; p < P; ++p) prompts.push_back(prompt_attention(att.data.data() + p * per_prompt, L, H, KV, Q, N));

  const KascadeSimilarity sim = kascade_similarity(prompts, opt);
  const int G = opt.heads == KascadeHeads::kShared ? 1 : KV;
  ASSERT_EQ(sim.layers, L);
  ASSERT_EQ(sim.groups, G);
  ASSERT_EQ(ref_head.data.size(), sim.head.size());
  // float32 reference of float64 values near 1.
  for (std::size_t i = 0; i < sim.head.size(); ++i) EXPECT_NEAR(sim.head[i], ref_head.data[i], 2e-6) << "head entry " << i;
  for (int a = 0; a < L; ++a)
    for (int b = 0; b < L; ++b) {
      EXPECT_NEAR(sim.layer_sim(a, b), ref_layer.data[static_cast<std::size_t>(a) * L + b], 2e-6) << a << "," << b;
      if (a > b) continue;
      const std::vector<int> map = kascade_head_map(sim, a, b);
      for (int hb = 0; hb < G; ++hb)
        EXPECT_EQ(map[static_cast<std::size_t>(hb)], static_cast<int>(ref_map.data[(static_cast<std::size_t>(a) * L + b) * G + hb]))
            << "anchor " << a << ", layer " << b << ", head " << hb;
    }
  // Scores are shares of mass: in (0, 1].
  for (int a = 0; a < L; ++a)
    for (int b = a; b < L; ++b) {
      EXPECT_GT(sim.layer_sim(a, b), 0.0);
      EXPECT_LE(sim.layer_sim(a, b), 1.0);
    }

  // Every layer an anchor: every layer is its own source and keeps its own heads.
  const KascadePlan all = kascade_plan(sim, L);
  for (int l = 0; l < L; ++l) {
    EXPECT_EQ(all.anchors.anchors[static_cast<std::size_t>(l)], l);
    EXPECT_EQ(all.anchors.source[static_cast<std::size_t>(l)], l);
    for (int g = 0; g < G; ++g) EXPECT_EQ(all.head_map[static_cast<std::size_t>(l)][static_cast<std::size_t>(g)], g);
  }
  EXPECT_DOUBLE_EQ(all.anchors.score, L);
}

INSTANTIATE_TEST_SUITE_P(Cases, KascadeReference, ::testing::Values("remap", "identity", "shared"));

// ===== the anchor dynamic program against brute force =========================================

struct Brute {
  std::vector<int> anchors;
  double score = -std::numeric_limits<double>::infinity();
  double runner_up = -std::numeric_limits<double>::infinity();  // best score of any other set
};

// Every anchor set holding layer 0 of `count` layers; the best by score, ties to the
// lexicographically smallest list (subsets are visited in lexicographic order, strict > keeps the first).
Brute brute_force(const std::vector<double>& S, int L, int count, const std::vector<double>& w) {
  Brute best;
  std::vector<int> chosen{0};
  auto visit = [&](auto&& self, int next) -> void {
    if (static_cast<int>(chosen.size()) == count) {
      double score = 0.0;
      int src = 0;
      for (int l = 0; l < L; ++l) {
        if (std::find(chosen.begin(), chosen.end(), l) != chosen.end()) src = l;
        score += (w.empty() ? 1.0 : w[static_cast<std::size_t>(l)]) * S[static_cast<std::size_t>(src) * L + l];
      }
      if (score > best.score) {
        best.runner_up = best.score;
        best.score = score;
        best.anchors = chosen;
      } else {
        best.runner_up = std::max(best.runner_up, score);
      }
      return;
    }
    for (int l = next; l < L; ++l) {
      chosen.push_back(l);
      self(self, l + 1);
      chosen.pop_back();
    }
  };
  visit(visit, 1);
  return best;
}

void expect_sources(const KascadeAnchors& got, int L) {
  ASSERT_EQ(got.source.size(), static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    int nearest = 0;
    for (int a : got.anchors)
      if (a <= l) nearest = a;
    EXPECT_EQ(got.source[static_cast<std::size_t>(l)], nearest) << "layer " << l;
  }
}

// Continuous random matrices: ties are (almost) impossible, so the sets must agree unless the
// best two sets are within rounding of each other.
TEST(KascadeAnchors, EqualsBruteForceOnRandomMatrices) {
  int compared = 0;
  for (unsigned seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    const int L = 1 + static_cast<int>(seed % 8);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> S(static_cast<std::size_t>(L) * L, 0.0);
    for (int a = 0; a < L; ++a) {
      S[static_cast<std::size_t>(a) * L + a] = 1.0;
      for (int b = a + 1; b < L; ++b) S[static_cast<std::size_t>(a) * L + b] = u(rng);
    }
    std::vector<double> w;
    if (seed % 3 == 0)
      for (int l = 0; l < L; ++l) w.push_back(0.1 + u(rng));
    for (int count = 1; count <= L; ++count) {
      const KascadeAnchors got = kascade_anchors(S, L, count, w);
      const Brute want = brute_force(S, L, count, w);
      EXPECT_NEAR(got.score, want.score, 1e-12) << "seed " << seed << ", count " << count;
      if (want.score - want.runner_up > 1e-9) {
        EXPECT_EQ(got.anchors, want.anchors) << "seed " << seed << ", count " << count;
        ++compared;
      }
      expect_sources(got, L);
    }
  }
  EXPECT_GT(compared, 1000);
}

// Values on a grid of quarters (sums exact in double) make ties common: the DP must pick the
// lexicographically smallest optimal list, as the brute force does.
TEST(KascadeAnchors, TiesGoToTheLexicographicallySmallestList) {
  int tied = 0;
  for (unsigned seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);
    const int L = 1 + static_cast<int>(seed % 8);
    std::uniform_int_distribution<int> quarter(0, 4);
    std::vector<double> S(static_cast<std::size_t>(L) * L, 0.0);
    for (int a = 0; a < L; ++a) {
      S[static_cast<std::size_t>(a) * L + a] = 1.0;
      for (int b = a + 1; b < L; ++b) S[static_cast<std::size_t>(a) * L + b] = quarter(rng) / 4.0;
    }
    std::vector<double> w;
    if (seed % 2 == 0)
      for (int l = 0; l < L; ++l) w.push_back(1 + quarter(rng) / 2.0);
    for (int count = 1; count <= L; ++count) {
      const KascadeAnchors got = kascade_anchors(S, L, count, w);
      const Brute want = brute_force(S, L, count, w);
      EXPECT_EQ(got.score, want.score) << "seed " << seed << ", count " << count;
      EXPECT_EQ(got.anchors, want.anchors) << "seed " << seed << ", count " << count;
      expect_sources(got, L);
      if (want.runner_up == want.score) ++tied;
    }
  }
  EXPECT_GT(tied, 100);  // the ties this test is about do occur
}

TEST(KascadeAnchors, AllOnesPrefersEarliestAnchors) {
  const int L = 6;
  const std::vector<double> S(L * L, 1.0);
  const KascadeAnchors got = kascade_anchors(S, L, 3);
  EXPECT_EQ(got.anchors, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(got.source, (std::vector<int>{0, 1, 2, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(got.score, 6.0);
}

TEST(KascadeAnchors, RejectsImpossibleCounts) {
  const std::vector<double> S(16, 1.0);
  EXPECT_THROW(kascade_anchors(S, 4, 0), luka::Error);
  EXPECT_THROW(kascade_anchors(S, 4, 5), luka::Error);
  EXPECT_THROW(kascade_anchors(S, 3, 2), luka::Error);                     // 16 values for 3 layers
  EXPECT_THROW(kascade_anchors(S, 4, 2, std::vector<double>(3, 1.0)), luka::Error);  // weights
}

// ===== head remapping on hand-built attention ==================================================

// Two layers, three KV heads of two query heads each. Pattern p puts 0.4 on keys p and p + 3 and
// spreads the rest evenly; every key row of one KV group follows one pattern. Layer 0 uses
// patterns (0, 1, 2); layer 1 uses (2, 0, 0), so with k = 2 the best map is 0→2, 1→0, 2→0 (many
// to one), each recovering all of its top-k mass.
TEST(KascadeHeadMap, FindsTheKnownMap) {
  const int L = 2, H = 6, KV = 3, Q = 4, N = 10;
  const int pattern[L][KV] = {{0, 1, 2}, {2, 0, 0}};
  std::vector<float> rows(static_cast<std::size_t>(L) * H * Q * N, 0.0f);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < Q; ++q) {
        const int n = N - Q + q + 1;  // 7..10 keys, so keys p and p + 3 are always visible
        float* r = rows.data() + ((static_cast<std::size_t>(l) * H + h) * Q + q) * N;
        const int p = pattern[l][h / 2];
        for (int i = 0; i < n; ++i) r[i] = i == p || i == p + 3 ? 0.4f : 0.2f / static_cast<float>(n - 2);
      }
  KascadeOptions opt;
  opt.top_k.count = 2;
  const PromptAttention prompt = prompt_attention(rows.data(), L, H, KV, Q, N);
  const KascadeSimilarity sim = kascade_similarity({prompt}, opt);
  EXPECT_EQ(kascade_head_map(sim, 0, 1), (std::vector<int>{2, 0, 0}));
  EXPECT_NEAR(sim.layer_sim(0, 1), 1.0, 1e-12);
  // Any other head recovers only the spread mass at its two keys: (2 · 0.2/(n−2)) / 0.8, least at n = 10.
  EXPECT_NEAR(sim.head_sim(0, 1, 1, 0), 2 * 0.2 / 8 / 0.8, 1e-6);

  // Head g reusing head g: no layer-1 head has its layer-0 namesake's pattern, so each recovers
  // only spread mass.
  opt.heads = KascadeHeads::kIdentity;
  const KascadeSimilarity ident = kascade_similarity({prompt}, opt);
  EXPECT_EQ(kascade_head_map(ident, 0, 1), (std::vector<int>{0, 1, 2}));
  EXPECT_NEAR(ident.layer_sim(0, 1), 2 * 0.2 / 8 / 0.8, 1e-6);

  // The plan with one anchor: layer 1 reuses layer 0 through the map; with two, each its own.
  const KascadePlan one = kascade_plan(sim, 1);
  EXPECT_EQ(one.anchors.source, (std::vector<int>{0, 0}));
  EXPECT_EQ(one.head_map[1], (std::vector<int>{2, 0, 0}));
  const KascadePlan two = kascade_plan(sim, 2);
  EXPECT_EQ(two.anchors.source, (std::vector<int>{0, 1}));
  EXPECT_EQ(two.head_map[1], (std::vector<int>{0, 1, 2}));
}

TEST(KascadeSimilarity, RejectsMismatchedPrompts) {
  std::vector<float> rows(2 * 4 * 3 * 3, 1.0f / 3);
  KascadeOptions opt;
  EXPECT_THROW(kascade_similarity({}, opt), luka::Error);
  EXPECT_THROW(kascade_similarity({prompt_attention(rows.data(), 2, 4, 3, 3, 3)}, opt), luka::Error);  // 4 % 3
  EXPECT_THROW(kascade_similarity({prompt_attention(rows.data(), 2, 4, 2, 3, 3), prompt_attention(rows.data(), 1, 4, 2, 3, 3)}, opt),
               luka::Error);
}

}  // namespace
