// Lined mode's heavy hitters kept incrementally (docs/design.md §5.3, docs/kernels-v2.md): the m best
// positions of [0, select_end) by a unit's summed h2o score, ties to the lower position, exactly
// the set core/luka's select_heavy_hitters returns, without ranking every position every step.
//
// Why it can be incremental: with decay 1 a lined step adds attention (>= 0) only to its cover,
// the heavy set and the recent window. Every other score is frozen, and a heavy hitter's score can
// only grow. So the set changes only where a position enters the selectable range (it leaves the
// window), where the budget m grows, or where such an entrant beats the current worst heavy hitter.
//
// Two indexed heaps over caller-owned arrays (so a CUDA kernel can run it on device memory with one
// thread per unit, and the host on vectors):
//  - rest: the selectable positions not in the set, a max-heap keyed by their (frozen) scores;
//  - heavy: the set, a min-heap whose keys are lower bounds of today's scores (a member's key is
//    its score when it was last looked at; scores only grow). The stale top is compared first; only
//    when an entrant beats it are members re-scored, from the top, until the top's key is current:
//    that top is then the true worst.
// Work per step: the entrants (one per step with a fixed window), a heap path (log2 T) per change,
// and the members re-scored while an entrant looks better than a stale key. A full selection runs
// on the first update and after invalidate(): on entering lined mode, after a prefill, and when
// the decay is not 1 (every score then moves). A score that went down or is NaN breaks the
// premise; the update then falls back to a full selection itself.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LUKA_HEAVY_HD __host__ __device__
#else
#define LUKA_HEAVY_HD
#endif

namespace luka::heavy {

// Better: a higher score, or the same score and a lower position (select_heavy_hitters' order).
LUKA_HEAVY_HD inline bool better(float sa, std::int32_t pa, float sb, std::int32_t pb) {
  return sa != sb ? sa > sb : pa < pb;
}

enum : std::uint8_t { kNone = 0, kHeavy = 1, kRest = 2 };

// One unit's state over positions [0, capacity). The arrays belong to the caller (HostHeavySet
// below holds them in vectors); zero-initialised counters make an invalid (empty) set.
struct HeavySet {
  std::uint8_t* place = nullptr;  // [capacity] kNone / kHeavy / kRest
  std::int32_t* slot = nullptr;   // [capacity] index of the position in its heap
  float* key = nullptr;           // [capacity] its key in that heap
  std::int32_t* rest = nullptr;   // [capacity] max-heap of positions
  std::int32_t* heavy = nullptr;  // [capacity] min-heap of positions (the worst on top)
  std::int64_t capacity = 0;
  std::int64_t n_rest = 0, n_heavy = 0;
  std::int64_t end = 0;           // the selectable range of the last update: [0, end)
  std::int64_t window_start = 0;  // the cover's window start at the last update
  bool valid = false;
  std::int64_t scored = 0;  // positions scored by the last update (work, for tests)
  bool full = false;        // the last update was a full selection
};

namespace detail {

// In the rest heap `a` sits above `b` when it is better; in the heavy heap when it is worse.
LUKA_HEAVY_HD inline bool above(const HeavySet& s, bool rest, std::int32_t a, std::int32_t b) {
  return rest ? better(s.key[a], a, s.key[b], b) : better(s.key[b], b, s.key[a], a);
}
LUKA_HEAVY_HD inline std::int32_t* heap(HeavySet& s, bool rest) { return rest ? s.rest : s.heavy; }
LUKA_HEAVY_HD inline std::int64_t& count(HeavySet& s, bool rest) { return rest ? s.n_rest : s.n_heavy; }

LUKA_HEAVY_HD inline void put(HeavySet& s, bool rest, std::int64_t i, std::int32_t pos) {
  heap(s, rest)[i] = pos;
  s.slot[pos] = static_cast<std::int32_t>(i);
}

LUKA_HEAVY_HD inline void sift_up(HeavySet& s, bool rest, std::int64_t i) {
  std::int32_t* h = heap(s, rest);
  const std::int32_t pos = h[i];
  while (i > 0) {
    const std::int64_t parent = (i - 1) / 2;
    if (!above(s, rest, pos, h[parent])) break;
    put(s, rest, i, h[parent]);
    i = parent;
  }
  put(s, rest, i, pos);
}

LUKA_HEAVY_HD inline void sift_down(HeavySet& s, bool rest, std::int64_t i) {
  std::int32_t* h = heap(s, rest);
  const std::int64_t n = count(s, rest);
  const std::int32_t pos = h[i];
  for (;;) {
    std::int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && above(s, rest, h[c + 1], h[c])) ++c;
    if (!above(s, rest, h[c], pos)) break;
    put(s, rest, i, h[c]);
    i = c;
  }
  put(s, rest, i, pos);
}

LUKA_HEAVY_HD inline void push(HeavySet& s, bool rest, std::int32_t pos) {
  s.place[pos] = rest ? kRest : kHeavy;
  const std::int64_t i = count(s, rest)++;
  put(s, rest, i, pos);
  sift_up(s, rest, i);
}

// Takes `pos` out of its heap (the last entry fills its slot and moves up or down).
LUKA_HEAVY_HD inline void erase(HeavySet& s, std::int32_t pos) {
  const bool rest = s.place[pos] == kRest;
  if (s.place[pos] == kNone) return;
  std::int32_t* h = heap(s, rest);
  const std::int64_t i = s.slot[pos], last = --count(s, rest);
  s.place[pos] = kNone;
  if (i == last) return;
  const std::int32_t moved = h[last];
  put(s, rest, i, moved);
  sift_up(s, rest, i);
  sift_down(s, rest, s.slot[moved]);
}

// The key of `pos` rose (or changed) in place: restore the heap order around it.
LUKA_HEAVY_HD inline void rekey(HeavySet& s, std::int32_t pos, float k) {
  const bool rest = s.place[pos] == kRest;
  s.key[pos] = k;
  sift_up(s, rest, s.slot[pos]);
  sift_down(s, rest, s.slot[pos]);
}

// Ranks [0, select_end) from scratch: every position into the rest heap (Floyd's heapify), then
// the m best moved to the set. Returns false where a score is NaN (no order to keep).
template <typename Score>
LUKA_HEAVY_HD bool full_select(HeavySet& s, const Score& score, std::int64_t select_end, std::int64_t m) {
  bool finite = true;
  s.n_rest = s.n_heavy = 0;
  for (std::int64_t t = 0; t < select_end; ++t) {
    const float k = score(t);
    finite = finite && k == k;
    s.key[t] = k;
    s.place[t] = kRest;
    put(s, true, t, static_cast<std::int32_t>(t));
  }
  s.n_rest = select_end;
  for (std::int64_t i = select_end / 2 - 1; i >= 0; --i) sift_down(s, true, i);
  for (std::int64_t i = 0; i < m && s.n_rest > 0; ++i) {
    const std::int32_t best = s.rest[0];
    erase(s, best);
    push(s, false, best);
  }
  s.scored = select_end;
  s.full = true;
  return finite;
}

// Brings the set's worst to the top of the heavy heap with its key current. False where a score
// fell or is NaN (the premise is broken).
template <typename Score>
LUKA_HEAVY_HD bool settle_worst(HeavySet& s, const Score& score) {
  for (;;) {
    const std::int32_t top = s.heavy[0];
    const float k = score(top);
    ++s.scored;
    if (k == s.key[top]) return true;
    if (!(k > s.key[top])) return false;
    s.key[top] = k;
    sift_down(s, false, 0);
  }
}

}  // namespace detail

// The m best of [0, select_end) by score(t) (the unit's heads summed in order), as
// select_heavy_hitters returns them on the same scores; the members are s.heavy[0, s.n_heavy) in
// heap order (heavy_sorted() gives them ascending). `window_start` is the start of the cover's
// window this step: the next update re-scores the selectable positions from it on. Since the
// previous update only the members' scores and those of positions >= its window_start may have
// changed, and only upward; anything else needs invalidate() first.
template <typename Score>
LUKA_HEAVY_HD void update(HeavySet& s, const Score& score, std::int64_t select_end, std::int64_t m,
                          std::int64_t window_start) {
  if (m > select_end) m = select_end;
  if (m < 0) m = 0;
  s.scored = 0;
  s.full = false;
  bool ok = s.valid;
  if (ok) {
    for (std::int64_t t = select_end; t < s.end; ++t) detail::erase(s, static_cast<std::int32_t>(t));
    const std::int64_t seen = s.end < select_end ? s.end : select_end;
    for (std::int64_t t = s.window_start; ok && t < seen; ++t) {  // rest positions the last window fed
      if (s.place[t] != kRest) continue;
      const float k = score(t);
      ++s.scored;
      if (k != s.key[t]) {
        ok = k > s.key[t];
        if (ok) detail::rekey(s, static_cast<std::int32_t>(t), k);
      }
    }
    for (std::int64_t t = s.end; ok && t < select_end; ++t) {  // entrants
      const float k = score(t);
      ++s.scored;
      ok = k == k;
      s.key[t] = k;
      detail::push(s, true, static_cast<std::int32_t>(t));
    }
  }
  while (ok && s.n_heavy > m) {  // a smaller budget: drop the worst
    ok = detail::settle_worst(s, score);
    const std::int32_t w = s.heavy[0];
    detail::erase(s, w);
    detail::push(s, true, w);
  }
  while (ok && s.n_heavy < m && s.n_rest > 0) {  // a larger one: take the best of the rest
    const std::int32_t b = s.rest[0];
    detail::erase(s, b);
    detail::push(s, false, b);
  }
  while (ok && s.n_rest > 0 && s.n_heavy > 0) {  // swap while the best of the rest beats the worst
    const std::int32_t b = s.rest[0];
    if (!detail::above(s, true, b, s.heavy[0])) break;  // not better than a lower bound of the worst
    ok = detail::settle_worst(s, score);
    if (!ok) break;
    const std::int32_t w = s.heavy[0];
    if (!better(s.key[b], b, s.key[w], w)) break;
    detail::erase(s, b);
    detail::erase(s, w);
    detail::push(s, false, b);
    detail::push(s, true, w);
  }
  if (!ok) {
    const std::int64_t before = s.scored;
    s.valid = detail::full_select(s, score, select_end, m);
    s.scored += before;
  }
  s.end = select_end;
  s.window_start = window_start;
  if (ok) s.valid = true;
}

LUKA_HEAVY_HD inline void invalidate(HeavySet& s) { s.valid = false; }

}  // namespace luka::heavy

#if !defined(__CUDA_ARCH__)
#include <algorithm>
#include <vector>

namespace luka::heavy {

// The arrays of one unit's HeavySet in host vectors, grown as the context grows.
class HostHeavySet {
 public:
  HeavySet& state() { return s_; }
  const HeavySet& state() const { return s_; }

  // Makes room for positions [0, n) (keeps the heaps: slots and keys are per position).
  void reserve(std::int64_t n) {
    if (n <= s_.capacity) return;
    const std::size_t c = static_cast<std::size_t>(std::max<std::int64_t>(n, 2 * s_.capacity));
    place_.resize(c, kNone);
    slot_.resize(c, 0);
    key_.resize(c, 0.0f);
    rest_.resize(c, 0);
    heavy_.resize(c, 0);
    s_.place = place_.data();
    s_.slot = slot_.data();
    s_.key = key_.data();
    s_.rest = rest_.data();
    s_.heavy = heavy_.data();
    s_.capacity = static_cast<std::int64_t>(c);
  }

  template <typename Score>
  void update(const Score& score, std::int64_t select_end, std::int64_t m, std::int64_t window_start) {
    reserve(select_end);
    heavy::update(s_, score, select_end, m, window_start);
  }

  // The set in ascending position order.
  std::vector<std::int64_t> sorted() const {
    std::vector<std::int64_t> out(s_.heavy, s_.heavy + s_.n_heavy);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  HeavySet s_;
  std::vector<std::uint8_t> place_;
  std::vector<std::int32_t> slot_, rest_, heavy_;
  std::vector<float> key_;
};

}  // namespace luka::heavy
#endif
