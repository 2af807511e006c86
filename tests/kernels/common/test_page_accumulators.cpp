// The page-level accumulators (kernels/common/page_accumulators.h) against the per-token
// definition core/luka's LukaAttention::accumulate implements (h2o ← γ·h2o + e, importance ← +
// the group mean of e, over every token every step), restated here on float rows. Streams of
// decode steps in every mode — dense, lined and kascade covers, clustered under mass-preserving and
// exact refinement with importance_source effective and cover — with pages made as the context
// grows (contiguous, non-contiguous and raw), γ = 1 and γ ≠ 1: after every step each token's
// expanded importance and h2o_score agree with the per-token values to a relative 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/page_accumulators.h"

namespace {

enum class Mode { kDense, kLined, kKascade, kMass, kExact, kCover };

struct Page {
  std::vector<std::int64_t> members;
  bool raw = false;
};

void softmax(std::vector<double>& x) {
  double mx = -1e300, z = 0;
  for (double v : x) mx = std::max(mx, v);
  for (double& v : x) z += v = std::exp(v - mx);
  for (double& v : x) v /= z;
}

struct Sim {
  static constexpr std::int64_t H = 4, KV = 2, G = 2, L = 4, tail = 8, cap = 320;
  float decay;
  std::mt19937 rng;
  std::normal_distribution<double> n01{0.0, 1.0};
  std::int64_t T = 40, paged_end = 0;
  std::vector<Page> pages;
  std::vector<std::int64_t> page_of = std::vector<std::int64_t>(cap, -1);
  std::vector<float> spread = std::vector<float>(KV * cap, 0.0f);
  std::vector<float> ref_h2o = std::vector<float>(H * cap, 0.0f), ref_imp = std::vector<float>(KV * cap, 0.0f);
  std::vector<float> ph2o = std::vector<float>(H * cap, 0.0f), pimp = std::vector<float>(KV * cap, 0.0f);
  std::vector<float> th2o = std::vector<float>(H * cap, 0.0f), timp = std::vector<float>(KV * cap, 0.0f);
  luka::accum::PageAccumulators acc;
  double worst = 0;

  Sim(float d, std::uint32_t seed) : decay(d), rng(seed) {
    acc.heads = H;
    acc.kv_heads = KV;
    acc.token_cap = cap;
    acc.page_cap = cap;
    acc.decay = d;
    acc.page_h2o = ph2o.data();
    acc.page_imp = pimp.data();
    acc.token_h2o = th2o.data();
    acc.token_imp = timp.data();
  }

  // Pages for every L tokens that fit before the tail: contiguous ones, a pair interleaved (as a
  // gsc cluster may be) and one page of raw singletons in turn; π by a softmax per KV head.
  void make_pages() {
    while (T - tail - paged_end >= L) {
      const std::int64_t b = paged_end, kind = static_cast<std::int64_t>(pages.size()) % 5;
      std::vector<Page> made;
      if (kind == 3) {
        made.push_back({{b, b + 2}, false});
        made.push_back({{b + 1, b + 3}, false});
      } else if (kind == 4) {
        for (std::int64_t i = 0; i < L; ++i) made.push_back({{b + i}, true});
      } else {
        made.push_back({{b, b + 1, b + 2, b + 3}, false});
      }
      for (Page& pg : made) {
        const std::int64_t p = static_cast<std::int64_t>(pages.size());
        for (std::int64_t g = 0; g < KV; ++g) {
          std::vector<double> w(pg.members.size());
          for (double& x : w) x = n01(rng);
          softmax(w);
          for (std::size_t i = 0; i < w.size(); ++i) spread[g * cap + pg.members[i]] = static_cast<float>(w[i]);
        }
        for (std::int64_t t : pg.members) page_of[t] = p;
        luka::accum::new_page(acc, p);
        pages.push_back(pg);
      }
      paged_end = b + L;
    }
  }

  void step(Mode mode) {
    ++T;
    luka::accum::begin_step(acc, T);
    std::vector<float> eff(H * T, 0.0f);              // the effective rows (per-token form)
    std::vector<std::uint8_t> token_level(H * T, 0);  // which entries the page-level form adds per token
    const std::int64_t P = static_cast<std::int64_t>(pages.size());
    std::vector<float> c(H * std::max<std::int64_t>(P, 1), 0.0f);  // page weights
    if (mode == Mode::kDense || mode == Mode::kLined || mode == Mode::kKascade) {
      for (std::int64_t h = 0; h < H; ++h) {
        std::vector<std::int64_t> cover;
        for (std::int64_t t = 0; t < T; ++t)
          if (mode == Mode::kDense || t >= T - 6 || rng() % (mode == Mode::kLined ? 4 : 3) == 0) cover.push_back(t);
        std::vector<double> l(cover.size());
        for (double& x : l) x = 2 * n01(rng);
        softmax(l);
        for (std::size_t i = 0; i < cover.size(); ++i) {
          eff[h * T + cover[i]] = static_cast<float>(l[i]);
          token_level[h * T + cover[i]] = 1;
        }
      }
    } else {
      for (std::int64_t h = 0; h < H; ++h) clustered_head(mode, h, P, eff, token_level, c);
    }
    // Per-token definition (accumulate's order: γ·h2o then + e; the group's rows summed in head
    // order, divided by G).
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < T; ++t)
        ref_h2o[h * cap + t] = (decay == 1.0f ? ref_h2o[h * cap + t] : ref_h2o[h * cap + t] * decay) + eff[h * T + t];
    for (std::int64_t g = 0; g < KV; ++g)
      for (std::int64_t t = 0; t < T; ++t) {
        float s = 0.0f;
        for (std::int64_t j = 0; j < G; ++j) s += eff[(g * G + j) * T + t];
        ref_imp[g * cap + t] += s / static_cast<float>(G);
      }
    // Page-level form: the pages' weights once, the token-level entries one by one.
    if (mode == Mode::kMass || mode == Mode::kExact || mode == Mode::kCover)
      luka::accum::add_pages(acc, c.data(), P, P);
    for (std::int64_t g = 0; g < KV; ++g)
      for (std::int64_t t = 0; t < T; ++t) {
        float s = 0.0f;
        bool any = false;
        for (std::int64_t j = 0; j < G; ++j) {
          const std::int64_t h = g * G + j;
          if (!token_level[h * T + t]) continue;
          luka::accum::add_token_h2o(acc, h, t, eff[h * T + t]);
          s += eff[h * T + t];
          any = true;
        }
        if (any) luka::accum::add_token_imp(acc, g, t, s);
      }
    check();
  }

  // One head of a clustered step: logits for the pages, the raw tail and the children of two
  // refined (non-raw) pages; weights under the mode's math; unrefined pages at page level.
  void clustered_head(Mode mode, std::int64_t h, std::int64_t P, std::vector<float>& eff, std::vector<std::uint8_t>& tl,
                      std::vector<float>& c) {
    const std::int64_t g = h / G, R = T - paged_end;
    std::vector<double> lp(P), lt(R);
    for (double& x : lp) x = 2 * n01(rng);
    for (double& x : lt) x = 2 * n01(rng);
    std::vector<std::uint8_t> refined(P, 0);
    for (int k = 0; k < 2 && P > 0; ++k) {
      const std::int64_t p = rng() % P;
      if (!pages[p].raw) refined[p] = 1;
    }
    std::vector<double> alpha(lp);
    alpha.insert(alpha.end(), lt.begin(), lt.end());
    softmax(alpha);
    const auto set_token = [&](std::int64_t t, double x) {
      eff[h * T + t] = static_cast<float>(x);
      tl[h * T + t] = 1;
    };
    const auto set_page = [&](std::int64_t p, double w) {
      c[h * P + p] = static_cast<float>(w);
      for (std::int64_t t : pages[p].members) eff[h * T + t] = c[h * P + p] * spread[g * cap + t];
    };
    if (mode == Mode::kCover) {  // α at raw slots only: the raw tail and raw pages
      for (std::int64_t p = 0; p < P; ++p) set_page(p, pages[p].raw ? alpha[p] : 0.0);
      for (std::int64_t i = 0; i < R; ++i) set_token(paged_end + i, alpha[P + i]);
      return;
    }
    std::vector<std::vector<double>> child(P);
    for (std::int64_t p = 0; p < P; ++p)
      if (refined[p])
        for (std::size_t i = 0; i < pages[p].members.size(); ++i) child[p].push_back(2 * n01(rng));
    if (mode == Mode::kMass) {
      for (std::int64_t p = 0; p < P; ++p) {
        if (!refined[p]) {
          set_page(p, alpha[p]);
          continue;
        }
        std::vector<double> local(child[p]);
        softmax(local);
        for (std::size_t i = 0; i < local.size(); ++i) set_token(pages[p].members[i], alpha[p] * local[i]);
      }
      for (std::int64_t i = 0; i < R; ++i) set_token(paged_end + i, alpha[P + i]);
      return;
    }
    std::vector<double> all;  // exact: one softmax over unrefined summaries, children, the tail
    for (std::int64_t p = 0; p < P; ++p)
      if (refined[p]) {
        all.insert(all.end(), child[p].begin(), child[p].end());
      } else {
        all.push_back(lp[p]);
      }
    all.insert(all.end(), lt.begin(), lt.end());
    softmax(all);
    std::size_t k = 0;
    for (std::int64_t p = 0; p < P; ++p)
      if (refined[p]) {
        for (std::int64_t t : pages[p].members) set_token(t, all[k++]);
      } else {
        c[h * P + p] = 0.0f;
        set_page(p, all[k++]);
      }
    for (std::int64_t i = 0; i < R; ++i) set_token(paged_end + i, all[k++]);
  }

  static double rel(float a, float b) {
    const double d = std::fabs(static_cast<double>(a) - b),
                 m = std::max({std::fabs(static_cast<double>(a)), std::fabs(static_cast<double>(b)), 1e-30});
    return d / m;
  }

  void check() {
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t p = t < paged_end ? page_of[t] : -1;
      for (std::int64_t h = 0; h < H; ++h) {
        const float s = p < 0 ? 0.0f : spread[(h / G) * cap + t];
        const double e = rel(luka::accum::h2o(acc, h, t, p, s), ref_h2o[h * cap + t]);
        worst = std::max(worst, e);
        ASSERT_LE(e, 1e-6) << "h2o h " << h << " t " << t << " step " << acc.step;
      }
      for (std::int64_t g = 0; g < KV; ++g) {
        const float s = p < 0 ? 0.0f : spread[g * cap + t];
        const double e = rel(luka::accum::importance(acc, g, t, p, s), ref_imp[g * cap + t]);
        worst = std::max(worst, e);
        ASSERT_LE(e, 1e-6) << "importance g " << g << " t " << t << " step " << acc.step;
      }
    }
  }
};

void run_modes(float decay, std::uint32_t seed) {
  Sim sim(decay, seed);
  sim.step(Mode::kDense);  // the prompt's scores, every token
  const Mode cycle[] = {Mode::kMass,    Mode::kExact, Mode::kCover, Mode::kLined, Mode::kMass,
                        Mode::kKascade, Mode::kExact, Mode::kDense, Mode::kMass};
  // 120 steps: both forms round every step (core's per-token γ·h2o once per step, the page form γ^k
  // once per read), so they drift apart as √steps·ε; 1e-6 holds with margin over this length.
  for (int s = 0; s < 120 && !::testing::Test::HasFatalFailure(); ++s) {
    if (s % 4 == 0) sim.make_pages();
    sim.step(cycle[(s / 3) % 9]);  // runs of three steps in one mode
  }
  EXPECT_GT(sim.pages.size(), 20u);
  std::printf("decay %.3f: %zu pages, worst relative difference %.3g\n", decay, sim.pages.size(), sim.worst);
}

TEST(PageAccumulators, MatchPerTokenAccumulatorsWithoutDecay) { run_modes(1.0f, 1); }
TEST(PageAccumulators, MatchPerTokenAccumulatorsWithDecay) {
  run_modes(0.99f, 2);
  run_modes(0.9f, 3);
}

// γ = 1 and no pages: the same float additions as the per-token form, so equal bit for bit.
TEST(PageAccumulators, WithoutPagesOrDecayEqualPerTokenExactly) {
  Sim sim(1.0f, 4);
  for (int s = 0; s < 30; ++s) sim.step(s % 2 ? Mode::kLined : Mode::kDense);
  for (std::int64_t h = 0; h < Sim::H; ++h)
    for (std::int64_t t = 0; t < sim.T; ++t)
      EXPECT_EQ(luka::accum::h2o(sim.acc, h, t, -1, 0.0f), sim.ref_h2o[h * Sim::cap + t]);
  for (std::int64_t g = 0; g < Sim::KV; ++g)
    for (std::int64_t t = 0; t < sim.T; ++t)
      EXPECT_EQ(luka::accum::importance(sim.acc, g, t, -1, 0.0f), sim.ref_imp[g * Sim::cap + t]);
}

}  // namespace
