// Lined mode's heavy hitters: the full selection against an independent sort, the incremental set
// (HeavyHitterSet) against the full selection over many random steps, and a lined layer and the
// default model whose sets are updated step to step against the same ranked from scratch every
// step, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "core/luka/heavy_hitters.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "kernels/common/luka_rules.h"
#include "tests/core/luka/luka_sequence.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using test::Sequence;

// The m best by a stable sort on the score alone (descending): equal scores keep position order.
std::vector<std::int64_t> by_sort(const std::vector<float>& score, std::int64_t m) {
  std::vector<std::int64_t> idx(score.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) { return score[a] > score[b]; });
  idx.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(m, 0, static_cast<std::int64_t>(idx.size()))));
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(HeavyHitters, FullSelectionIsTheBestWithTiesToTheLowerPosition) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t n = std::uniform_int_distribution<std::int64_t>(0, 60)(rng);
    std::vector<float> score(static_cast<std::size_t>(n));
    const int levels = trial % 3 == 0 ? 2 : 5;  // few distinct values: many ties
    for (float& s : score) s = static_cast<float>(std::uniform_int_distribution<int>(0, levels)(rng)) * 0.25f;
    for (const std::int64_t m : {std::int64_t{0}, std::int64_t{1}, n / 3, n - 1, n, n + 4})
      EXPECT_EQ(select_heavy_hitters(score.data(), n, m), by_sort(score, m)) << "n " << n << " m " << m;
  }
}

// One simulated lined run: h heads in a unit, context growing from t0 to t1, the rule's window
// and budget, and after each step the cover's scores change as a lined step changes them (the
// heavy hitters and the window gain mass; `signed_changes`: they may also lose some).
void simulate(const rules::LinedRule& rule, int heads, std::int64_t t0, std::int64_t t1, std::uint32_t seed,
              bool signed_changes, int levels) {
  std::mt19937 rng(seed);
  std::vector<std::vector<float>> h2o(static_cast<std::size_t>(heads), std::vector<float>(static_cast<std::size_t>(t1), 0.0f));
  const auto mass = [&] {
    const int k = std::uniform_int_distribution<int>(signed_changes ? -levels : 0, levels)(rng);
    return static_cast<float>(k) * 0.125f;  // coarse values: exact ties between positions are common
  };
  for (auto& row : h2o)
    for (std::int64_t t = 0; t < t0; ++t) row[t] = std::abs(mass()) * 4;  // the prefill's scores
  HeavyHitterSet set;
  HeavyHitterSet::Rows rows;
  for (auto& row : h2o) rows.push_back(row.data());
  std::int64_t full_after_first = 0;
  for (std::int64_t T = t0; T <= t1; ++T) {
    const rules::LinedCover lc = rules::lined_cover(rule, T);
    std::vector<float> sum(static_cast<std::size_t>(lc.select_end), 0.0f);
    for (const auto& row : h2o)
      for (std::int64_t t = 0; t < lc.select_end; ++t) sum[t] += row[t];
    const std::vector<std::int64_t> expected = select_heavy_hitters(sum.data(), lc.select_end, lc.heavy);
    ASSERT_EQ(expected, by_sort(sum, lc.heavy)) << "T " << T;
    const std::vector<std::int64_t> got = set.select(rows, lc.select_end, lc.heavy, lc.window_start);
    ASSERT_EQ(got, expected) << "T " << T << " select_end " << lc.select_end << " heavy " << lc.heavy;
    if (T > t0) full_after_first += set.last_full_rank() > 0;
    // The step's cover gains (or loses) mass; nothing else moves.
    for (auto& row : h2o) {
      for (const std::int64_t t : got) row[t] += mass();
      for (std::int64_t t = lc.window_start; t < T; ++t) row[t] += mass();
    }
  }
  EXPECT_EQ(full_after_first, 0) << "only the first step ranks from scratch";
}

TEST(HeavyHitters, IncrementalEqualsFullSelectionOverRandomSteps) {
  std::uint32_t seed = 1;
  for (const double rho : {0.0, 0.001, 0.01, 0.125, 0.5, 1.0}) {
    for (const std::int64_t window : {0, 1, 8, 32}) {
      for (const int heads : {1, 3}) {
        rules::LinedRule r;
        r.rho = rho;
        r.window = window;
        SCOPED_TRACE("rho " + std::to_string(rho) + " window " + std::to_string(window) + " heads " + std::to_string(heads));
        simulate(r, heads, 1, 200, seed++, false, 3);   // from the first token: the window holds all of it at first
        simulate(r, heads, 40, 160, seed++, false, 1);  // two mass levels: ties everywhere
      }
    }
  }
}

// The authors' budget rules: the whole context selectable while it fits in the window (the
// selectable range then shrinks when T passes it), window as a fraction, heavy hitters chosen at
// the previous step's context.
TEST(HeavyHitters, IncrementalFollowsTheAuthorsRules) {
  std::uint32_t seed = 100;
  for (const bool late : {false, true}) {
    for (const double frac : {0.0, 0.1, 0.3}) {
      rules::LinedRule r;
      r.rounding = BudgetRounding::kFloor;
      r.heavy_late = late;
      r.window = 20;
      r.window_frac = frac;
      r.rho = 0.1;
      SCOPED_TRACE(std::string(late ? "heavy_late " : "") + "window_frac " + std::to_string(frac));
      simulate(r, 1, 2, 150, seed++, false, 3);
      simulate(r, 2, 2, 150, seed++, false, 1);
      r.rounding = BudgetRounding::kCeil;
      simulate(r, 1, 2, 150, seed++, false, 3);
    }
  }
}

// The set does not rely on scores only growing: cover scores that fall are handled too.
TEST(HeavyHitters, IncrementalFollowsCoverScoresThatFall) {
  rules::LinedRule r;
  r.window = 6;
  r.rho = 0.2;
  for (std::uint32_t seed = 0; seed < 20; ++seed) simulate(r, 1 + static_cast<int>(seed % 2), 10, 180, 500 + seed, true, 4);
}

// --- a lined layer, incremental against ranked from scratch -----------------------------------

// Two layers on the same inputs: `fresh` ranks from scratch every step (the selection before
// HeavyHitterSet). A switch to dense and back happens in both at the same steps, and `inc` is
// given its config again once mid-way (which restarts its sets).
TEST(HeavyHitters, LinedLayerEqualsRankingFromScratchEveryStep) {
  const Sequence s(6, 2, 16, 260, 11, 2.0);
  for (const char* spec : {"window=16,rho=0.125", "window=16,rho=0.125,lined_selection=group",
                           "window=4,rho=0.3,lined_selection=layer", "window=16,rho=0.001", "window=8,rho=1",
                           "window_frac=0.1,rho=0.1,lined_rounding=floor,heavy_late=true",
                           "window=16,rho=0.125,importance_source=cover"}) {
    SCOPED_TRACE(spec);
    LukaConfig cfg = LukaConfig::preset("lined", 1);
    cfg.apply_override(spec);
    const LayerConfig lined = cfg.layers[0];
    LayerConfig dense = lined;
    dense.mode = AttentionMode::kDense;
    LukaAttention inc(0, lined), fresh(0, lined);
    fresh.set_incremental_heavy_hitters(false);
    c10::InferenceMode guard;
    ASSERT_TRUE(at::equal(inc.forward(s.inputs(0, 40)), fresh.forward(s.inputs(0, 40))));
    for (std::int64_t pos = 40; pos < s.N; ++pos) {
      const LayerConfig& c = pos >= 150 && pos < 155 ? dense : lined;
      if (pos == 150 || pos == 155 || pos == 200) inc.set_config(c);
      if (pos == 150 || pos == 155) fresh.set_config(c);
      const at::Tensor a = inc.forward(s.inputs(pos, 1)), b = fresh.forward(s.inputs(pos, 1));
      ASSERT_TRUE(at::equal(a, b)) << "pos " << pos;
      ASSERT_EQ(inc.last_step().heavy, fresh.last_step().heavy) << "pos " << pos;
    }
    EXPECT_TRUE(at::equal(inc.h2o_score(), fresh.h2o_score()));
    EXPECT_FALSE(inc.last_step().heavy[0].empty() && lined.lined.rho > 0);
  }
}

// The default model (SmolLM2-135M) with every layer lined: logits of 48 decode steps after a
// 300-token prompt, bit for bit the same whether each layer's set is updated or ranked from scratch.
TEST(HeavyHitters, DefaultModelLinedLogitsEqualRankingFromScratch) {
  const fs::path path = fs::path(LUKA_SOURCE_DIR) / "models" / "default";
  if (!fs::exists(path)) GTEST_SKIP() << "no default model at " << path << " (scripts/setup.sh)";
  c10::InferenceMode guard;
  const auto model = Model::load(path, LoadOptions{DType::kF32, 0});
  std::vector<std::int32_t> ids;
  std::mt19937 rng(3);
  for (int i = 0; i < 348; ++i) ids.push_back(std::uniform_int_distribution<std::int32_t>(200, 20000)(rng));
  const LukaConfig cfg = LukaConfig::preset("lined", model->config().num_layers);
  Decoder inc(model), fresh(model);
  install_luka(inc, cfg);
  for (const auto& l : install_luka(fresh, cfg)) dynamic_cast<LukaAttention&>(*l).set_incremental_heavy_hitters(false);
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + 300);
  ASSERT_TRUE(at::equal(inc.prefill(prompt), fresh.prefill(prompt)));
  for (std::size_t i = 300; i < ids.size(); ++i) {
    ASSERT_TRUE(at::equal(inc.decode(ids[i]), fresh.decode(ids[i]))) << "step " << i - 300;
  }
}

}  // namespace
}  // namespace luka
