// The LuKA rules that decide *which* tokens a step attends to, defined once for the CPU core
// (core/luka) and the CUDA dispatch (kernels/cuda): the lined window and heavy-hitter budget, when
// pages are made and how many, and how many pages a fractional refinement rule picks. Plain C++
// with no dependencies; the functions are host and device so a kernel may call them too.
//
// Each rule has our variant (docs/design.md §5.3–5.4) and, where the LuKA authors' code differs, theirs
// (docs/design.md §5.6, docs/luka-config.md says what each reproduces).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/luka_params.h"

#if defined(__CUDACC__)
#define LUKA_HD __host__ __device__
#else
#define LUKA_HD
#endif

namespace luka::rules {

LUKA_HD inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
LUKA_HD inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// ===== lined (H2O) ============================================================================

// Budgets are fractions of the context T: ours rounds up (⌈x·T⌉, BudgetRounding::kCeil), the
// authors' code down with a floor of one (max(1, ⌊x·T⌋), Python's int() of the product).
struct LinedRule {
  std::int64_t window = 128;  // recent tokens, when window_frac is 0
  double window_frac = 0;     // > 0: the window is this fraction of T
  double rho = 0.125;         // heavy hitters, as a fraction of T
  BudgetRounding rounding = BudgetRounding::kCeil;
  bool heavy_late = false;    // the authors': heavy hitters chosen at the end of the previous step
};

// The recent window's size at context T (at most T).
LUKA_HD inline std::int64_t lined_window(const LinedRule& r, std::int64_t T) {
  std::int64_t w = r.window;
  if (r.window_frac > 0)
    w = r.rounding == BudgetRounding::kCeil ? static_cast<std::int64_t>(ceil(r.window_frac * static_cast<double>(T)))
                                      : max64(1, static_cast<std::int64_t>(floor(r.window_frac * static_cast<double>(T))));
  return min64(T, w);
}

// One lined step's cover: the recent window [window_start, T) and `heavy` heavy hitters chosen
// among [0, select_end) by h2o_score (ties to the lower position).
struct LinedCover {
  std::int64_t window_start = 0;
  std::int64_t select_end = 0;
  std::int64_t heavy = 0;
};

// Heavy hitters for a selection made at context T: ours takes ⌈ρ·T⌉ from outside the window; the
// authors' code takes max(1, ⌊ρ·T⌋), capped by what lies outside the window, and from the whole
// context when the window is all of it (T = 1: the pick then lies in the window).
LUKA_HD inline void lined_selection(const LinedRule& r, std::int64_t T, std::int64_t* select_end, std::int64_t* heavy) {
  const std::int64_t W = lined_window(r, T);
  if (r.rounding == BudgetRounding::kCeil) {
    *select_end = T - W;
    *heavy = min64(T - W, static_cast<std::int64_t>(ceil(r.rho * static_cast<double>(T) - 1e-9)));
    return;
  }
  const std::int64_t budget = max64(1, static_cast<std::int64_t>(floor(r.rho * static_cast<double>(T))));
  *select_end = T > W ? T - W : T;
  *heavy = max64(1, min64(T > W ? min64(budget, T - W) : budget, T));
}

// The cover of a decode step at context T (the new token included). With heavy_late the heavy
// hitters are the ones the authors' code picks after the previous step, at context T - 1: its
// budget and its excluded window, so a token can sit in neither set for one step.
LUKA_HD inline LinedCover lined_cover(const LinedRule& r, std::int64_t T) {
  LinedCover c;
  c.window_start = T - lined_window(r, T);
  const std::int64_t at = r.heavy_late ? T - 1 : T;
  if (at >= 1) lined_selection(r, at, &c.select_end, &c.heavy);
  return c;
}

// The fixed prefill window of the authors' sparse prefill: the last max(1, ⌊window_frac·n⌋) (or
// `window`) of the n tokens in the cache, with the budget rounding of the rule.
LUKA_HD inline std::int64_t fixed_prefill_window(const LinedRule& r, std::int64_t n) { return lined_window(r, n); }

// ===== clustered: when pages are made ==========================================================

struct PageRule {
  std::int64_t page_size = 16;
  std::int64_t tail = 128;      // raw positions never paged (ours); the authors' tail_len is tail - 1
  std::int64_t interval = 16;   // decode steps between page creations
  std::int64_t max_pages = 0;   // pages made at one time at most (0: no limit)
  bool authors = false;         // the authors' controller gate instead of every `interval` steps
  bool bypass = false;          // authors: a cover of 2·(tail_len + page_size) entries skips the gates
};

// The authors' controller counters: forwards seen (the prefill included) and forwards since the
// last page was made. `calls` starts where the caller says (their reset() primes it to interval-1).
struct PageClock {
  std::int64_t calls = 0;
  std::int64_t since = 0;
};

// How many full pages fit in the raw tokens [paged_end, T) leaving the tail raw (ours), capped by
// max_pages.
LUKA_HD inline std::int64_t pages_that_fit(const PageRule& r, std::int64_t paged_end, std::int64_t T) {
  const std::int64_t room = T - r.tail - paged_end;
  if (r.page_size < 1 || room < r.page_size) return 0;
  const std::int64_t n = room / r.page_size;
  return r.max_pages > 0 ? min64(n, r.max_pages) : n;
}

// Pages to make after a forward over context T, with `pages` pages covering [0, paged_end).
// `decode_step` is the decode step just run (1 for the first), 0 after a prefill.
//
// Ours: after a prefill every page that fits, then every `interval` decode steps.
// The authors' controller (their try_new_pages): every forward counts; with tail_len t = tail - 1
// and cover = pages + raw tokens, nothing below a cover of t + P; unless the cover reaches
// 2(t + P) with `bypass`, only on a forward whose count is a multiple of `interval` (when it is
// above 1) and at least P forwards after the last pages; then, when the raw tokens R exceed
// t + P, ⌊(R - t)/P⌋ pages (capped by max_pages).
LUKA_HD inline std::int64_t pages_due(const PageRule& r, PageClock* clock, std::int64_t pages, std::int64_t paged_end,
                                      std::int64_t T, std::int64_t decode_step) {
  if (!r.authors) {
    if (decode_step > 0 && (r.interval < 1 || decode_step % r.interval != 0)) return 0;
    return pages_that_fit(r, paged_end, T);
  }
  ++clock->calls;
  ++clock->since;
  const std::int64_t t = r.tail - 1, P = r.page_size, raw = T - paged_end, cover = pages + raw, need = t + P;
  if (P < 1 || t < 0 || cover < need) return 0;
  const bool substantial = r.bypass && cover >= 2 * need;
  if (r.interval > 1 && !substantial && clock->calls % r.interval != 0) return 0;
  if (!substantial && clock->since < P) return 0;
  if (raw <= need) return 0;
  std::int64_t n = (raw - t) / P;
  if (r.max_pages > 0) n = min64(n, r.max_pages);
  if (n > 0) clock->since = 0;
  return n;
}

// ===== clustered: refinement counts ============================================================

// Pages the top_frac rule refines out of P: ours ⌈frac·P⌉ with a tolerance for products that land
// a rounding error above an integer; the authors' code Python's math.ceil of the product.
LUKA_HD inline std::int64_t top_frac_count(double frac, std::int64_t P, bool exact_ceil) {
  const double x = frac * static_cast<double>(P);
  return min64(P, static_cast<std::int64_t>(ceil(exact_ceil ? x : x - 1e-9)));
}

// ===== per-element math: page compression and the accumulators ================================
// One definition for the CPU core (core/luka) and the CUDA kernels (kernels/cuda/luka/*.cu),
// so the compressor's seed constants, the bias's floor and the accumulators' rounding live once.

// SplitMix64's finalizer: the hash behind the random compressor's pick.
LUKA_HD inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The random compressor's pick: which of a page's L tokens (from position `start`) stands for it in
// KV head g of `layer` under `seed` — a function of those alone, so every run and executor agrees.
LUKA_HD inline int seeded_pick(std::uint64_t seed, std::int64_t layer, std::int64_t start, std::int64_t g, int L) {
  const std::uint64_t r = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(layer) * 1000003ull +
                                                        static_cast<std::uint64_t>(start) * 7919ull +
                                                        static_cast<std::uint64_t>(g)));
  return static_cast<int>(r % static_cast<std::uint64_t>(L));
}

// The compressor's weights π over a page's L tokens, into w (int counts: a page is far below 2^31
// tokens, and 32-bit indices keep the kernels' registers): softmax(importance / τ) for the
// attention-weighted compressor (`importance`: the page's L scores), one-hot at `pick` (seeded_pick)
// for the random one, else the mean (the mean compressor and GSC's merge).
LUKA_HD inline void compressor_weights(Compressor c, const float* importance, int L, float tau, int pick, float* w) {
  if (c == Compressor::kAttentionWeighted) {
    float mx = importance[0] / tau;
    for (int i = 1; i < L; ++i) mx = fmaxf(mx, importance[i] / tau);
    float z = 0.f;
    for (int i = 0; i < L; ++i) {
      w[i] = expf(importance[i] / tau - mx);
      z += w[i];
    }
    for (int i = 0; i < L; ++i) w[i] /= z;
  } else if (c == Compressor::kRandom) {
    for (int i = 0; i < L; ++i) w[i] = i == pick ? 1.f : 0.f;
  } else {
    const float uniform = 1.0f / static_cast<float>(L);
    for (int i = 0; i < L; ++i) w[i] = uniform;
  }
}

// How an unrefined page's mass spreads over token i: by π for the attention-weighted compressor,
// else uniformly.
LUKA_HD inline float spread_weight(Compressor c, const float* w, int i, int L) {
  return c == Compressor::kAttentionWeighted ? w[i] : 1.0f / static_cast<float>(L);
}

// The summary's bias from π (docs/design.md §5.4): fixed log L; adaptive log k_eff, the entropy of π
// (weights below 1e-30 count as 1e-30); none 0. (The authors' importance-mean entropy reads the whole
// page's importance across KV heads: the CPU core computes it.)
LUKA_HD inline float summary_bias(SummaryBias b, const float* w, int L) {
  if (b == SummaryBias::kFixed) return static_cast<float>(log(static_cast<double>(L)));
  float entropy = 0.f;
  if (b == SummaryBias::kAdaptive)
    for (int i = 0; i < L; ++i) entropy -= w[i] * logf(fmaxf(w[i], 1e-30f));
  return entropy;
}

// h2o_score's update by one query's weight w of a token: decayed, then added — a separate multiply
// and add (never a fused multiply-add), so both executors round alike.
LUKA_HD inline float h2o_update(float score, float w, float decay) {
#if defined(__CUDA_ARCH__)
  return decay == 1.f ? __fadd_rn(score, w) : __fadd_rn(__fmul_rn(score, decay), w);
#else
  if (decay == 1.f) return score + w;
  const volatile float decayed = score * decay;  // no contraction into an FMA on hosts that have one
  return decayed + w;
#endif
}

// importance's update by a KV group's summed weight of a token: the mean over its `group` heads.
LUKA_HD inline float importance_update(float importance, float group_sum, std::int64_t group) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(importance, __fdiv_rn(group_sum, static_cast<float>(group)));
#else
  return importance + group_sum / static_cast<float>(group);
#endif
}

}  // namespace luka::rules

namespace luka {

// The rules a layer's parameters (luka_params.h) select; host code of both executors builds them
// here, so a parameter reaches the rules the same way on the CPU and the GPU.
inline rules::LinedRule to_rule(const LinedConfig& c) {
  rules::LinedRule r;
  r.window = c.window;
  r.window_frac = c.window_frac;
  r.rho = c.rho;
  r.rounding = c.rounding;
  r.heavy_late = c.heavy_late;
  return r;
}

inline rules::PageRule to_rule(const ClusteredConfig& c) {
  rules::PageRule r;
  r.page_size = c.page_size;
  r.tail = c.tail;
  r.interval = c.interval;
  r.max_pages = c.max_pages;
  r.authors = c.schedule == PageSchedule::kAuthors;
  r.bypass = c.page_bypass;
  return r;
}

}  // namespace luka
