// The LuKA attention core against independent computations: dense attention by its formula
// (softmax(s·q·Kᵀ)·V in fp64), the dense decoder (kernels/cpu), and hand-built pages with known
// summaries, biases and refinement choices.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <tuple>
#include <vector>

#include "core/luka/luka_attention.h"
#include "core/luka/prefill.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "tests/core/luka/luka_sequence.h"

namespace luka {
namespace {

namespace fs = std::filesystem;
using test::Sequence;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

LayerConfig clustered(std::int64_t page, std::int64_t tail, std::int64_t interval) {
  LayerConfig c;
  c.mode = AttentionMode::kClustered;
  c.clustered.page_size = page;
  c.clustered.tail = tail;
  c.clustered.interval = interval;
  return c;
}

// Runs prefill of `prompt` tokens then decodes the rest, calling check(step_output, pos).
template <typename F>
void run(LukaAttention& att, const Sequence& s, std::int64_t prompt, F&& check) {
  c10::InferenceMode guard;
  att.forward(s.inputs(0, prompt));
  for (std::int64_t pos = prompt; pos < s.N; ++pos) check(att.forward(s.inputs(pos, 1)).view({s.H, s.D}), pos);
}

TEST(LukaAttention, ClusteredExactWithEveryPageRefinedIsDense) {
  const Sequence s(6, 2, 16, 140, 1);
  LayerConfig c = clustered(8, 12, 4);
  c.clustered.math = RefineMath::kExact;
  c.clustered.rule = RefineRule::kTopFrac;
  c.clustered.top_frac = 1.0;
  LukaAttention att(0, c);
  double worst = 0;
  run(att, s, 60, [&](const at::Tensor& out, std::int64_t pos) { worst = std::max(worst, max_diff(out, s.dense(pos).first)); });
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(att.pages().size(), 6u);  // pages made after prefill and during decode
}

TEST(LukaAttention, LinedWithBudgetCoveringTheContextIsDense) {
  const Sequence s(4, 4, 8, 90, 2);
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.window = 16;
  c.lined.rho = 1.0;  // ⌈ρ·T⌉ + W ≥ T
  for (const Selection sel : {Selection::kPerHead, Selection::kPerGroup, Selection::kPerLayer}) {
    c.lined.selection = sel;
    LukaAttention att(0, c);
    double worst = 0;
    run(att, s, 30, [&](const at::Tensor& out, std::int64_t pos) { worst = std::max(worst, max_diff(out, s.dense(pos).first)); });
    EXPECT_LE(worst, 1e-5) << to_string(sel);
  }
}

TEST(LukaAttention, LinedCoverIsWindowPlusTopH2oTokens) {
  const Sequence s(2, 1, 8, 80, 3);
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.window = 10;
  c.lined.rho = 0.1;
  LukaAttention att(0, c);
  c10::InferenceMode guard;
  att.forward(s.inputs(0, 60));
  const at::Tensor h2o = att.h2o_score().clone();  // the scores the next step selects by
  const at::Tensor out = att.forward(s.inputs(60, 1)).view({2, 8});
  const std::int64_t T = 61, W = 10, m = 7;  // ⌈0.1·61⌉
  for (std::int64_t h = 0; h < 2; ++h) {
    // Independent selection: sort the scores outside the window.
    std::vector<std::pair<float, std::int64_t>> ranked;
    for (std::int64_t t = 0; t < T - W; ++t) ranked.push_back({-h2o[h][t].item<float>(), t});
    std::sort(ranked.begin(), ranked.end());
    std::vector<std::int64_t> expected;
    for (std::int64_t i = 0; i < m; ++i) expected.push_back(ranked[i].second);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(att.last_step().heavy[h], expected) << h;
    // Exact softmax over the cover only.
    std::vector<std::int64_t> cover = expected;
    for (std::int64_t t = T - W; t < T; ++t) cover.push_back(t);
    const at::Tensor idx = at::tensor(cover, at::kLong);
    const at::Tensor kk = s.k[0].index_select(0, idx).to(at::kDouble), vv = s.v[0].index_select(0, idx).to(at::kDouble);
    const at::Tensor p = at::softmax(at::matmul(kk, s.q[h][60].to(at::kDouble)) / std::sqrt(8.0), 0);
    EXPECT_LE(max_diff(out[h], at::matmul(p, vv)), 1e-5);
    EXPECT_NEAR(att.last_step().effective[h].sum().item<double>(), 1.0, 1e-5);
    EXPECT_NEAR(att.last_step().effective[h].index_select(0, idx).sum().item<double>(), 1.0, 1e-5);
  }
}

// A decode step adds its effective rows to h2o_score and their group mean to importance, bit for
// bit as the ATen formula does (the accumulators are summed in one pass, not through ATen ops),
// in every mode and for groups of 1, 2 and 4 heads.
TEST(LukaAttention, DecodeStepsAccumulateTheirRowsExactly) {
  for (const std::int64_t G : {1, 2, 4}) {
    const Sequence s(4, 4 / G, 8, 90, 6);
    for (const AttentionMode mode : {AttentionMode::kDense, AttentionMode::kLined, AttentionMode::kClustered}) {
      LayerConfig c = clustered(8, 16, 5);
      c.mode = mode;
      c.lined.window = 12;
      c.lined.rho = 0.2;
      LukaAttention att(0, c);
      c10::InferenceMode guard;
      att.forward(s.inputs(0, 70));
      for (std::int64_t pos = 70; pos < 76; ++pos) {
        const at::Tensor h2o = att.h2o_score().clone(), imp = att.importance().clone();
        att.forward(s.inputs(pos, 1));
        const at::Tensor rows = att.last_step().effective;
        const std::int64_t T = pos + 1;
        at::Tensor want_h2o = at::zeros({4, T}, at::kFloat), want_imp = at::zeros({4 / G, T}, at::kFloat);
        want_h2o.narrow(1, 0, pos).copy_(h2o);
        want_imp.narrow(1, 0, pos).copy_(imp);
        want_h2o.add_(rows);
        want_imp.add_(rows.view({4 / G, G, T}).sum(1).div_(static_cast<double>(G)));
        EXPECT_TRUE(at::equal(att.h2o_score(), want_h2o)) << to_string(mode) << " G " << G << " at " << pos;
        EXPECT_TRUE(at::equal(att.importance(), want_imp)) << to_string(mode) << " G " << G << " at " << pos;
      }
    }
  }
}

TEST(LukaAttention, EffectiveAttentionSumsToOneAndCoversEachTokenOnce) {
  const Sequence s(4, 2, 8, 120, 4);
  for (const AttentionMode mode : {AttentionMode::kDense, AttentionMode::kLined, AttentionMode::kClustered}) {
    for (const RefineMath math : {RefineMath::kMassPreserving, RefineMath::kExact}) {
      LayerConfig c = clustered(8, 16, 5);
      c.mode = mode;
      c.clustered.math = math;
      c.clustered.compressor = Compressor::kAttentionWeighted;
      c.lined.window = 12;
      LukaAttention att(0, c);
      run(att, s, 50, [&](const at::Tensor&, std::int64_t pos) {
        const LukaStep& st = att.last_step();
        ASSERT_EQ(st.effective.size(1), pos + 1);
        EXPECT_LE((st.effective.sum(1) - 1).abs().max().item<double>(), 1e-5) << to_string(mode) << " step " << st.step;
        EXPECT_GE(st.effective.min().item<double>(), 0.0);
        // Cover size: every token (dense); heavy hitters + window (lined); summaries left,
        // refined children and the raw tail (clustered) — counted here from the parts.
        for (std::int64_t h = 0; h < 4; ++h) {
          std::int64_t expect = pos + 1;
          if (mode == AttentionMode::kLined) {
            expect = static_cast<std::int64_t>(st.heavy[h].size()) + std::min<std::int64_t>(12, pos + 1);
            EXPECT_EQ(st.effective[h].gt(0).sum().item<std::int64_t>(), expect) << "lined cover entries carry mass";
          } else if (mode == AttentionMode::kClustered) {
            // Pages made at the end of this step (every 5 steps) were not in its cover.
            const std::int64_t pages_then = st.paged_end / 8;
            expect = pages_then + 7 * static_cast<std::int64_t>(st.refined[h].size()) + (pos + 1 - st.paged_end);
          }
          EXPECT_EQ(st.cover_size[h], expect) << to_string(mode) << " head " << h;
        }
        EXPECT_GT(st.seconds, 0.0);
        // Pages partition [0, paged_end) in order; raw tokens are [paged_end, T); nothing twice.
        std::int64_t expect_start = 0;
        for (const Page& p : att.pages()) {
          EXPECT_EQ(p.start, expect_start);
          EXPECT_EQ(p.end - p.start, 8);
          expect_start = p.end;
        }
        EXPECT_EQ(att.paged_end(), expect_start);
        EXPECT_LE(att.paged_end(), pos + 1 - 16 + 5);  // tail respected when the pages were made
        // An unrefined page spreads its mass by π, which sums to 1 per page.
        const at::Tensor spread = att.spread();
        for (std::size_t p = 0; p < att.pages().size(); ++p)
          EXPECT_NEAR(spread.narrow(1, att.pages()[p].start, 8).sum(1).min().item<double>(), 1.0, 1e-5);
      });
    }
  }
}

TEST(LukaAttention, MassPreservingChildrenCarryThePagesMassAndOracleIsDense) {
  const Sequence s(4, 2, 16, 100, 5);
  LayerConfig c = clustered(8, 16, 4);
  c.clustered.math = RefineMath::kMassPreserving;
  c.clustered.rule = RefineRule::kTopK;
  c.clustered.top_k = 2;
  {
    LukaAttention att(0, c);
    run(att, s, 60, [&](const at::Tensor&, std::int64_t) {
      const LukaStep& st = att.last_step();
      for (std::int64_t h = 0; h < 4; ++h)
        for (const std::int64_t p : st.refined[h]) {
          const Page& pg = att.pages()[p];
          EXPECT_NEAR(st.effective[h].narrow(0, pg.start, pg.end - pg.start).sum().item<double>(),
                      st.summary_mass[h][p].item<double>(), 1e-6);
        }
    });
  }
  // Oracle summary logits (log-sum-exp of the children) make α the page's dense mass; with
  // every page refined the result is dense attention.
  c.clustered.rule = RefineRule::kTopFrac;
  c.clustered.top_frac = 1.0;
  LukaAttention att(0, c);
  att.set_oracle_summary_logits(true);
  double worst = 0, worst_mass = 0;
  run(att, s, 60, [&](const at::Tensor& out, std::int64_t pos) {
    const auto [ref, probs] = s.dense(pos);
    worst = std::max(worst, max_diff(out, ref));
    worst_mass = std::max(worst_mass, max_diff(att.last_step().effective, probs));
  });
  EXPECT_LE(worst, 1e-5);
  EXPECT_LE(worst_mass, 1e-6);
}

// top_frac 0 refines nothing: the same outputs as top_k 0 (summaries and the raw tail only).
TEST(LukaAttention, TopFracZeroRefinesNothing) {
  const Sequence s(4, 2, 16, 80, 7);
  LayerConfig a = clustered(8, 16, 4), b = a;
  a.clustered.rule = RefineRule::kTopK;
  a.clustered.top_k = 0;
  b.clustered.rule = RefineRule::kTopFrac;
  b.clustered.top_frac = 0;
  LukaAttention att_a(0, a), att_b(0, b);
  std::vector<at::Tensor> outs;
  run(att_a, s, 40, [&](const at::Tensor& out, std::int64_t) { outs.push_back(out.clone()); });
  std::size_t i = 0, refined = 0;
  double worst = 0;
  run(att_b, s, 40, [&](const at::Tensor& out, std::int64_t) {
    worst = std::max(worst, max_diff(out, outs.at(i++)));
    for (const auto& r : att_b.last_step().refined) refined += r.size();
  });
  EXPECT_EQ(i, outs.size());
  EXPECT_FALSE(att_b.pages().empty());
  EXPECT_EQ(refined, 0u);
  EXPECT_EQ(worst, 0.0);
}

// KL(dense || effective) is never below 0: where the two agree (dense mode, or every page refined
// exactly) rounding of the fp32 effective row put tiny negative values in the fidelity table.
TEST(LukaAttention, FidelityKlIsNeverNegative) {
  const Sequence s(6, 2, 16, 120, 3);
  LayerConfig dense;
  dense.dense_shadow = true;
  LayerConfig all = clustered(8, 12, 4);
  all.dense_shadow = true;
  all.clustered.rule = RefineRule::kTopFrac;
  all.clustered.top_frac = 1.0;
  for (const LayerConfig& c : {dense, all}) {
    LukaAttention att(0, c);
    double lowest = 1, highest = -1;
    run(att, s, 40, [&](const at::Tensor&, std::int64_t) {
      const at::Tensor kl = att.last_step().fidelity.select(1, 0);
      lowest = std::min(lowest, kl.min().item<double>());
      highest = std::max(highest, kl.max().item<double>());
    });
    EXPECT_GE(lowest, 0.0) << (c.mode == AttentionMode::kDense ? "dense" : "clustered, every page refined");
    EXPECT_LE(highest, 1e-6);
  }
}

// Two pages of two tokens, D = 2, one head: summaries, spreads and biases by hand.
TEST(LukaAttention, CompressorsAndBiasesOnHandBuiltPages) {
  c10::InferenceMode guard;
  const at::Tensor k = at::tensor({1.f, 0.f, 3.f, 0.f, 0.f, 2.f, 0.f, 4.f, 1.f, 1.f}).view({1, 5, 2});
  const at::Tensor v = at::tensor({2.f, 2.f, 4.f, 0.f, 1.f, 3.f, 5.f, 1.f, 0.f, 0.f}).view({1, 5, 2});
  const at::Tensor q = at::tensor({0.5f, -0.25f, 1.f, 0.f, 0.f, 1.f, -1.f, 2.f, 0.3f, 0.3f}).view({1, 5, 2});
  AttentionInputs in;
  in.q = q;
  in.k = k;
  in.v = v;
  in.group_size = 1;
  in.scale = 1.0 / std::sqrt(2.0);
  // Importance after the prefill, by the formula: column sums of the causal softmax.
  const at::Tensor scores = at::matmul(q[0].to(at::kDouble), k[0].to(at::kDouble).t()) * in.scale;
  const at::Tensor mask = at::ones({5, 5}, at::kBool).triu(1);
  const at::Tensor imp = at::softmax(scores.masked_fill(mask, -INFINITY), -1).sum(0);

  const auto make = [&](Compressor comp, SummaryBias bias, double tau, bool zero_v) {
    LayerConfig c = clustered(2, 1, 1);  // tail 1: pages [0,2) and [2,4)
    c.clustered.compressor = comp;
    c.clustered.bias = bias;
    c.clustered.tau = tau;
    c.clustered.zero_v = zero_v;
    auto att = std::make_unique<LukaAttention>(0, c);
    att->forward(in);
    EXPECT_EQ(att->pages().size(), 2u);
    return att;
  };
  {
    const auto att = make(Compressor::kMean, SummaryBias::kFixed, 1.0, false);
    EXPECT_LE(max_diff(att->summary_keys()[0], at::tensor({2.f, 0.f, 0.f, 3.f}).view({2, 2})), 1e-7);
    EXPECT_LE(max_diff(att->summary_values()[0], at::tensor({3.f, 1.f, 3.f, 2.f}).view({2, 2})), 1e-7);
    EXPECT_NEAR(att->summary_bias()[0][0].item<double>(), std::log(2.0), 1e-7);
    EXPECT_LE(max_diff(att->spread()[0], at::full({4}, 0.5)), 1e-7);
    EXPECT_LE(max_diff(att->importance()[0], imp), 1e-6);
  }
  {
    const double tau = 0.5;
    const auto att = make(Compressor::kAttentionWeighted, SummaryBias::kAdaptive, tau, false);
    for (int p = 0; p < 2; ++p) {
      const at::Tensor pi = at::softmax(imp.narrow(0, 2 * p, 2) / tau, 0);
      const at::Tensor expect_k = at::matmul(pi, k[0].narrow(0, 2 * p, 2).to(at::kDouble));
      EXPECT_LE(max_diff(att->summary_keys()[0][p], expect_k), 1e-6) << p;
      EXPECT_LE(max_diff(att->spread()[0].narrow(0, 2 * p, 2), pi), 1e-6);
      const double entropy = -(pi * pi.log()).sum().item<double>();
      EXPECT_NEAR(att->summary_bias()[0][p].item<double>(), entropy, 1e-6);
    }
  }
  {
    const auto a = make(Compressor::kRandom, SummaryBias::kAdaptive, 1.0, false);
    const auto b = make(Compressor::kRandom, SummaryBias::kAdaptive, 1.0, false);
    EXPECT_TRUE(at::equal(a->summary_keys(), b->summary_keys()));  // seeded: reproducible
    for (int p = 0; p < 2; ++p) {
      const at::Tensor sk = a->summary_keys()[0][p];
      const bool is_member = at::equal(sk, k[0][2 * p]) || at::equal(sk, k[0][2 * p + 1]);
      EXPECT_TRUE(is_member) << "page " << p << " summary is one of its tokens";
      EXPECT_NEAR(a->summary_bias()[0][p].item<double>(), 0.0, 1e-7);  // k_eff = 1
    }
  }
  {
    const auto att = make(Compressor::kMean, SummaryBias::kNone, 1.0, true);
    EXPECT_EQ(att->summary_values().abs().max().item<float>(), 0.0f);
    EXPECT_EQ(att->summary_bias().abs().max().item<float>(), 0.0f);
  }
}

TEST(LukaAttention, RefinementRules) {
  ClusteredConfig c;
  const std::vector<float> score = {0.05f, 0.2f, 0.1f, 0.3f};
  c.rule = RefineRule::kThreshold;
  c.epsilon = 0.1;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1, 3}));
  c.rule = RefineRule::kTopK;
  c.top_k = 2;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1, 3}));
  c.top_k = 10;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{0, 1, 2, 3}));
  c.rule = RefineRule::kTopFrac;
  c.top_frac = 0.5;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1, 3}));
  c.top_frac = 0.3;  // ⌈1.2⌉ = 2
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1, 3}));
  c.rule = RefineRule::kTopP;
  c.top_p = 0.25;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{3}));
  c.top_p = 0.45;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1, 3}));
  c.always_refine_first = 1;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{0, 1, 3}));
  c.rule = RefineRule::kTopK;
  c.top_k = 0;
  c.always_refine_first = 2;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{0, 1}));
}

TEST(LukaAttention, PagesAfterPrefillThenEveryIntervalSteps) {
  const Sequence s(2, 1, 8, 60, 6);
  LukaAttention att(0, clustered(8, 15, 4));
  c10::InferenceMode guard;
  att.forward(s.inputs(0, 40));
  ASSERT_EQ(att.pages().size(), 3u);  // (40 - 15) / 8 = 3 full pages, made after prefill
  for (const Page& p : att.pages()) EXPECT_EQ(p.created_step, 0);
  for (std::int64_t pos = 40; pos < 48; ++pos) {
    att.forward(s.inputs(pos, 1));
    const std::int64_t step = pos - 39;
    // [24, 32) becomes eligible at T = 47 (step 7) but waits for step 8.
    EXPECT_EQ(att.pages().size(), step < 8 ? 3u : 4u) << "step " << step;
  }
  EXPECT_EQ(att.pages().back().start, 24);
  EXPECT_EQ(att.pages().back().created_step, 8);
}

// The reference implementation's prefill for lined layers: a query at position p sees keys < 32
// and the window (p - W, p]; exact causal attention otherwise.
TEST(LukaAttention, LinedSparsePrefillSeesSinksAndWindowOnly) {
  const Sequence s(2, 1, 8, 70, 8);
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.window = 10;
  c.lined.sparse_prefill = true;
  LukaAttention att(0, c);
  c10::InferenceMode guard;
  const at::Tensor out = att.forward(s.inputs(0, 70)).view({70, 2, 8});
  for (const std::int64_t p : {5, 31, 40, 69}) {
    std::vector<std::int64_t> keys;
    for (std::int64_t j = 0; j <= p; ++j)
      if (j < 32 || j > p - 10) keys.push_back(j);
    const at::Tensor idx = at::tensor(keys, at::kLong);
    const at::Tensor kk = s.k[0].index_select(0, idx).to(at::kDouble), vv = s.v[0].index_select(0, idx).to(at::kDouble);
    for (std::int64_t h = 0; h < 2; ++h) {
      const at::Tensor prob = at::softmax(at::matmul(kk, s.q[h][p].to(at::kDouble)) / std::sqrt(8.0), 0);
      EXPECT_LE(max_diff(out[p][h], at::matmul(prob, vv)), 1e-5) << "query " << p << " head " << h;
    }
  }
  // Without the option the same layer's prefill is exact causal attention.
  c.lined.sparse_prefill = false;
  LukaAttention exact(0, c);
  const at::Tensor full = exact.forward(s.inputs(0, 70)).view({70, 2, 8});
  const at::Tensor kk = s.k[0].narrow(0, 0, 70).to(at::kDouble), vv = s.v[0].narrow(0, 0, 70).to(at::kDouble);
  const at::Tensor prob = at::softmax(at::matmul(kk, s.q[1][69].to(at::kDouble)) / std::sqrt(8.0), 0);
  EXPECT_LE(max_diff(full[69][1], at::matmul(prob, vv)), 1e-5);
}

// h2o_score with decay γ: score ← γ·score + attention row, over prefill queries and decode steps.
TEST(LukaAttention, H2oDecayAccumulatesByTheRecurrence) {
  const Sequence s(2, 1, 8, 30, 9);
  LayerConfig c;
  c.mode = AttentionMode::kDense;
  c.lined.decay = 0.9;
  LukaAttention att(0, c);
  c10::InferenceMode guard;
  att.forward(s.inputs(0, 20));
  for (std::int64_t pos = 20; pos < 30; ++pos) att.forward(s.inputs(pos, 1));
  at::Tensor expect = at::zeros({2, 30}, at::kDouble);
  for (std::int64_t p = 0; p < 30; ++p) {
    const at::Tensor probs = s.dense(p).second;  // [H, p + 1]
    expect.mul_(0.9);
    expect.narrow(1, 0, p + 1).add_(probs);
  }
  EXPECT_LE(max_diff(att.h2o_score(), expect), 1e-5);
  // importance has no decay: the mean over the group's heads, summed over every query.
  at::Tensor imp = at::zeros({30}, at::kDouble);
  for (std::int64_t p = 0; p < 30; ++p) imp.narrow(0, 0, p + 1).add_(s.dense(p).second.mean(0));
  EXPECT_LE(max_diff(att.importance()[0], imp), 1e-5);
}

TEST(LukaAttention, StateOutOfStepIsAnError) {
  const Sequence s(2, 1, 8, 20, 7);
  LukaAttention att(0, LayerConfig{});
  c10::InferenceMode guard;
  att.forward(s.inputs(0, 10));
  EXPECT_THROW(att.forward(s.inputs(12, 1)), Error);
}

// --- whole model ------------------------------------------------------------------------------

const fs::path kCheckpoint = fs::path(LUKA_TEST_WORK) / "checkpoints" / "qwen3-fp16-sharded";

std::vector<std::int32_t> token_ids(int n) {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 131 + 17) % 1000);
  return ids;
}

// Logits of every decode step after a prefill of `prompt` tokens.
std::vector<at::Tensor> decode_logits(Decoder& d, const std::vector<std::int32_t>& ids, std::size_t prompt,
                                      const std::function<void(std::size_t)>& before_step = {}) {
  std::vector<at::Tensor> out;
  d.prefill(std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prompt)));
  for (std::size_t i = prompt; i < ids.size(); ++i) {
    if (before_step) before_step(i - prompt);
    out.push_back(d.decode(ids[i]));
  }
  return out;
}

// The largest difference between two runs' logits, step by step.
double worst_diff(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, max_diff(got[i], ref[i]));
  return worst;
}

class LukaModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kCheckpoint / "config.json")) GTEST_SKIP() << "no fixture checkpoint at " << kCheckpoint;
    model_ = Model::load(kCheckpoint, LoadOptions{DType::kF32, 0});
    ASSERT_GE(model_->config().max_position_embeddings, 300);
  }
  std::shared_ptr<const Model> model_;
};

TEST_F(LukaModel, ClusteredExactAllRefinedMatchesDenseOver300Tokens) {
  const auto ids = token_ids(300);
  Decoder dense(model_);
  const auto ref = decode_logits(dense, ids, 100);
  LukaConfig cfg = LukaConfig::preset("clustered", model_->config().num_layers);
  cfg.apply_override("page_size=8,tail=16,interval=8,refine_math=exact,rule=top_frac,top_frac=1");
  Decoder luka(model_);
  const auto layers = install_luka(luka, cfg);
  const auto got = decode_logits(luka, ids, 100);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, max_diff(got[i], ref[i]));
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(layers[0]->pages().size(), 10u);
  EXPECT_GT(layers[0]->pages().back().created_step, 0);
}

// Decoder::reserve sizes every layer's accumulators for the run at once (no regrow inside it), and
// the logits are bit for bit those of a decoder that grew them step by step.
TEST_F(LukaModel, ReservedAccumulatorsHoldTheRunAndChangeNoLogit) {
  const auto ids = token_ids(260);
  const LukaConfig cfg = LukaConfig::preset("clustered", model_->config().num_layers);
  Decoder grown(model_), reserved(model_);
  install_luka(grown, cfg);
  const auto layers = install_luka(reserved, cfg);
  reserved.reset();
  reserved.reserve(260);
  const auto a = decode_logits(grown, ids, 60), b = decode_logits(reserved, ids, 60);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "step " << i;
  for (const auto& l : layers) {
    const at::Tensor imp = dynamic_cast<LukaAttention&>(*l).importance();
    EXPECT_EQ(imp.storage().nbytes(), static_cast<std::size_t>(imp.size(0) * 260 * 4)) << "layer " << l->layer() << ": exactly the run's 260 tokens";
  }
  EXPECT_EQ(reserved.cache(0).capacity(), 260);
}

// Kascade through the decoder: anchors 0 and 2, layers 1 and 3 reusing them through the model's
// board. With a top-k that keeps every key it is dense attention, prefill tiles included; with
// 8 keys it changes the logits and keeps them finite.
TEST_F(LukaModel, KascadeKeepingEveryKeyMatchesDense) {
  const auto ids = token_ids(200);
  Decoder dense(model_);
  const auto ref = decode_logits(dense, ids, 150);
  LukaConfig cfg = LukaConfig::preset("dense", model_->config().num_layers);
  cfg.apply_override("mode=kascade,kascade_top_frac=1,kascade_tile=32");
  cfg.apply_override("layers=1,kascade_source=0,kascade_head_map=0");
  cfg.apply_override("layers=3,kascade_source=2");
  Decoder luka(model_);
  const auto layers = install_luka(luka, cfg);
  EXPECT_LE(worst_diff(decode_logits(luka, ids, 150), ref), 1e-5);
  EXPECT_EQ(layers[3]->last_step().kascade_source, 2);
  EXPECT_EQ(layers[1]->last_step().kascade_source, 0);

  cfg.apply_override("kascade_top_frac=0,kascade_top_k=8");
  Decoder sparse(model_);
  const auto sparse_layers = install_luka(sparse, cfg);
  const auto few = decode_logits(sparse, ids, 150);
  EXPECT_TRUE(at::isfinite(few.back()).all().item<bool>());
  EXPECT_GT(max_diff(few.back(), ref.back()), 1e-4);
  EXPECT_EQ(sparse_layers[3]->last_step().selected[0], sparse_layers[2]->last_step().selected[0]);
  EXPECT_EQ(sparse_layers[3]->last_step().selected[0].size(), 8u);
}

TEST_F(LukaModel, LinedWithFullBudgetMatchesDense) {
  const auto ids = token_ids(160);
  Decoder dense(model_);
  const auto ref = decode_logits(dense, ids, 60);
  LukaConfig cfg = LukaConfig::preset("lined", model_->config().num_layers);
  cfg.apply_override("rho=1,window=8");
  Decoder luka(model_);
  install_luka(luka, cfg);
  const auto got = decode_logits(luka, ids, 60);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, max_diff(got[i], ref[i]));
  EXPECT_LE(worst, 1e-5);
}

TEST_F(LukaModel, SwitchingALayerChangesOutputsFromThatStepOnly) {
  const auto ids = token_ids(200);
  LukaConfig cfg = LukaConfig::preset("dense", model_->config().num_layers);
  cfg.apply_override("page_size=8,tail=16,interval=4");
  Decoder a(model_), b(model_);
  install_luka(a, cfg);
  const auto layers_b = install_luka(b, cfg);
  const auto ref = decode_logits(a, ids, 100);
  const std::size_t switch_at = 40;
  const auto got = decode_logits(b, ids, 100, [&](std::size_t step) {
    if (step == switch_at) {
      LayerConfig c = layers_b[1]->config();
      c.mode = AttentionMode::kClustered;
      layers_b[1]->set_config(c);
    }
  });
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i < switch_at) {
      EXPECT_TRUE(at::equal(got[i], ref[i])) << "step " << i << " before the switch";
    } else {
      EXPECT_GT(max_diff(got[i], ref[i]), 1e-6) << "step " << i << " after the switch";
    }
  }
  EXPECT_EQ(layers_b[1]->last_step().mode, AttentionMode::kClustered);
  EXPECT_EQ(layers_b[0]->last_step().mode, AttentionMode::kDense);
}

// A capture asks the layer for its prefill map max-pooled to the pyramid's finest stored level.
// On the CPU the core hands level 0 whatever it is asked (the capture pools halves faster), with
// the same blocks and outputs as without the request; on a device the blocks are pooled where
// they lie (observe_prefill_block, checked here on CPU tensors against repeated 2x2 pooling).
TEST(LukaAttention, PrefillObserverOnTheCpuHandsLevelZeroWhateverItIsAsked) {
  const Sequence s(6, 2, 16, 300, 31);
  LayerConfig lined;
  lined.mode = AttentionMode::kLined;
  lined.lined.decay = 0.9;
  lined.lined.sparse_prefill = true;
  for (const auto& [name, config] : std::vector<std::pair<const char*, LayerConfig>>{{"dense", LayerConfig{}}, {"lined", lined}}) {
    const auto prefill = [&, config = config](int level, std::vector<at::Tensor>* blocks) {
      c10::InferenceMode guard;
      LukaAttention att(1, config);
      att.set_prefill_observer([&](int, std::int64_t, std::int64_t, const at::Tensor& p) { blocks->push_back(p.clone()); }, level);
      return att.forward(s.inputs(0, s.N));
    };
    std::vector<at::Tensor> level0, asked;
    const at::Tensor out0 = prefill(0, &level0), out = prefill(4, &asked);
    SCOPED_TRACE(name);
    EXPECT_TRUE(at::equal(out, out0));
    ASSERT_EQ(asked.size(), level0.size());
    for (std::size_t i = 0; i < asked.size(); ++i) {
      EXPECT_EQ(asked[i].size(2), s.N);
      EXPECT_TRUE(at::equal(asked[i], level0[i]));
    }
  }
}

TEST(LukaAttention, PrefillBlocksPoolToTheLevelAskedWhereTheyLie) {
  at::manual_seed(5);
  const at::Tensor probs = at::rand({2, 40, 77});
  for (const int level : {1, 2, 3, 5}) {
    SCOPED_TRACE("level " + std::to_string(level));
    at::Tensor got;
    std::int64_t got_q0 = -1, got_head0 = -1;
    observe_prefill_block([&](int, std::int64_t q0, std::int64_t head0, const at::Tensor& p) { got = p.clone(), got_q0 = q0, got_head0 = head0; },
                          level, 3, 64, 4, probs);
    // Independent path: 2x2 cells, `level` times (a cut last cell keeps the max of what exists).
    at::Tensor expect = probs;
    for (int k = 0; k < level; ++k) expect = at::max_pool2d(expect, {2, 2}, {2, 2}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
    EXPECT_EQ(got_q0, 64);
    EXPECT_EQ(got_head0, 4);
    ASSERT_EQ(got.sizes(), expect.sizes());
    EXPECT_TRUE(at::equal(got, expect));
  }
  const auto ignore = [](int, std::int64_t, std::int64_t, const at::Tensor&) {};
  EXPECT_THROW(observe_prefill_block(ignore, 3, 0, 12, 0, probs), Error);  // 12 is not a multiple of 8
  EXPECT_EQ(aligned_pool_level(3, 0, 100), 2);
  EXPECT_EQ(aligned_pool_level(5, 64, 256), 5);
  EXPECT_EQ(aligned_pool_level(5, 48, 256), 4);
  EXPECT_EQ(aligned_pool_level(0, 7, 3), 0);
}

}  // namespace
}  // namespace luka
