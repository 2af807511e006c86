// The incremental heavy set (kernels/common/heavy_set.h) against a full selection every step:
// core/luka's select_heavy_hitters (what the CPU lined step uses) and a sort by (score desc,
// position asc), over lined score streams — random, tied, and the zeros a sparse prefill leaves —
// for units of one and two heads, both budget roundings and heavy_late, with the cover's
// attention added back to the scores as a lined step does (decay 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "core/luka/heavy_hitters.h"
#include "kernels/common/heavy_set.h"
#include "kernels/common/luka_rules.h"

namespace {

enum class Init { kRandom, kTied, kSparsePrefill };
enum class Probs { kRandom, kTied, kZeroProne };

struct Stream {
  Init init = Init::kRandom;
  Probs probs = Probs::kRandom;
  int heads = 1;               // heads in the unit (their rows summed)
  std::int64_t prefill = 600;  // tokens before the first decode step
  std::int64_t steps = 300;
  luka::rules::LinedRule rule;
  std::uint32_t seed = 1;
};

// Direct reference: every position sorted by (score desc, position asc), the first m, ascending.
std::vector<std::int64_t> sorted_best(const std::vector<float>& score, std::int64_t n, std::int64_t m) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(),
            [&](std::int64_t a, std::int64_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
  idx.resize(static_cast<std::size_t>(std::min(m, n)));
  std::sort(idx.begin(), idx.end());
  return idx;
}

struct Result {
  std::int64_t incremental_steps = 0, scored = 0, full_rank = 0, full_updates = 0;
};

Result run(const Stream& st) {
  std::mt19937 rng(st.seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const std::int64_t cap = st.prefill + st.steps + 1;
  std::vector<std::vector<float>> rows(static_cast<std::size_t>(st.heads),
                                       std::vector<float>(static_cast<std::size_t>(cap), 0.0f));
  const std::int64_t Wp = luka::rules::fixed_prefill_window(st.rule, st.prefill);
  for (auto& r : rows)
    for (std::int64_t t = 0; t < st.prefill; ++t) {
      if (st.init == Init::kRandom) r[t] = u(rng);
      if (st.init == Init::kTied) r[t] = static_cast<float>(rng() % 4) / 8.0f;
      // A sparse prefill's queries see only the last window: everything before it scores 0.
      if (st.init == Init::kSparsePrefill && t >= st.prefill - Wp) r[t] = 1.0f / static_cast<float>(Wp);
    }
  const auto score = [&](std::int64_t t) {
    float s = 0.0f;  // the unit's rows summed from zero in head order, as the CPU's lined step does
    for (const auto& r : rows) s += r[t];
    return s;
  };
  luka::heavy::HostHeavySet set;
  Result res;
  std::vector<float> summed;
  for (std::int64_t T = st.prefill + 1; T <= st.prefill + st.steps; ++T) {
    const luka::rules::LinedCover c = luka::rules::lined_cover(st.rule, T);
    set.update(score, c.select_end, c.heavy, c.window_start);
    summed.assign(static_cast<std::size_t>(c.select_end), 0.0f);
    for (std::int64_t t = 0; t < c.select_end; ++t) summed[t] = score(t);
    const std::vector<std::int64_t> cpu = luka::select_heavy_hitters(summed.data(), c.select_end, c.heavy);
    const std::vector<std::int64_t> got = set.sorted();
    EXPECT_EQ(got, cpu) << "T " << T;
    EXPECT_EQ(got, sorted_best(summed, c.select_end, c.heavy)) << "T " << T;
    if (got != cpu) break;
    if (set.state().full) {
      ++res.full_updates;
    } else {
      ++res.incremental_steps;
      res.scored += set.state().scored;
      res.full_rank += c.select_end;
    }
    // The step's attention on its cover: the heavy hitters and the window, for every head.
    std::vector<std::int64_t> cover = got;
    for (std::int64_t t = c.window_start; t < T; ++t)
      if (!std::binary_search(got.begin(), got.end(), t)) cover.push_back(t);
    for (auto& r : rows)
      for (const std::int64_t t : cover) {
        float p = u(rng) / static_cast<float>(cover.size());
        if (st.probs == Probs::kTied) p = static_cast<float>(rng() % 3) / 64.0f;
        if (st.probs == Probs::kZeroProne) p = rng() % 2 ? 0.0f : 1.0f / 32.0f;
        r[t] += p;
      }
  }
  return res;
}

void expect_cheap(const Result& r, const char* what) {
  ASSERT_GT(r.incremental_steps, 0) << what;
  std::printf("%s: %lld incremental steps, %.1f positions scored per step (a full selection ranks %.1f), %lld full\n",
              what, static_cast<long long>(r.incremental_steps), static_cast<double>(r.scored) / r.incremental_steps,
              static_cast<double>(r.full_rank) / r.incremental_steps, static_cast<long long>(r.full_updates));
  EXPECT_EQ(r.full_updates, 1) << what << ": a full selection only on the first step";
  // Constant work: a few positions per step whatever the context (the streams here run at 600 and
  // 5000 tokens), against the hundreds a full selection ranks.
  EXPECT_LE(static_cast<double>(r.scored) / r.incremental_steps, 16.0) << what;
}

TEST(HeavySet, MatchesFullSelectionOnRandomScores) {
  for (int heads : {1, 2}) {
    Stream st;
    st.heads = heads;
    st.seed = 10 + heads;
    expect_cheap(run(st), heads == 1 ? "random, one head" : "random, two heads");
    st.prefill = 5000;
    st.steps = 100;
    expect_cheap(run(st), heads == 1 ? "random, one head, 5000 tokens" : "random, two heads, 5000 tokens");
  }
}

TEST(HeavySet, MatchesFullSelectionOnTiedScores) {
  for (Probs p : {Probs::kTied, Probs::kZeroProne}) {
    Stream st;
    st.init = Init::kTied;
    st.probs = p;
    st.heads = 2;
    st.seed = 20 + static_cast<int>(p);
    expect_cheap(run(st), p == Probs::kTied ? "tied" : "tied, zero-prone attention");
  }
}

// After the authors' sparse prefill every score before the prompt's last window is 0: the set is
// decided by position alone until attention reaches those tokens.
TEST(HeavySet, MatchesFullSelectionOnZerosAfterSparsePrefill) {
  for (Probs p : {Probs::kRandom, Probs::kZeroProne}) {
    Stream st;
    st.init = Init::kSparsePrefill;
    st.probs = p;
    st.rule.window = 64;
    st.seed = 30 + static_cast<int>(p);
    expect_cheap(run(st), "sparse prefill zeros");
  }
}

// The authors' rules: max(1, ⌊ρT⌋) heavy hitters picked at T − 1 with their window, the window a
// fraction of T (so it grows and the selectable range moves by 0 or 1 per step), and a short
// prompt whose window is the whole context (the pick then lies inside it).
TEST(HeavySet, MatchesFullSelectionUnderTheAuthorsRules) {
  Stream st;
  st.rule.rounding = luka::BudgetRounding::kFloor;
  st.rule.heavy_late = true;
  st.rule.window_frac = 0.1;
  st.rule.rho = 0.2;
  st.prefill = 3;
  st.steps = 400;
  st.init = Init::kTied;
  st.seed = 40;
  expect_cheap(run(st), "authors' rules");
}

// With decay every score moves: the caller invalidates each step and gets the full selection.
TEST(HeavySet, InvalidatedEveryStepUnderDecayEqualsFullSelection) {
  std::mt19937 rng(50);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> s(400);
  for (float& x : s) x = u(rng);
  luka::heavy::HostHeavySet set;
  const auto score = [&](std::int64_t t) { return s[t]; };
  for (std::int64_t T = 300; T < 400; ++T) {
    for (std::int64_t t = 0; t < T; ++t) s[t] = 0.9f * s[t] + (rng() % 5 == 0 ? u(rng) : 0.0f);
    luka::heavy::invalidate(set.state());
    set.update(score, T - 32, 40, T - 32);
    EXPECT_TRUE(set.state().full);
    EXPECT_EQ(set.sorted(), luka::select_heavy_hitters(s.data(), T - 32, 40)) << "T " << T;
  }
}

}  // namespace
