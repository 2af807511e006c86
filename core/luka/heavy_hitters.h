// Lined mode's heavy hitters (docs/design.md §5.3): the m best positions of [0, n) by h2o score, ties
// to the lower position, for one selection unit (a head, a KV group or the layer, whose scores are
// the sum of its heads' rows).
//
// select_heavy_hitters ranks every position from scratch. HeavyHitterSet gives the same set step
// after step while touching only what can have changed: a lined step adds attention only to its
// cover (the heavy hitters and the recent window), so every other position's score is frozen
// (with decay 1) and the set moves by the few tokens that leave the window or lose their place.
// Plain C++, no LibTorch.
#pragma once

#include <cstdint>
#include <vector>

namespace luka {

// The m best of score[0, n) (ties: lower position first), in ascending position order; all of
// them when m >= n.
std::vector<std::int64_t> select_heavy_hitters(const float* score, std::int64_t n, std::int64_t m);

class HeavyHitterSet {
 public:
  // The unit's score rows: one per head of the unit, summed in this order (as the full selection
  // sums them), each valid over the positions asked for.
  using Rows = std::vector<const float*>;

  // The m best of [0, select_end) by the rows' summed scores, in ascending position order: exactly
  // select_heavy_hitters on those sums. The first call after construction or invalidate() ranks
  // everything; later calls assume that since the previous call only the scores of its result and
  // of positions >= its window_start changed (what the lined step that used them accumulates), and
  // touch only those. The caller invalidates when anything else may have changed a score.
  const std::vector<std::int64_t>& select(const Rows& rows, std::int64_t select_end, std::int64_t m,
                                          std::int64_t window_start);
  void invalidate();
  bool valid() const { return valid_; }
  // Positions ranked from scratch / compared by the last select (for tests and benchmarks).
  std::int64_t last_full_rank() const { return last_full_; }

 private:
  struct Key {
    float score;
    std::int64_t pos;
  };
  // Better first: a higher score, or the same score and a lower position.
  struct Better {
    bool operator()(const Key& a, const Key& b) const { return a.score != b.score ? a.score > b.score : a.pos < b.pos; }
  };
  enum Place : std::uint8_t { kNone = 0, kHeavy = 1, kRest = 2 };

  float score(const Rows& rows, std::int64_t t) const;
  void rebuild(const Rows& rows, std::int64_t select_end, std::int64_t m);
  void add_rest(std::int64_t t, float s);
  bool best_rest(Key* out);  // the best live entry of rest_ (stale ones dropped), false if none
  void pop_rest();
  void remove(std::int64_t t);
  void add_heavy(std::int64_t t);

  bool valid_ = false;
  std::int64_t end_ = 0, window_start_ = 0, last_full_ = 0, rest_live_ = 0;
  std::vector<std::int64_t> heavy_;  // ascending positions
  // Candidates not in heavy_, as a heap with the best on top. Entries are not removed when a
  // position leaves or is re-scored; they go stale (their score no longer equals key_[pos], or the
  // position is no longer kRest) and are dropped when they surface or the heap is compacted.
  std::vector<Key> rest_;
  std::vector<float> key_;           // per position: its score in rest_
  std::vector<std::uint8_t> place_;  // per position: Place
  std::vector<Key> worst_;           // scratch: heavy_ keyed by today's scores, the worst on top
};

}  // namespace luka
