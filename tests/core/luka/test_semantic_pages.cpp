// SemantiCache's pages (core/luka/methods/semantic_pages.h): delimiter chunking on known token streams,
// GSC and merging against a line-by-line NumPy port of the paper's Algorithm 1
// (tests/fixtures/semanticache_reference.py), and proportional attention against dense attention.
#include "core/luka/methods/semantic_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/util/error.h"
#include "core/util/npy.h"
#include "tests/python_reference.h"

namespace luka {
// For comparing and printing unit lists (found by argument-dependent lookup).
bool operator==(const SemanticUnit& a, const SemanticUnit& b) {
  return a.begin == b.begin && a.end == b.end && a.delimiter == b.delimiter;
}
void PrintTo(const SemanticUnit& u, std::ostream* os) {
  *os << (u.delimiter ? "delimiter " : "chunk ") << "[" << u.begin << ", " << u.end << ")";
}
}  // namespace luka

namespace fs = std::filesystem;
using namespace luka;

namespace {

using Units = std::vector<SemanticUnit>;

// ===== delimiter chunking ======================================================================

TEST(DelimiterChunks, KnownTokenStreams) {
  const DelimiterSet paper;
  // Byte-level BPE texts: a leading space belongs to the word, so " cat" is no delimiter.
  EXPECT_EQ(delimiter_chunks({"The", " cat", " sat", ".", " ", "It", ",", "\n", "ran", "!"}, paper),
            (Units{{0, 3, false}, {3, 4, true}, {4, 5, true}, {5, 6, false}, {6, 7, true}, {7, 8, true}, {8, 9, false}, {9, 10, true}}));
  // Leading and trailing delimiters, and no empty chunks between delimiters.
  EXPECT_EQ(delimiter_chunks({";", ":", "a", "b", "?", "\t"}, paper),
            (Units{{0, 1, true}, {1, 2, true}, {2, 4, false}, {4, 5, true}, {5, 6, true}}));
  // No delimiter: one chunk; nothing: nothing.
  EXPECT_EQ(delimiter_chunks({"x", "y", "z"}, paper), (Units{{0, 3, false}}));
  EXPECT_EQ(delimiter_chunks({}, paper), Units{});
  // Multi-character tokens made of delimiters count only with kComposed.
  const std::vector<std::string> stream{"end", ".\n", "\n\n", "next", ". ", "x.y"};
  EXPECT_EQ(delimiter_chunks(stream, paper), (Units{{0, 6, false}}));
  DelimiterSet composed;
  composed.match = DelimiterSet::Match::kComposed;
  EXPECT_EQ(delimiter_chunks(stream, composed),
            (Units{{0, 1, false}, {1, 2, true}, {2, 3, true}, {3, 4, false}, {4, 5, true}, {5, 6, false}}));
  // A configured set.
  DelimiterSet custom;
  custom.texts = {"<sep>", "|"};
  EXPECT_EQ(delimiter_chunks({"a", ".", "<sep>", "b", "|"}, custom), (Units{{0, 2, false}, {2, 3, true}, {3, 4, false}, {4, 5, true}}));
  EXPECT_FALSE(custom.is_delimiter(""));
}

// ===== GSC by hand =============================================================================

TEST(Gsc, SeedsTakeLaterSimilarKeysAndClustersNeedNotBeContiguous) {
  // Keys along x, y, x, −x, y (2-D): seeds 0 and 1 each take their later copies; −x is its own.
  const float keys[] = {1, 0, 0, 1, 2, 0, -1, 0, 0, 3};
  EXPECT_EQ(gsc_clusters(keys, 2, 2, 0, 5, 0.7), (std::vector<std::vector<int>>{{0, 2}, {1, 4}, {3}}));
  // τ = 1 merges nothing, even keys that are exact multiples of each other.
  EXPECT_EQ(gsc_clusters(keys, 2, 2, 0, 5, 1.0), (std::vector<std::vector<int>>{{0}, {1}, {2}, {3}, {4}}));
  // τ below −1 merges everything into the first seed; a chunk of one token is one cluster.
  EXPECT_EQ(gsc_clusters(keys, 2, 2, 0, 5, -1.5), (std::vector<std::vector<int>>{{0, 1, 2, 3, 4}}));
  EXPECT_EQ(gsc_clusters(keys, 2, 2, 3, 4, 0.0), (std::vector<std::vector<int>>{{3}}));
  // Comparisons are with the seed, not with the cluster: 0→1 (cos 0.8) and 1→2 (cos 0.8), but 0↛2 (cos 0.28).
  const float chain[] = {1, 0, 0.8f, 0.6f, 0.28f, 0.96f};
  EXPECT_EQ(gsc_clusters(chain, 2, 2, 0, 3, 0.7), (std::vector<std::vector<int>>{{0, 1}, {2}}));
}

TEST(Gsc, CosineOfZeroKeyIsZeroAndOfItselfOne) {
  const float k[] = {0, 0, 1, 1, 0.3f, -0.7f};
  EXPECT_EQ(key_cosine(k, k + 2, 2), 0.0);
  EXPECT_EQ(key_cosine(k + 2, k + 2, 2), 1.0);
  EXPECT_EQ(key_cosine(k + 4, k + 4, 2), 1.0);
  EXPECT_NEAR(key_cosine(k + 2, k + 4, 2), (0.3 - 0.7) / std::sqrt(2 * (0.09 + 0.49)), 1e-7);
}

// ===== GSC and merging against NumPy ============================================================

TEST(SemanticPages, EqualsAlgorithmOneInNumpy) {
  std::string why;
  const fs::path script = fs::path(LUKA_SOURCE_DIR) / "tests/fixtures/semanticache_reference.py";
  const fs::path dir = luka::test::python_reference(script, {}, fs::path(LUKA_TEST_WORK) / "semanticache", why);
  if (dir.empty()) GTEST_SKIP() << why;
  const nlohmann::json cases = nlohmann::json::parse(std::ifstream(dir / "cases.json"));
  ASSERT_GE(cases.size(), 30u);
  int merged_cases = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + ": " + cases[c].dump());
    const std::string p = (dir / ("case" + std::to_string(c) + "_")).string();
    const NpyArray keys = read_npy_f32(p + "keys.npy"), values = read_npy_f32(p + "values.npy");
    const NpyArray delim = read_npy_f32(p + "delimiter.npy"), core = read_npy_f32(p + "core.npy");
    const NpyArray raw = read_npy_f32(p + "raw.npy"), core_keys = read_npy_f32(p + "core_keys.npy");
    const NpyArray core_values = read_npy_f32(p + "core_values.npy");
    const int N = static_cast<int>(keys.shape[0]), D = static_cast<int>(keys.shape[1]);
    const int DV = static_cast<int>(values.shape[1]);

    std::vector<std::string> texts;
    for (int t = 0; t < N; ++t) texts.push_back(delim.data[static_cast<std::size_t>(t)] != 0 ? "." : " w" + std::to_string(t));
    const SemanticPages pages = semantic_pages(delimiter_chunks(texts, DelimiterSet{}), keys.data.data(), D,
                                               values.data.data(), DV, {cases[c]["tau"].get<double>()});
    ASSERT_EQ(static_cast<std::size_t>(pages.cores()), raw.data.size());
    if (pages.cores() < N) ++merged_cases;
    std::vector<int> seen(static_cast<std::size_t>(N), 0);
    for (int k = 0; k < pages.cores(); ++k) {
      const std::vector<int>& m = pages.members[static_cast<std::size_t>(k)];
      ASSERT_FALSE(m.empty());
      EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
      for (int t : m) {
        EXPECT_EQ(static_cast<int>(core.data[static_cast<std::size_t>(t)]), k) << "position " << t;
        ++seen[static_cast<std::size_t>(t)];
      }
      EXPECT_EQ(pages.raw[static_cast<std::size_t>(k)], raw.data[static_cast<std::size_t>(k)]);
      EXPECT_FLOAT_EQ(pages.bias[static_cast<std::size_t>(k)], std::log(static_cast<float>(m.size())));
      for (int i = 0; i < D; ++i)
        EXPECT_NEAR(pages.keys[static_cast<std::size_t>(k) * D + i], core_keys.data[static_cast<std::size_t>(k) * D + i], 1e-6);
      for (int i = 0; i < DV; ++i)
        EXPECT_NEAR(pages.values[static_cast<std::size_t>(k) * DV + i], core_values.data[static_cast<std::size_t>(k) * DV + i], 1e-6);
    }
    for (int t = 0; t < N; ++t) EXPECT_EQ(seen[static_cast<std::size_t>(t)], 1) << "position " << t;
  }
  EXPECT_GT(merged_cases, 10);  // the cases do merge
}

TEST(SemanticPages, RejectsUnitsThatDoNotCoverThePositions) {
  const std::vector<float> k(8, 1.0f);
  EXPECT_THROW(semantic_pages({{1, 2, false}}, k.data(), 2, k.data(), 2, {}), luka::Error);
  EXPECT_THROW(semantic_pages({{0, 2, true}}, k.data(), 2, k.data(), 2, {}), luka::Error);
  EXPECT_THROW(semantic_pages({{0, 2, false}, {1, 3, false}}, k.data(), 2, k.data(), 2, {}), luka::Error);
}

// ===== proportional attention ===================================================================

// softmax(scale q·k_t) v_t over every position, in double: the dense reference.
std::vector<double> dense_attention(const float* q, const std::vector<float>& keys, int key_width, int key_offset, int dim,
                                    const std::vector<float>& values, int value_width, int value_offset, int vdim,
                                    int n, double scale) {
  std::vector<double> logit(static_cast<std::size_t>(n));
  double top = -1e300;
  for (int t = 0; t < n; ++t) {
    double d = 0.0;
    for (int i = 0; i < dim; ++i) d += static_cast<double>(q[i]) * keys[static_cast<std::size_t>(t) * key_width + key_offset + i];
    logit[static_cast<std::size_t>(t)] = scale * d;
    top = std::max(top, scale * d);
  }
  std::vector<double> out(static_cast<std::size_t>(vdim), 0.0);
  double z = 0.0;
  for (int t = 0; t < n; ++t) {
    const double w = std::exp(logit[static_cast<std::size_t>(t)] - top);
    z += w;
    for (int i = 0; i < vdim; ++i) out[static_cast<std::size_t>(i)] += w * values[static_cast<std::size_t>(t) * value_width + value_offset + i];
  }
  for (double& o : out) o /= z;
  return out;
}

// Two heads side by side (key rows [head 0 | head 1]); τ = 1 leaves every cluster one token, so
// attention over the cores is attention over the tokens, head by head. Tolerance: both sums run in
// double from the same floats; the output is rounded to float once, so 1e-6 on values of order 1.
TEST(ProportionalAttention, EqualsDenseWhenEveryClusterHoldsOneToken) {
  const int N = 37, D = 8, HEADS = 2;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> keys(static_cast<std::size_t>(N) * HEADS * D), values(static_cast<std::size_t>(N) * HEADS * D);
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = normal(rng);
  std::vector<std::string> texts;
  for (int t = 0; t < N; ++t) texts.push_back(t % 5 == 4 ? "," : "w");
  const SemanticPages pages = semantic_pages(delimiter_chunks(texts, DelimiterSet{}), keys.data(), HEADS * D, values.data(),
                                             HEADS * D, {1.0});
  ASSERT_EQ(pages.cores(), N);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> q(D);
    for (float& x : q) x = 2.0f * normal(rng);
    for (int h = 0; h < HEADS; ++h) {
      std::vector<float> got(D);
      proportional_attention(q.data(), pages, h * D, D, h * D, D, scale, got.data());
      const std::vector<double> want = dense_attention(q.data(), keys, HEADS * D, h * D, D, values, HEADS * D, h * D, D, N, scale);
      for (int i = 0; i < D; ++i) EXPECT_NEAR(got[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)], 1e-6) << "head " << h;
    }
  }
}

// Clusters of identical keys: the merged core with log|S| added carries exactly the mass of its
// members, so attention over the cores still equals dense attention; without the bias it does not.
TEST(ProportionalAttention, BiasRestoresTheMassOfMergedDuplicates) {
  const int D = 4, N = 12;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> distinct(static_cast<std::size_t>(4) * D);
  for (float& x : distinct) x = normal(rng);
  const int which[N] = {0, 1, 0, 0, 2, 1, 3, 2, 0, 3, 3, 1};  // cluster sizes 4, 3, 2, 3
  std::vector<float> keys, values;
  for (int t = 0; t < N; ++t) {
    keys.insert(keys.end(), distinct.begin() + which[t] * D, distinct.begin() + (which[t] + 1) * D);
    for (int i = 0; i < D; ++i) values.push_back(normal(rng));
  }
  SemanticPages pages = semantic_pages({{0, N, false}}, keys.data(), D, values.data(), D, {0.99});
  ASSERT_EQ(pages.cores(), 4);
  EXPECT_EQ(pages.members[0], (std::vector<int>{0, 2, 3, 8}));
  std::vector<float> q(D);
  for (float& x : q) x = normal(rng);
  const double scale = 0.5;
  std::vector<float> got(D);
  proportional_attention(q.data(), pages, 0, D, 0, D, scale, got.data());
  const std::vector<double> want = dense_attention(q.data(), keys, D, 0, D, values, D, 0, D, N, scale);
  for (int i = 0; i < D; ++i) EXPECT_NEAR(got[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)], 1e-6);

  std::fill(pages.bias.begin(), pages.bias.end(), 0.0f);
  proportional_attention(q.data(), pages, 0, D, 0, D, scale, got.data());
  double diff = 0.0;
  for (int i = 0; i < D; ++i) diff = std::max(diff, std::abs(got[static_cast<std::size_t>(i)] - want[static_cast<std::size_t>(i)]));
  EXPECT_GT(diff, 1e-3);
}

}  // namespace
