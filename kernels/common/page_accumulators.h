// importance and h2o_score kept per page and per token (docs/kernels-v2.md, docs/design.md §5.1): the
// algebra that lets a clustered step update one value per page and head instead of rewriting the
// per-token accumulators over the whole context, and a lined step touch its cover only.
//
// The per-token definition (core/luka's LukaAttention::accumulate), at decode step n with the
// effective row e_n[h, t]:
//   h2o[h, t] ← γ·h2o[h, t] + e_n[h, t]          importance[g, t] ← importance[g, t] + mean_j e_n[gG+j, t]
// A clustered step gives every token t of an unrefined page p the weight c_n[h, p]·π[g, t]
// (π: the page's spread, fixed when the page is made). So, with A[h, p] = Σ_n γ^(N−n) c_n[h, p]
// and I[g, p] = Σ_n mean_j c_n[gG+j, p] over the steps that weighed the page as a whole,
//   h2o[h, t] = A[h, p(t)]·π[g, t] + r[h, t]      importance[g, t] = I[g, p(t)]·π[g, t] + q[g, t]
// where r and q take every other contribution token by token: the raw tail, refined children,
// raw pages seen by importance_source=cover, lined covers, dense rows, and everything a token got
// before its page was made. Only what a step touches is written:
//  - pages: every page of a clustered step (A decayed lazily: one stamp for all pages, since a
//    clustered step touches all of them and no other step touches any);
//  - tokens: r is stored scaled, true r = stored·γ^(n − base), so a step adds x·γ^(base − n) to
//    the tokens it touches and leaves the rest; every kRebase steps the scale is folded in.
// The expansion to per token (page compression, captures) is the formula above.
//
// Summation order: with γ = 1 and no pages the per-token values are the same float operations as
// core's (bit-equal); otherwise the products are grouped differently (c·π summed over steps
// versus Σc then ·π, γ^k as one power) and agree to a relative 1e-6 (tests/kernels/common).
// Plain C++ on caller-owned arrays, host and device.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LUKA_ACC_HD __host__ __device__
#else
#define LUKA_ACC_HD
#endif

namespace luka::accum {

constexpr std::int64_t kRebase = 32;  // γ ≥ 0.1 keeps γ^-32 ≤ 1e32, inside fp32

struct PageAccumulators {
  std::int64_t heads = 0, kv_heads = 0, token_cap = 0, page_cap = 0;
  float decay = 1.0f;
  float* page_h2o = nullptr;   // [heads][page_cap], true value = stored·γ^(step − page_stamp)
  float* page_imp = nullptr;   // [kv_heads][page_cap]
  float* token_h2o = nullptr;  // [heads][token_cap], true value = stored·γ^(step − base)
  float* token_imp = nullptr;  // [kv_heads][token_cap]
  std::int64_t step = 0, base = 0, page_stamp = 0;
  float add_scale = 1.0f;  // γ^(base − step): what a contribution at this step is multiplied by

  std::int64_t group() const { return heads / kv_heads; }
};

LUKA_ACC_HD inline float power(float g, std::int64_t k) {
  return g == 1.0f ? 1.0f : static_cast<float>(std::pow(static_cast<double>(g), static_cast<double>(k)));
}

// Folds the scale into the stored token values over [0, tokens) (every kRebase steps; a kernel
// does the same with one thread per element).
LUKA_ACC_HD inline void rebase(PageAccumulators& a, std::int64_t tokens) {
  const float f = power(a.decay, a.step - a.base);
  for (std::int64_t h = 0; h < a.heads; ++h)
    for (std::int64_t t = 0; t < tokens; ++t) a.token_h2o[h * a.token_cap + t] *= f;
  a.base = a.step;
  a.add_scale = 1.0f;
}

// A decode step begins (before any add). `tokens`: the context, for a rebase.
LUKA_ACC_HD inline void begin_step(PageAccumulators& a, std::int64_t tokens) {
  ++a.step;
  if (a.decay != 1.0f && a.step - a.base >= kRebase) {
    --a.step;  // fold the scale of the last step, then this step adds at scale 1
    rebase(a, tokens);
    ++a.step;
  }
  a.add_scale = a.decay == 1.0f ? 1.0f : power(a.decay, a.base - a.step);
}

// Token t's attention x from head h this step (h2o only; importance takes its group mean below).
LUKA_ACC_HD inline void add_token_h2o(PageAccumulators& a, std::int64_t h, std::int64_t t, float x) {
  a.token_h2o[h * a.token_cap + t] += a.decay == 1.0f ? x : x * a.add_scale;
}
// Token t's importance: `sum` is its group's heads' attention summed in head order.
LUKA_ACC_HD inline void add_token_imp(PageAccumulators& a, std::int64_t g, std::int64_t t, float sum) {
  a.token_imp[g * a.token_cap + t] += sum / static_cast<float>(a.group());
}

// A clustered step's page weights: c[h·stride + p] for pages [0, pages) (0 for a refined page,
// whose tokens are added one by one). Every page decays to this step first.
LUKA_ACC_HD inline void add_pages(PageAccumulators& a, const float* c, std::int64_t stride, std::int64_t pages) {
  const float f = power(a.decay, a.step - a.page_stamp);
  const std::int64_t G = a.group();
  for (std::int64_t g = 0; g < a.kv_heads; ++g)
    for (std::int64_t p = 0; p < pages; ++p) {
      float sum = 0.0f;
      for (std::int64_t j = 0; j < G; ++j) {
        const std::int64_t h = g * G + j;
        float& A = a.page_h2o[h * a.page_cap + p];
        A = (f == 1.0f ? A : A * f) + c[h * stride + p];
        sum += c[h * stride + p];
      }
      a.page_imp[g * a.page_cap + p] += sum / static_cast<float>(G);
    }
  a.page_stamp = a.step;
}

// A page is made: its accumulators start at zero (its tokens keep what they had in r and q).
LUKA_ACC_HD inline void new_page(PageAccumulators& a, std::int64_t p) {
  for (std::int64_t h = 0; h < a.heads; ++h) a.page_h2o[h * a.page_cap + p] = 0.0f;
  for (std::int64_t g = 0; g < a.kv_heads; ++g) a.page_imp[g * a.page_cap + p] = 0.0f;
}

// The per-token values. `page` is t's page (−1 for a raw tail token) and `spread` its π[g, t].
LUKA_ACC_HD inline float h2o(const PageAccumulators& a, std::int64_t h, std::int64_t t, std::int64_t page,
                             float spread) {
  float r = a.token_h2o[h * a.token_cap + t];
  if (a.decay != 1.0f) r *= power(a.decay, a.step - a.base);
  if (page < 0) return r;
  float A = a.page_h2o[h * a.page_cap + page];
  if (a.decay != 1.0f) A *= power(a.decay, a.step - a.page_stamp);
  return A * spread + r;
}
LUKA_ACC_HD inline float importance(const PageAccumulators& a, std::int64_t g, std::int64_t t, std::int64_t page,
                                    float spread) {
  const float q = a.token_imp[g * a.token_cap + t];
  return page < 0 ? q : a.page_imp[g * a.page_cap + page] * spread + q;
}

}  // namespace luka::accum
