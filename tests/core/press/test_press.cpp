// The field's KV-cache methods (core/press/press.h) against NVIDIA kvpress 0.5.5 itself
// (tests/fixtures/kvpress_reference.py, kvpress installed by tests/fixtures/kvpress_env.py): on six
// small random Qwen3 and Llama checkpoints (GQA 1, 2 and 4), at several budgets, every layer's
// scores within a stated float32 tolerance, and the same kept set per KV head wherever the
// selection's boundary does not fall on tied scores (equal, or closer than twice the layer's
// largest disagreement with kvpress; ties are counted apart and checked to differ only among the
// tied positions). Also: budgets that keep everything, token budgets, PyramidKV's rounding, and
// bad input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "core/press/press.h"
#include "core/util/error.h"
#include "core/util/npy.h"
#include "tests/core/press/kvpress_fixture.h"

namespace fs = std::filesystem;
using namespace luka;
using namespace luka::press;

namespace {

// Scores agree to |ours − kvpress| <= kAbs + kRel·|kvpress| (float32, the same operations in the
// same order; the queries differ in their last bits where kvpress projects a slice of the hidden
// states and the reference all of them).
constexpr double kAbs = 1e-6, kRel = 2e-5;

double tolerance(double ref) { return kAbs + kRel * std::fabs(ref); }

at::Tensor load(const fs::path& path) { return luka::test::load_npy_tensor(path); }

// The reference folder, made once for all the test processes (making it takes a minute or two).
fs::path kvpress_reference(std::string& why) {
  return luka::test::kvpress_reference_dir("kvpress_reference.py", "kvpress", "kvpress reference", why);
}

struct Model {
  std::string name;
  int heads = 0, kv_heads = 0, head_dim = 0, layers = 0;
  double attention_scaling = 1.0;
  std::vector<LayerInputs> inputs;
};

struct Case {
  std::string model, name, method;
  double ratio = 0;
  nlohmann::json params;
};

struct Reference {
  fs::path dir;
  std::map<std::string, Model> models;
  std::vector<Case> cases;
};

const Reference* reference(std::string& why) {
  static Reference ref;
  static std::string missing;
  static bool loaded = false;
  if (!loaded) {
    loaded = true;
    ref.dir = kvpress_reference(missing);
    if (!ref.dir.empty()) {
      const nlohmann::json m = nlohmann::json::parse(std::ifstream(ref.dir / "manifest.json"));
      for (const auto& j : m["models"]) {
        Model model;
        model.name = j["name"];
        model.heads = j["heads"];
        model.kv_heads = j["kv_heads"];
        model.head_dim = j["head_dim"];
        model.layers = j["layers"];
        model.attention_scaling = j["attention_scaling"];
        const fs::path d = ref.dir / model.name;
        const at::Tensor inv_freq = load(d / "inv_freq.npy");
        for (int l = 0; l < model.layers; ++l) {
          const std::string p = "layer" + std::to_string(l) + "_";
          LayerInputs in;
          in.keys = load(d / (p + "keys.npy"));
          in.values = load(d / (p + "values.npy"));
          in.queries = load(d / (p + "q_post.npy"));
          in.queries_pre_rope = load(d / (p + "q_pre.npy"));
          in.inv_freq = inv_freq;
          in.attention_scaling = model.attention_scaling;
          model.inputs.push_back(in);
        }
        ref.models[model.name] = model;
      }
      for (const auto& j : m["cases"])
        ref.cases.push_back({j["model"], j["case"], j["method"], j["compression_ratio"], j["params"]});
    }
  }
  why = missing;
  return ref.dir.empty() ? nullptr : &ref;
}

ScorerParams scorer_params(const nlohmann::json& p) {
  ScorerParams s;
  s.n_sink = p.value("n_sink", s.n_sink);
  s.window_size = p.value("window_size", s.window_size);
  s.kernel_size = p.value("kernel_size", s.kernel_size);
  s.n_future_positions = p.value("n_future_positions", s.n_future_positions);
  s.use_covariance = p.value("use_covariance", s.use_covariance);
  s.use_vnorm = p.value("use_vnorm", s.use_vnorm);
  s.epsilon = p.value("epsilon", s.epsilon);
  s.seed = p.value("seed", s.seed);
  return s;
}

// "snapkv", "pyramidkv" (SnapKV scored, pyramid budgets), "adakv:<scorer>".
std::pair<Scorer, AllocationParams> method_of(const Case& c) {
  AllocationParams a;
  std::string scorer = c.method;
  if (c.method == "pyramidkv") {
    a.allocation = Allocation::kPyramid;
    a.beta = c.params.value("beta", a.beta);
    scorer = "snapkv";
  } else if (c.method.rfind("adakv:", 0) == 0) {
    a.allocation = Allocation::kAdaKv;
    a.alpha_safeguard = c.params.value("alpha_safeguard", a.alpha_safeguard);
    scorer = c.method.substr(6);
  }
  return {scorer_from_name(scorer), a};
}

// The gap between the n-th and (n+1)-th highest of `v` (infinite when n is 0 or all).
double boundary_gap(std::vector<float> v, std::int64_t n, float* at = nullptr) {
  if (n <= 0 || n >= static_cast<std::int64_t>(v.size())) return INFINITY;
  std::sort(v.begin(), v.end(), std::greater<float>());
  if (at) *at = v[static_cast<std::size_t>(n)];
  return static_cast<double>(v[static_cast<std::size_t>(n - 1)]) - v[static_cast<std::size_t>(n)];
}

struct Parity {
  int heads = 0, equal = 0;          // sets compared where the boundary is clear, and equal ones
  int tie_heads = 0, tie_equal = 0;  // boundary on tied (or within-tolerance) scores
  int exact_ties = 0;                // of those, scores tied exactly in kvpress's own
  double max_abs = 0, max_rel = 0;   // score error
  int cases = 0;
};

// Compares one method's cases over every model and layer into `r` (void: ASSERT_* returns).
void check_method(const Reference& ref, const std::function<bool(const Case&)>& wanted, Parity& r) {
  for (const Case& c : ref.cases) {
    if (!wanted(c)) continue;
    ++r.cases;
    const Model& m = ref.models.at(c.model);
    const auto [scorer, alloc] = method_of(c);
    const ScorerParams sp = scorer_params(c.params);
    const fs::path cdir = ref.dir / c.model / c.name;
    const at::Tensor ref_scores = load(cdir / "scores.npy"), ref_kept = load(cdir / "kept.npy");
    for (int l = 0; l < m.layers; ++l) {
      SCOPED_TRACE(c.model + "/" + c.name + " layer " + std::to_string(l));
      Budget b;
      b.compression_ratio = c.ratio;
      const PressResult ours = press_layer(scorer, sp, alloc, b, m.inputs[static_cast<std::size_t>(l)], l, m.layers);
      ASSERT_TRUE(ours.scores.defined());
      const at::Tensor rs = ref_scores[l].contiguous(), rk = ref_kept[l].contiguous();
      ASSERT_EQ(ours.scores.sizes(), rs.sizes());
      const std::int64_t H = rs.size(0), T = rs.size(1);
      const float* a = ours.scores.data_ptr<float>();
      const float* e = rs.data_ptr<float>();
      const float* kept_mask = rk.data_ptr<float>();
      // Two scores closer than twice the layer's largest disagreement with kvpress may be ordered
      // either way by either side: that is a tie here (and so is an exact one).
      double layer_err = 0;
      for (std::int64_t i = 0; i < H * T; ++i) {
        const double err = std::fabs(static_cast<double>(a[i]) - e[i]);
        layer_err = std::max(layer_err, err);
        r.max_abs = std::max(r.max_abs, err);
        if (std::fabs(e[i]) > 1e-3) r.max_rel = std::max(r.max_rel, err / std::fabs(e[i]));
        ASSERT_LE(err, tolerance(e[i])) << "score of head " << i / T << " position " << i % T << ": " << a[i]
                                        << " against kvpress's " << e[i];
      }
      // kvpress's scores as its selection saw them: AdaKV raises each head's safeguarded best.
      std::vector<std::vector<float>> rows(static_cast<std::size_t>(H));
      std::vector<std::set<std::int64_t>> ref_sets(static_cast<std::size_t>(H));
      for (std::int64_t h = 0; h < H; ++h) {
        rows[h].assign(e + h * T, e + (h + 1) * T);
        for (std::int64_t t = 0; t < T; ++t)
          if (kept_mask[h * T + t] > 0.5f) ref_sets[h].insert(t);
      }
      bool layer_tied = false, layer_exact = false;
      std::vector<float> boundary(static_cast<std::size_t>(H), NAN);
      if (alloc.allocation == Allocation::kAdaKv) {
        const std::int64_t n = b.kept(T);
        std::int64_t safe = static_cast<std::int64_t>(static_cast<double>(n) * alloc.alpha_safeguard);
        if (alloc.alpha_safeguard > 0) safe = n > 0 ? std::max<std::int64_t>(1, safe) : 0;
        // A tie at a head's safeguard boundary swaps positions of equal score, so the layer-wide
        // threshold (a function of the multiset of raised scores) is the same either way; it
        // decides the set only when the tied score does not clear that threshold.
        std::vector<float> all, safe_at(static_cast<std::size_t>(H), -FLT_MAX);
        std::vector<char> safe_tied(static_cast<std::size_t>(H), 0), safe_exact(static_cast<std::size_t>(H), 0);
        for (std::int64_t h = 0; h < H; ++h) {
          const double g = boundary_gap(rows[h], safe, &safe_at[h]);
          safe_tied[h] = g <= 2 * layer_err;
          safe_exact[h] = g == 0;
          std::vector<std::int64_t> order(static_cast<std::size_t>(T));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](std::int64_t x, std::int64_t y) { return rows[h][x] > rows[h][y]; });
          for (std::int64_t i = 0; i < safe; ++i) rows[h][order[i]] = FLT_MAX;
          all.insert(all.end(), rows[h].begin(), rows[h].end());
        }
        float at_b = 0;
        const double g = boundary_gap(all, H * n, &at_b);
        layer_tied |= g <= 2 * layer_err;
        layer_exact |= g == 0;
        for (std::int64_t h = 0; h < H; ++h)
          if (safe_tied[h] && safe_at[h] <= at_b + 2 * layer_err) {
            layer_tied = true;
            layer_exact |= safe_exact[h] != 0;
          }
        std::fill(boundary.begin(), boundary.end(), at_b);
      }
      for (std::int64_t h = 0; h < H; ++h) {
        const std::set<std::int64_t> mine(ours.kept[h].begin(), ours.kept[h].end());
        bool tied = layer_tied, exact = layer_exact;
        if (alloc.allocation != Allocation::kAdaKv) {
          EXPECT_EQ(ours.kept[h].size(), ref_sets[h].size()) << "head " << h << ": the budget differs from kvpress's";
          float at_b = 0;
          const double g = boundary_gap(rows[h], static_cast<std::int64_t>(ref_sets[h].size()), &at_b);
          tied = g <= 2 * layer_err;
          exact = g == 0;
          boundary[h] = at_b;
        }
        if (!tied) {
          ++r.heads;
          r.equal += mine == ref_sets[h];
          EXPECT_EQ(mine, ref_sets[h]) << "head " << h << ": kept sets differ away from ties";
          continue;
        }
        ++r.tie_heads;
        r.exact_ties += exact;
        r.tie_equal += mine == ref_sets[h];
        // Where they differ, only positions scored at the boundary may differ.
        for (std::int64_t t = 0; t < T; ++t)
          if (mine.count(t) != ref_sets[h].count(t))
            EXPECT_LE(std::fabs(rows[h][t] - boundary[h]), 2 * layer_err)
                << "head " << h << " position " << t << " differs but is not tied at the boundary";
      }
    }
  }
}

void report(const char* method, const Parity& p) {
  std::printf(
      "[kvpress parity] %s: %d cases; %d of %d KV-head sets equal away from ties; %d heads with the boundary "
      "on tied scores (%d tied exactly in kvpress's scores, %d of them still equal); score error max %.3g abs, "
      "%.3g rel (tolerance %.0e + %.0e·|score|)\n",
      method, p.cases, p.equal, p.heads, p.tie_heads, p.exact_ties, p.tie_equal, p.max_abs, p.max_rel, kAbs, kRel);
  ::testing::Test::RecordProperty(std::string(method) + "_sets_equal",
                                  std::to_string(p.equal) + "/" + std::to_string(p.heads));
  ::testing::Test::RecordProperty(std::string(method) + "_tie_heads", p.tie_heads);
}

class KvpressParity : public ::testing::TestWithParam<const char*> {};

TEST_P(KvpressParity, ScoresAndKeptSetsEqualKvpress) {
  std::string why;
  const Reference* ref = reference(why);
  if (!ref) GTEST_SKIP() << why;
  const std::string method = GetParam();
  Parity p;
  check_method(
      *ref, [&](const Case& c) { return method == "adakv" ? c.method.rfind("adakv:", 0) == 0 : c.method == method; },
      p);
  if (HasFatalFailure()) return;
  report(method.c_str(), p);
  EXPECT_GE(p.cases, 2) << "the reference has no cases for " << method;
  EXPECT_GT(p.heads, 0);
  // Most sets are decided away from ties; a reference where they are not would test little.
  EXPECT_GE(p.heads, 3 * p.tie_heads) << method << ": too many boundaries on tied scores";
}

INSTANTIATE_TEST_SUITE_P(Methods, KvpressParity,
                         ::testing::Values("streaming_llm", "snapkv", "tova", "knorm", "expected_attention", "random",
                                           "pyramidkv", "adakv"),
                         [](const auto& info) { return std::string(info.param); });

// ===== budgets ================================================================================

std::vector<std::pair<Scorer, AllocationParams>> every_method() {
  std::vector<std::pair<Scorer, AllocationParams>> out;
  for (Scorer s : {Scorer::kStreamingLlm, Scorer::kSnapKv, Scorer::kTova, Scorer::kKnorm, Scorer::kExpectedAttention,
                   Scorer::kRandom})
    for (Allocation a : {Allocation::kUniform, Allocation::kPyramid, Allocation::kAdaKv}) {
      AllocationParams ap;
      ap.allocation = a;
      out.push_back({s, ap});
    }
  return out;
}

TEST(PressBudget, KeepingEveryTokenKeepsEveryToken) {
  std::string why;
  const Reference* ref = reference(why);
  if (!ref) GTEST_SKIP() << why;
  for (const auto& [name, m] : ref->models)
    for (int l = 0; l < m.layers; ++l) {
      const LayerInputs& in = m.inputs[static_cast<std::size_t>(l)];
      const std::int64_t T = in.keys.size(1);
      std::vector<std::int64_t> all(static_cast<std::size_t>(T));
      std::iota(all.begin(), all.end(), 0);
      for (const auto& [s, ap] : every_method())
        for (std::int64_t tokens : {std::int64_t{0}, T, T + 3}) {
          Budget b;
          b.tokens = tokens;  // 0: compression_ratio 0
          const PressResult r = press_layer(s, ScorerParams{}, ap, b, in, l, m.layers);
          ASSERT_EQ(r.kept.size(), static_cast<std::size_t>(m.kv_heads));
          for (const auto& k : r.kept) EXPECT_EQ(k, all) << name << " " << scorer_name(s) << " tokens " << tokens;
        }
      // Scored and selected, a full budget keeps every position too (no shortcut).
      for (Scorer s : {Scorer::kSnapKv, Scorer::kExpectedAttention, Scorer::kKnorm}) {
        const at::Tensor sc = score(s, ScorerParams{}, in, T);
        for (const auto& k : top_per_head(sc, T)) EXPECT_EQ(k, all);
        for (const auto& k : adakv_select(sc, T, 0.2)) EXPECT_EQ(k, all);
      }
    }
}

TEST(PressBudget, TokenBudgetEqualsTheRatioItRoundsTo) {
  std::string why;
  const Reference* ref = reference(why);
  if (!ref) GTEST_SKIP() << why;
  const Model& m = ref->models.begin()->second;
  const LayerInputs& in = m.inputs[1];
  const std::int64_t T = in.keys.size(1);
  for (double ratio : {0.25, 0.5, 0.9}) {
    Budget by_ratio;
    by_ratio.compression_ratio = ratio;
    Budget by_tokens;
    by_tokens.tokens = by_ratio.kept(T);
    EXPECT_EQ(by_tokens.tokens, static_cast<std::int64_t>(T * (1 - ratio)));
    for (const auto& [s, ap] : every_method()) {
      if (ap.allocation == Allocation::kPyramid) continue;  // takes T·(1 − ratio) unrounded
      const PressResult a = press_layer(s, ScorerParams{}, ap, by_ratio, in, 1, m.layers);
      const PressResult b = press_layer(s, ScorerParams{}, ap, by_tokens, in, 1, m.layers);
      EXPECT_EQ(a.kept, b.kept) << scorer_name(s) << " ratio " << ratio;
      std::size_t total = 0;
      for (const auto& k : b.kept) total += k.size();
      EXPECT_EQ(total, static_cast<std::size_t>(by_tokens.tokens * m.kv_heads)) << scorer_name(s);
    }
  }
}

TEST(PressBudget, KvpressRounding) {
  Budget b;
  b.compression_ratio = 0.3;
  EXPECT_EQ(b.kept(192), 134);  // floor(134.4)
  b.compression_ratio = 0.999;
  EXPECT_EQ(b.kept(100), 1);  // never below 1
  b.compression_ratio = 0.0;
  EXPECT_EQ(b.kept(7), 7);
  b.tokens = 50;
  EXPECT_EQ(b.kept(40), 40);
  EXPECT_EQ(b.kept(400), 50);
}

TEST(PressBudget, PyramidLayerBudgets) {
  // T = 192 at ratio 0.5, window 64, beta 20: min = 96 / 20, max = 192 − min >= T − window, so
  // max = 128, min = 192 − 128 = 64; three layers step by 32 (kvpress's own counts in the fixture).
  Budget half;
  half.compression_ratio = 0.5;
  EXPECT_EQ(pyramid_layer_budget(192, half, 0, 3, 64, 20), 128);
  EXPECT_EQ(pyramid_layer_budget(192, half, 1, 3, 64, 20), 96);
  EXPECT_EQ(pyramid_layer_budget(192, half, 2, 3, 64, 20), 64);
  // Ratio 0.25: min would exceed max, so kvpress falls back to SnapKV's round(192 · 0.75).
  Budget quarter;
  quarter.compression_ratio = 0.25;
  EXPECT_EQ(pyramid_layer_budget(192, quarter, 0, 3, 64, 20), 144);
  // Python's round, half to even: 35 tokens, window 16, beta 2 over two layers gives max = 52.5
  // and min = 17.5, rounded to 52 and 18.
  Budget tokens;
  tokens.tokens = 35;
  EXPECT_EQ(pyramid_layer_budget(200, tokens, 0, 2, 16, 2), 52);
  EXPECT_EQ(pyramid_layer_budget(200, tokens, 1, 2, 16, 2), 18);
  // The budgets average the layer budget over the layers.
  EXPECT_EQ(pyramid_layer_budget(200, tokens, 0, 1, 16, 2), 52);  // one layer: the top
}

// ===== selection and ties =====================================================================

TEST(PressSelect, TiesKeepTheLowerPosition) {
  const at::Tensor s = at::tensor({0.5f, 0.2f, 0.5f, 0.9f, 0.2f, 0.2f}, at::kFloat).view({1, 6});
  EXPECT_EQ(top_per_head(s, 3), (KeptSets{{0, 2, 3}}));
  EXPECT_EQ(top_per_head(s, 4), (KeptSets{{0, 1, 2, 3}}));
}

TEST(PressSelect, AdaKvSafeguardAndUnequalHeads) {
  // Head 0 scores high everywhere, head 1 low: without a safeguard head 1 would lose everything.
  const at::Tensor s = at::tensor({9.f, 8.f, 7.f, 6.f, 1.f, 0.5f, 0.2f, 0.1f}, at::kFloat).view({2, 4});
  // n = 2 per head, alpha 0.5: each head keeps its best first (9, 1), then the best two of the rest (8, 7).
  EXPECT_EQ(adakv_select(s, 2, 0.5), (KeptSets{{0, 1, 2}, {0}}));
  // alpha 1: every head keeps its own two.
  EXPECT_EQ(adakv_select(s, 2, 1.0), (KeptSets{{0, 1}, {0, 1}}));
  // alpha 0: the layer's four best, all from head 0.
  EXPECT_EQ(adakv_select(s, 2, 0.0), (KeptSets{{0, 1, 2, 3}, {}}));
}

// ===== bad input ==============================================================================

TEST(PressErrors, ClearMessages) {
  LayerInputs in;
  in.keys = at::randn({2, 10, 8});
  in.values = at::randn({2, 10, 8});
  in.queries = at::randn({4, 10, 8});
  Budget b;
  b.compression_ratio = 1.0;
  EXPECT_THROW(b.validate("layers.json"), Error);
  try {
    b.validate("layers.json");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.json: compression_ratio must be in [0, 1)"), std::string::npos)
        << e.what();
  }
  b.compression_ratio = 0.5;
  try {
    press_layer(Scorer::kSnapKv, ScorerParams{}, AllocationParams{}, b, in, 0, 1);
    FAIL() << "a prompt shorter than SnapKV's window";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("window_size = 64"), std::string::npos) << e.what();
  }
  try {
    scorer_from_name("h2o");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown method \"h2o\""), std::string::npos) << e.what();
  }
  in.keys[0][3][1] = NAN;
  EXPECT_THROW(press_layer(Scorer::kKnorm, ScorerParams{}, AllocationParams{}, b, in, 0, 1), Error);
  in.queries = at::randn({3, 10, 8});  // 3 query heads over 2 KV heads
  ScorerParams small;
  small.window_size = 4;
  EXPECT_THROW(score(Scorer::kSnapKv, small, in, 5), Error);
}

}  // namespace
