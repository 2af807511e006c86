#include "core/luka/heavy_hitters.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace luka {

// One nth_element over a copy for the m-th best value, then a scan: the values above it, and of
// those equal to it the lowest positions, as many as are missing.
std::vector<std::int64_t> select_heavy_hitters(const float* score, std::int64_t n, std::int64_t m) {
  if (m <= 0 || n <= 0) return {};
  std::vector<std::int64_t> out;
  if (m >= n) {
    out.resize(static_cast<std::size_t>(n));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  std::vector<float> copy(score, score + n);
  std::nth_element(copy.begin(), copy.begin() + (m - 1), copy.end(), std::greater<float>());
  const float v = copy[static_cast<std::size_t>(m - 1)];
  std::int64_t above = 0;
  for (std::int64_t t = 0; t < n; ++t) above += score[t] > v;
  std::int64_t ties_left = m - above;
  out.reserve(static_cast<std::size_t>(m));
  for (std::int64_t t = 0; t < n; ++t) {
    if (score[t] > v) {
      out.push_back(t);
    } else if (score[t] == v && ties_left > 0) {
      out.push_back(t);
      --ties_left;
    }
  }
  return out;
}

namespace {
// Heap orders for std::push_heap and friends, whose top is the "largest".
struct WorseFirst {  // rest_: the best on top
  template <typename K>
  bool operator()(const K& a, const K& b) const { return a.score != b.score ? a.score < b.score : a.pos > b.pos; }
};
struct BetterFirst {  // worst_: the worst on top
  template <typename K>
  bool operator()(const K& a, const K& b) const { return a.score != b.score ? a.score > b.score : a.pos < b.pos; }
};
}  // namespace

float HeavyHitterSet::score(const Rows& rows, std::int64_t t) const {
  float s = 0.0f;  // summed from zero in row order, like the full selection's unit scores
  for (const float* r : rows) s += r[t];
  return s;
}

void HeavyHitterSet::invalidate() { valid_ = false; }

void HeavyHitterSet::add_rest(std::int64_t t, float s) {
  place_[t] = kRest;
  key_[t] = s;
  rest_.push_back({s, t});
  std::push_heap(rest_.begin(), rest_.end(), WorseFirst{});
  ++rest_live_;
}

bool HeavyHitterSet::best_rest(Key* out) {
  while (!rest_.empty()) {
    const Key& top = rest_.front();
    if (place_[top.pos] == kRest && key_[top.pos] == top.score) {
      *out = top;
      return true;
    }
    std::pop_heap(rest_.begin(), rest_.end(), WorseFirst{});
    rest_.pop_back();
  }
  return false;
}

// Removes the top, which best_rest has just returned (live).
void HeavyHitterSet::pop_rest() {
  place_[rest_.front().pos] = kNone;
  std::pop_heap(rest_.begin(), rest_.end(), WorseFirst{});
  rest_.pop_back();
  --rest_live_;
}

void HeavyHitterSet::remove(std::int64_t t) {
  if (place_[t] == kHeavy) {
    heavy_.erase(std::lower_bound(heavy_.begin(), heavy_.end(), t));
  } else if (place_[t] == kRest) {
    --rest_live_;
  }
  place_[t] = kNone;
}

void HeavyHitterSet::add_heavy(std::int64_t t) {
  heavy_.insert(std::upper_bound(heavy_.begin(), heavy_.end(), t), t);
  place_[t] = kHeavy;
}

void HeavyHitterSet::rebuild(const Rows& rows, std::int64_t select_end, std::int64_t m) {
  last_full_ = select_end;
  std::vector<float> s(static_cast<std::size_t>(select_end));
  bool finite_order = true;  // NaN has no place in an order: rank it the full way, every step
  for (std::int64_t t = 0; t < select_end; ++t) {
    s[t] = score(rows, t);
    finite_order = finite_order && !std::isnan(s[t]);
  }
  heavy_ = select_heavy_hitters(s.data(), select_end, m);
  valid_ = finite_order;
  if (!valid_) return;
  place_.assign(static_cast<std::size_t>(select_end), kRest);
  key_.assign(s.begin(), s.end());
  for (const std::int64_t t : heavy_) place_[t] = kHeavy;
  rest_.clear();
  for (std::int64_t t = 0; t < select_end; ++t)
    if (place_[t] == kRest) rest_.push_back({s[t], t});
  rest_live_ = static_cast<std::int64_t>(rest_.size());
  std::make_heap(rest_.begin(), rest_.end(), WorseFirst{});
  end_ = select_end;
}

const std::vector<std::int64_t>& HeavyHitterSet::select(const Rows& rows, std::int64_t select_end, std::int64_t m,
                                                        std::int64_t window_start) {
  m = std::max<std::int64_t>(0, std::min(m, select_end));
  const auto full = [&]() -> const std::vector<std::int64_t>& {
    rebuild(rows, select_end, m);
    window_start_ = window_start;
    return heavy_;
  };
  if (!valid_) return full();
  last_full_ = 0;
  if (static_cast<std::int64_t>(place_.size()) < select_end) {
    place_.resize(static_cast<std::size_t>(select_end), kNone);
    key_.resize(static_cast<std::size_t>(select_end), 0.0f);
  }
  // Candidates that left the range, candidates in the last window (their scores moved), new ones.
  for (std::int64_t t = select_end; t < end_; ++t) remove(t);
  for (std::int64_t t = window_start_; t < std::min(end_, select_end); ++t) {
    if (place_[t] != kRest) continue;
    const float s = score(rows, t);
    if (std::isnan(s)) return full();
    if (s != key_[t]) {
      --rest_live_;  // add_rest counts it again; the old entry goes stale
      add_rest(t, s);
    }
  }
  for (std::int64_t t = end_; t < select_end; ++t) {
    const float s = score(rows, t);
    if (std::isnan(s)) return full();
    add_rest(t, s);
  }
  end_ = select_end;
  window_start_ = window_start;

  // The heavy hitters under today's scores, the worst on top; then the set is the m best once it
  // has m members (or all there are) and its worst beats the best of the rest.
  worst_.clear();
  for (const std::int64_t t : heavy_) {
    const float s = score(rows, t);
    if (std::isnan(s)) return full();
    worst_.push_back({s, t});
  }
  std::make_heap(worst_.begin(), worst_.end(), BetterFirst{});
  const auto pop_worst = [&] {
    const Key w = worst_.front();
    std::pop_heap(worst_.begin(), worst_.end(), BetterFirst{});
    worst_.pop_back();
    remove(w.pos);
    add_rest(w.pos, w.score);
  };
  const auto push_best = [&](const Key& b) {
    pop_rest();
    add_heavy(b.pos);
    worst_.push_back(b);
    std::push_heap(worst_.begin(), worst_.end(), BetterFirst{});
  };
  while (static_cast<std::int64_t>(heavy_.size()) > m) pop_worst();
  Key best{};
  while (static_cast<std::int64_t>(heavy_.size()) < m && best_rest(&best)) push_best(best);
  while (!worst_.empty() && best_rest(&best) && Better{}(best, worst_.front())) {
    pop_worst();
    best_rest(&best);  // the popped heavy hitter may now top the rest, but `best` is still better
    push_best(best);
  }
  // Stale entries pile up as positions are re-scored: compact when they outnumber the live ones.
  if (static_cast<std::int64_t>(rest_.size()) > 2 * rest_live_ + 64) {
    rest_.clear();
    for (std::int64_t t = 0; t < end_; ++t)
      if (place_[t] == kRest) rest_.push_back({key_[t], t});
    std::make_heap(rest_.begin(), rest_.end(), WorseFirst{});
  }
  return heavy_;
}

}  // namespace luka
