// `authors_eval` and the authors' variants (docs/design.md §5.4, §5.6; docs/luka-config.md): each
// variant against a direct formula on hand-built inputs, the shared rules against their tables,
// and whole layers against tests/fixtures/authors_reference.py, a NumPy (float64) port of the
// authors' controller, step for step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "core/luka/luka_attention.h"
#include "core/util/error.h"
#include "core/util/npy.h"
#include "kernels/common/luka_rules.h"
#include "tests/python_reference.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

AttentionInputs inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t pos0, std::int64_t n) {
  AttentionInputs in;
  in.q = q.narrow(1, pos0, n).contiguous();
  in.k = k.narrow(1, 0, pos0 + n);
  in.v = v.narrow(1, 0, pos0 + n);
  in.q_pos0 = pos0;
  in.group_size = q.size(0) / k.size(0);
  in.scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
  return in;
}

// ===== importance: the group mean, and which attention feeds it ===============================

// Dense steps: importance[g][t] = Σ over queries of the mean over g's query heads of the dense
// probabilities, for groups 1, 2 and 4.
TEST(LukaAuthors, ImportanceIsTheMeanOverTheGroup) {
  for (const std::int64_t group : {1, 2, 4}) {
    const std::int64_t KV = 2, H = KV * group, D = 8, N = 40, N0 = 25;
    at::manual_seed(static_cast<std::uint64_t>(group));
    const at::Tensor q = at::randn({H, N, D}) * 1.5, k = at::randn({KV, N, D}), v = at::randn({KV, N, D});
    LukaAttention att(0, LayerConfig{});
    c10::InferenceMode guard;
    att.forward(inputs(q, k, v, 0, N0));
    for (std::int64_t pos = N0; pos < N; ++pos) att.forward(inputs(q, k, v, pos, 1));
    at::Tensor expect = at::zeros({KV, N}, at::kDouble);
    for (std::int64_t p = 0; p < N; ++p)
      for (std::int64_t h = 0; h < H; ++h) {
        const at::Tensor kk = k[h / group].narrow(0, 0, p + 1).to(at::kDouble);
        const at::Tensor pr = at::softmax(at::matmul(kk, q[h][p].to(at::kDouble)) / std::sqrt(double(D)), 0);
        expect[h / group].narrow(0, 0, p + 1).add_(pr / static_cast<double>(group));
      }
    EXPECT_LE(max_diff(att.importance(), expect), 1e-5) << "group " << group;
  }
}

// Clustered steps over a changing cover (pages made after the prefill and every 4 steps, top-2
// pages refined per head, exact math, a fixed summary bias): `cover` importance is the cover
// softmax (summaries with their bias, the raw tail) at each token while it was raw, `effective`
// importance the effective rows, each averaged over the group — recomputed here from the state
// the layer exposes before each step.
TEST(LukaAuthors, CoverAndEffectiveImportanceByTheirFormulas) {
  const std::int64_t H = 4, KV = 2, G = 2, D = 8, N = 90, N0 = 40;
  at::manual_seed(3);
  const at::Tensor q = at::randn({H, N, D}) * 2, k = at::randn({KV, N, D}), v = at::randn({KV, N, D});
  for (const ImportanceSource source : {ImportanceSource::kCover, ImportanceSource::kEffective}) {
    LayerConfig c;
    c.mode = AttentionMode::kClustered;
    c.importance_source = source;
    c.clustered.page_size = 5;
    c.clustered.tail = 12;
    c.clustered.interval = 4;
    c.clustered.top_k = 2;
    c.clustered.math = RefineMath::kExact;
    c.clustered.bias = SummaryBias::kFixed;
    LukaAttention att(0, c);
    c10::InferenceMode guard;
    att.forward(inputs(q, k, v, 0, N0));
    // The prefill is exact causal attention either way.
    at::Tensor expect = at::zeros({KV, N}, at::kDouble);
    for (std::int64_t p = 0; p < N0; ++p)
      for (std::int64_t h = 0; h < H; ++h) {
        const at::Tensor pr = at::softmax(at::matmul(k[h / G].narrow(0, 0, p + 1).to(at::kDouble), q[h][p].to(at::kDouble)) /
                                              std::sqrt(double(D)), 0);
        expect[h / G].narrow(0, 0, p + 1).add_(pr / double(G));
      }
    bool refined_any = false;
    for (std::int64_t pos = N0; pos < N; ++pos) {
      const std::int64_t P = static_cast<std::int64_t>(att.pages().size()), E = att.paged_end(), T = pos + 1;
      const at::Tensor sk = P ? att.summary_keys().to(at::kDouble) : at::Tensor(), sb = P ? att.summary_bias().to(at::kDouble) : at::Tensor();
      att.forward(inputs(q, k, v, pos, 1));
      const LukaStep& st = att.last_step();
      for (std::int64_t h = 0; h < H; ++h) {
        refined_any |= !st.refined[h].empty();
        if (source == ImportanceSource::kEffective) {
          expect[h / G].narrow(0, 0, T).add_(st.effective[h].to(at::kDouble) / double(G));
          continue;
        }
        const at::Tensor qh = q[h][pos].to(at::kDouble);
        at::Tensor logits = at::matmul(k[h / G].narrow(0, E, T - E).to(at::kDouble), qh) / std::sqrt(double(D));
        if (P) logits = at::cat({at::matmul(sk[h / G], qh) / std::sqrt(double(D)) + sb[h / G], logits});
        const at::Tensor alpha = at::softmax(logits, 0);
        expect[h / G].narrow(0, E, T - E).add_(alpha.narrow(0, P, T - E) / double(G));
      }
    }
    EXPECT_TRUE(refined_any);
    EXPECT_GE(att.pages().size(), 8u);
    EXPECT_LE(max_diff(att.importance(), expect), 2e-5) << to_string(source);
    // h2o_score takes the same rows per query head: its group mean is importance.
    EXPECT_LE(max_diff(att.h2o_score().view({KV, G, N}).mean(1), att.importance()), 1e-5);
  }
}

// ===== the authors' variants, each by its direct formula ======================================

// Page timing (rules::pages_due): the decode steps that make pages, for the authors' gate with a
// fresh counter (the prefill is forward 1, so interval 16 pages at decode steps 15, 31, ...), a
// counter primed to interval - 1 as their reset() does (16, 32, ...), and ours.
TEST(LukaAuthors, PageStepsOfEachSchedule) {
  const auto steps_with_pages = [](rules::PageRule r, std::int64_t counter_start, std::int64_t prompt) {
    rules::PageClock clock{counter_start, 0};
    std::int64_t pages = 0, E = 0;
    std::vector<std::int64_t> out;
    const auto run = [&](std::int64_t T, std::int64_t step) {
      const std::int64_t n = rules::pages_due(r, &clock, pages, E, T, step);
      if (n > 0 && step > 0) out.push_back(step);
      pages += n;
      E += n * r.page_size;
    };
    run(prompt, 0);
    for (std::int64_t s = 1; s <= 40; ++s) run(prompt + s, s);
    return std::make_pair(out, pages);
  };
  rules::PageRule r;
  r.page_size = 8;
  r.tail = 17;  // tail_len 16
  r.interval = 16;
  r.authors = true;
  // 60 prompt tokens: a cover of 60 >= 24; no page at the prefill (forward 1 of 16).
  EXPECT_EQ(steps_with_pages(r, 0, 60).first, (std::vector<std::int64_t>{15, 31}));
  EXPECT_EQ(steps_with_pages(r, 15, 60).first, (std::vector<std::int64_t>{16, 32}));
  // 100 prompt tokens, at most 2 pages at a time, interval 1. With the bypass a cover of 2·24
  // skips both gates: 2 pages at the prefill and at steps 1-4 while the cover stays >= 48, then
  // every 8 forwards once the raw tokens exceed 24.
  r.interval = 1;
  r.max_pages = 2;
  r.bypass = true;
  const auto bypass = steps_with_pages(r, 0, 100);
  EXPECT_EQ(bypass.first, (std::vector<std::int64_t>{1, 2, 3, 4, 12, 21, 29, 37}));
  EXPECT_EQ(bypass.second, 2 + 2 * 5 + 3);
  // Without it the prefill (forward 1 since the last pages) makes none; then every 8 forwards.
  r.bypass = false;
  const auto gated = steps_with_pages(r, 0, 100);
  EXPECT_EQ(gated.first, (std::vector<std::int64_t>{7, 15, 23, 31, 39}));
  EXPECT_EQ(gated.second, 10);
  // The count: ⌊(R - tail_len)/P⌋ pages of the R raw tokens, against ours ⌊(R - tail)/P⌋.
  rules::PageRule ours;
  ours.page_size = 8;
  ours.tail = 17;
  r.max_pages = 0;
  r.bypass = true;  // a cover of 48 = 2·24 passes the gates at once
  rules::PageClock big{0, 0};
  EXPECT_EQ(rules::pages_due(r, &big, 0, 0, 16 + 32, 0), 4);   // R - 16 = 32: four pages
  EXPECT_EQ(rules::pages_that_fit(ours, 0, 16 + 32), 3);       // 48 - 17 = 31: three
  EXPECT_EQ(steps_with_pages(ours, 0, 60).first, (std::vector<std::int64_t>{16, 32}));
}

// The authors' adaptive bias: the entropy of softmax(importance) at temperature 1 over the page,
// averaged over the KV heads, one value for every head; ours: the entropy of π per KV head.
TEST(LukaAuthors, AdaptiveBiasFromTheImportanceEntropyMeanOverHeads) {
  const std::int64_t H = 4, KV = 2, D = 4, N = 12;
  at::manual_seed(5);
  const at::Tensor q = at::randn({H, N, D}) * 2, k = at::randn({KV, N, D}), v = at::randn({KV, N, D});
  for (const BiasEntropy be : {BiasEntropy::kImportanceMean, BiasEntropy::kWeights}) {
    LayerConfig c;
    c.clustered.page_size = 4;
    c.clustered.tail = 4;
    c.clustered.compressor = Compressor::kAttentionWeighted;
    c.clustered.tau = 3;
    c.clustered.bias = SummaryBias::kAdaptive;
    c.clustered.bias_entropy = be;
    LukaAttention att(0, c);
    c10::InferenceMode guard;
    att.forward(inputs(q, k, v, 0, N));
    ASSERT_EQ(att.pages().size(), 2u);
    const at::Tensor imp = att.importance().to(at::kDouble);
    for (std::int64_t p = 0; p < 2; ++p) {
      const auto entropy = [](const at::Tensor& w) { return -(w * w.log()).sum().item<double>(); };
      double mean = 0;
      for (std::int64_t g = 0; g < KV; ++g) mean += entropy(at::softmax(imp[g].narrow(0, 4 * p, 4), 0)) / KV;
      for (std::int64_t g = 0; g < KV; ++g) {
        const double expect = be == BiasEntropy::kImportanceMean ? mean : entropy(at::softmax(imp[g].narrow(0, 4 * p, 4) / 3.0, 0));
        EXPECT_NEAR(att.summary_bias()[g][p].item<double>(), expect, 1e-6) << to_string(be) << " page " << p << " head " << g;
      }
    }
  }
}

// Selection on the unbiased softmax: a page whose bias lifts it into the top 1 is not the one the
// authors refine. Two pages of 2 tokens, one head, exact refinement: the page with the higher
// q·k wins unbiased; a large bias on the other wins biased.
TEST(LukaAuthors, RefinementSelectsOnTheUnbiasedSoftmax) {
  c10::InferenceMode guard;
  // Page 0: keys aligned with q (logit high), page 1: keys opposite; tokens 4.. raw.
  const at::Tensor q = at::tensor({1.f, 0.f}).view({1, 1, 2}).repeat({1, 7, 1}).contiguous();
  const at::Tensor k = at::tensor({2.f, 0.f, 2.f, 0.f, -1.f, 0.f, -1.f, 0.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f}).view({1, 7, 2});
  const at::Tensor v = at::randn({1, 7, 2});
  for (const RefineOn on : {RefineOn::kUnbiased, RefineOn::kBiased}) {
    LayerConfig c;
    c.mode = AttentionMode::kClustered;
    c.clustered.page_size = 2;
    c.clustered.tail = 2;
    c.clustered.interval = 1000;
    c.clustered.top_k = 1;
    c.clustered.math = RefineMath::kExact;
    c.clustered.bias = SummaryBias::kFixed;  // log 2 on both pages...
    c.clustered.refine_on = on;
    LukaAttention att(0, c);
    att.forward(inputs(q, k, v, 0, 6));
    ASSERT_EQ(att.pages().size(), 2u);
    // ... and a hand-set bias that lifts page 1 above page 0 in the biased softmax.
    att.summary_bias()[0][1] = 10.0f;
    att.forward(inputs(q, k, v, 6, 1));
    const std::int64_t expect = on == RefineOn::kUnbiased ? 0 : 1;
    EXPECT_EQ(att.last_step().refined[0], (std::vector<std::int64_t>{expect})) << to_string(on);
  }
}

// top_p and top_frac ranked by the sum over heads (the authors'): with c the running sums of the
// sorted scores and S their total, count(c <= p·S) + 1 pages; top_frac takes ⌈frac·P⌉ exactly.
TEST(LukaAuthors, SumRankingOfTopPAndTopFrac) {
  ClusteredConfig c;
  c.page_rank = PageRank::kSum;
  c.rule = RefineRule::kTopP;
  const std::vector<float> score = {0.5f, 2.0f, 1.0f, 0.5f};  // sums over heads; S = 4
  c.top_p = 0.5;   // sorted 2, 1, .5, .5 -> c = 2, 3, 3.5, 4; c <= 2: one, +1 = two pages
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1, 2}));
  c.top_p = 0.49;  // none <= 1.96: one page
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1}));
  c.top_p = 0.875;  // c <= 3.5: three, +1 = four
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(select_pages(c, {0.f, 0.f}).empty());  // a zero total refines nothing
  // Ours on the same scores read as α: pages until the running α reaches p.
  c.page_rank = PageRank::kMax;
  c.top_p = 0.5;
  EXPECT_EQ(select_pages(c, score), (std::vector<std::int64_t>{1}));
  // top_frac: 0.28 · 25 is 7.000000000000001 in double, so math.ceil gives 8; ours 7.
  c.rule = RefineRule::kTopFrac;
  c.top_frac = 0.28;
  std::vector<float> pages(25);
  for (int i = 0; i < 25; ++i) pages[static_cast<std::size_t>(i)] = static_cast<float>(i);
  EXPECT_EQ(select_pages(c, pages).size(), 7u);
  c.page_rank = PageRank::kSum;
  EXPECT_EQ(select_pages(c, pages), (std::vector<std::int64_t>{17, 18, 19, 20, 21, 22, 23, 24}));
}

// Budget rounding: ours ⌈x·T⌉, the authors' max(1, ⌊x·T⌋), on a table of lengths.
TEST(LukaAuthors, LinedBudgetsRoundUpOrDown) {
  rules::LinedRule r;
  r.window_frac = 0.1;
  r.rho = 0.1;
  struct Row { std::int64_t T, ceil_w, ceil_h, floor_w, floor_h; };
  for (const Row& row : {Row{1, 1, 0, 1, 1}, Row{5, 1, 1, 1, 1}, Row{9, 1, 1, 1, 1}, Row{10, 1, 1, 1, 1}, Row{11, 2, 2, 1, 1},
                         Row{19, 2, 2, 1, 1}, Row{20, 2, 2, 2, 2}, Row{160, 16, 16, 16, 16}, Row{161, 17, 17, 16, 16}}) {
    r.rounding = BudgetRounding::kCeil;
    const rules::LinedCover c = rules::lined_cover(r, row.T);
    EXPECT_EQ(row.T - c.window_start, row.ceil_w) << "T " << row.T;
    EXPECT_EQ(c.heavy, row.ceil_h) << "T " << row.T;
    r.rounding = BudgetRounding::kFloor;
    const rules::LinedCover f = rules::lined_cover(r, row.T);
    EXPECT_EQ(row.T - f.window_start, row.floor_w) << "T " << row.T;
    EXPECT_EQ(f.heavy, row.floor_h) << "T " << row.T;
    // T = 1: the window is the whole context; the authors still pick one token (in the window).
    EXPECT_EQ(f.select_end, row.T > row.floor_w ? row.T - row.floor_w : row.T) << "T " << row.T;
  }
}

// Heavy hitters one step late: the set used at context T is the top max(1, ⌊ρ(T-1)⌋) of
// h2o_score (which holds every query up to the previous step) outside the window of T - 1; the
// window itself is the last max(1, ⌊w·T⌋) tokens. Checked against the layer's own scores.
TEST(LukaAuthors, HeavyHittersOneStepLate) {
  const std::int64_t H = 2, KV = 1, D = 8, N = 140, N0 = 100;
  at::manual_seed(9);
  const at::Tensor q = at::randn({H, N, D}) * 2, k = at::randn({KV, N, D}), v = at::randn({KV, N, D});
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.window_frac = 0.1;
  c.lined.rho = 0.1;
  c.lined.rounding = BudgetRounding::kFloor;
  c.lined.heavy_late = true;
  c.lined.selection = Selection::kPerLayer;
  LukaAttention att(0, c);
  c10::InferenceMode guard;
  att.forward(inputs(q, k, v, 0, N0));
  for (std::int64_t pos = N0; pos < N; ++pos) {
    const std::int64_t T = pos + 1, Tp = T - 1;
    const at::Tensor scores = att.h2o_score().sum(0).to(at::kDouble);  // before this step: through step T - 1
    att.forward(inputs(q, k, v, pos, 1));
    const std::int64_t w = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(0.1 * T)));
    const std::int64_t wp = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(0.1 * Tp)));
    const std::int64_t K = std::min(std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(0.1 * Tp))), Tp - wp);
    // Top K of the scores over [0, Tp - wp), ties to the lower position.
    std::vector<std::int64_t> order(static_cast<std::size_t>(Tp - wp));
    std::iota(order.begin(), order.end(), 0);
    const auto sc = scores.accessor<double, 1>();
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return sc[a] > sc[b]; });
    std::vector<std::int64_t> expect(order.begin(), order.begin() + K);
    std::sort(expect.begin(), expect.end());
    EXPECT_EQ(att.last_step().heavy[0], expect) << "T " << T;
    EXPECT_EQ(att.last_step().window_start, T - w) << "T " << T;
    // Exactly heavy ∪ window carries mass.
    const at::Tensor e = att.last_step().effective[0];
    EXPECT_EQ(e.gt(0).sum().item<std::int64_t>(), K + w) << "T " << T;
  }
}

// The fixed sparse prefill: queries in the last max(1, ⌊0.1 n⌋) positions attend causally within
// them; earlier queries get a uniform row over that window (the authors' all-masked rows).
TEST(LukaAuthors, FixedPrefillWindowByItsFormula) {
  const std::int64_t H = 2, KV = 1, D = 8, n = 57;
  at::manual_seed(10);
  const at::Tensor q = at::randn({H, n, D}), k = at::randn({KV, n, D}), v = at::randn({KV, n, D});
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.window_frac = 0.1;
  c.lined.rounding = BudgetRounding::kFloor;
  c.lined.sparse_prefill = true;
  c.lined.sparse_prefill_window = PrefillWindow::kFixed;
  LukaAttention att(0, c);
  c10::InferenceMode guard;
  const at::Tensor out = att.forward(inputs(q, k, v, 0, n)).view({n, H, D});
  const std::int64_t w = 5, start = n - w;
  at::Tensor h2o = at::zeros({H, n}, at::kDouble);
  double worst = 0;
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t i = 0; i < n; ++i) {
      at::Tensor row = at::zeros({n}, at::kDouble);
      if (i >= start) {
        row.narrow(0, start, i - start + 1)
            .copy_(at::softmax(at::matmul(k[0].narrow(0, start, i - start + 1).to(at::kDouble), q[h][i].to(at::kDouble)) /
                                   std::sqrt(double(D)), 0));
      } else {
        row.narrow(0, start, w).fill_(1.0 / w);
      }
      h2o[h].add_(row);
      worst = std::max(worst, max_diff(out[i][h], at::matmul(row, v[0].to(at::kDouble))));
    }
  EXPECT_LE(worst, 1e-5);
  EXPECT_LE(max_diff(att.h2o_score(), h2o), 1e-4);
}

// The preset names every authors' setting (what `luka info --preset authors_eval --config` prints).
TEST(LukaAuthors, AuthorsEvalPresetCarriesTheirSettings) {
  const LukaConfig c = LukaConfig::preset("authors_eval", 28);
  const nlohmann::json j = nlohmann::json::parse(c.to_json())["layers"];
  for (const std::string layer : {"0", "10", "27"}) {
    const auto& l = j[layer];
    EXPECT_EQ(l["tail"], 129);
    EXPECT_EQ(l["page_size"], 8);
    EXPECT_EQ(l["importance_source"], "cover");
    EXPECT_EQ(l["tau"], 7.0);
    EXPECT_EQ(l["page_schedule"], "authors");
    EXPECT_EQ(l["page_bypass"], true);
    EXPECT_EQ(l["max_pages"], 256);
    EXPECT_EQ(l["interval"], 1);
    EXPECT_EQ(l["bias"], "adaptive");
    EXPECT_EQ(l["bias_entropy"], "importance_mean");
    EXPECT_EQ(l["refine_on"], "unbiased");
    EXPECT_EQ(l["page_rank"], "sum");
    EXPECT_EQ(l["refine_math"], "exact");
    EXPECT_EQ(l["refine_selection"], "layer");
    EXPECT_EQ(l["lined_rounding"], "floor");
    EXPECT_EQ(l["heavy_late"], true);
    EXPECT_EQ(l["sparse_prefill"], true);
    EXPECT_EQ(l["sparse_prefill_window"], "fixed");
    EXPECT_EQ(l["lined_selection"], "layer");
  }
  EXPECT_EQ(j["5"]["mode"], "lined");
  EXPECT_EQ(j["6"]["mode"], "clustered");
  EXPECT_EQ(j["22"]["mode"], "clustered");
  EXPECT_EQ(j["23"]["mode"], "lined");
  // The paper preset keeps ours (tau 1 now means what the authors' default tau 1 means).
  const auto p = nlohmann::json::parse(LukaConfig::preset("paper", 28).to_json())["layers"]["10"];
  EXPECT_EQ(p["tau"], 1.0);
  EXPECT_EQ(p["importance_source"], "effective");
  EXPECT_EQ(p["tail"], 128);
  EXPECT_EQ(p["page_schedule"], "interval");
}

// ===== whole layers against the NumPy port of the authors' controller ========================

at::Tensor load(const fs::path& p) {
  const NpyArray a = read_npy_f32(p);
  return at::from_blob(const_cast<float*>(a.data.data()), a.shape, at::kFloat).clone();
}

class AuthorsReference : public ::testing::TestWithParam<const char*> {};

TEST_P(AuthorsReference, LayerEqualsTheirsStepForStep) {
  const std::string name = GetParam();
  std::string why;
  const fs::path script = fs::path(LUKA_SOURCE_DIR) / "tests/fixtures/authors_reference.py";
  const fs::path dir = luka::test::python_reference(script, {name}, fs::path(LUKA_TEST_WORK) / "authors" / name, why);
  if (dir.empty()) GTEST_SKIP() << why;
  const nlohmann::json cs = nlohmann::json::parse(std::ifstream(dir / "case.json"));
  const at::Tensor q = load(dir / "q.npy"), k = load(dir / "k.npy"), v = load(dir / "v.npy");
  const at::Tensor ref = load(dir / "out.npy"), ref_pages = load(dir / "pages.npy"), ref_imp = load(dir / "importance.npy");
  const std::int64_t N0 = cs["prefill"], N = cs["tokens"], H = cs["heads"], D = cs["head_dim"];

  // The authors_eval preset's layer (6: clustered, 0: lined), scaled as the reference is.
  LukaConfig preset = LukaConfig::preset("authors_eval", 12);
  const bool lined = cs["kind"] == "lined";
  const std::int64_t layer = lined ? 0 : 6;
  if (!lined) {
    preset.apply_override("layers=6,tail=" + std::to_string(cs["tail_len"].get<int>() + 1) +
                          ",max_pages=" + std::to_string(cs["max_pages"].get<int>()) +
                          ",interval=" + std::to_string(cs["interval"].get<int>()) +
                          ",page_bypass=" + (cs["bypass"].get<bool>() ? "true" : "false") + ",rule=" + cs["rule"].get<std::string>() +
                          ",top_p=" + std::to_string(cs["top_p"].get<double>()));
  }
  const LayerConfig& c = preset.layers[static_cast<std::size_t>(layer)];
  ASSERT_EQ(c.mode, lined ? AttentionMode::kLined : AttentionMode::kClustered);
  LukaAttention att(static_cast<int>(layer), c);
  c10::InferenceMode guard;
  att.forward(inputs(q, k, v, 0, N0));
  EXPECT_EQ(static_cast<std::int64_t>(att.pages().size()), ref_pages[0].item<std::int64_t>()) << "after the prefill";
  double worst = 0;
  for (std::int64_t pos = N0; pos < N; ++pos) {
    const std::int64_t s = pos - N0;
    const at::Tensor out = att.forward(inputs(q, k, v, pos, 1)).view({H, D});
    worst = std::max(worst, max_diff(out, ref[s]));
    if (!lined)
      ASSERT_EQ(static_cast<std::int64_t>(att.pages().size()), ref_pages[s + 1].item<std::int64_t>()) << "after step " << s + 1;
  }
  EXPECT_LE(worst, 2e-5);
  // Importance sums hundreds of rows: relative 1e-5.
  EXPECT_LE(max_diff(att.importance(), ref_imp), 1e-5 * ref_imp.abs().max().item<double>() + 1e-6);
  if (!lined) EXPECT_GT(ref_pages[N - N0].item<float>(), ref_pages[0].item<float>());  // pages made while decoding
}

INSTANTIATE_TEST_SUITE_P(Cases, AuthorsReference, ::testing::Values("clustered", "clustered_gate", "clustered_topp", "lined"));

}  // namespace
}  // namespace luka
