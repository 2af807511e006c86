#include "core/tokenizer/bpe.h"

#include <queue>

#include "core/tokenizer/byte_level.h"
#include "core/util/error.h"

namespace luka {
namespace {

constexpr std::size_t kCacheLimit = 1 << 16;   // entries before the cache starts over
constexpr std::size_t kCacheMaxWord = 256;     // longer words are rare; don't cache them

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, std::int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
                   const std::string& where, std::int32_t unk_id, bool fuse_unk)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges), unk_id_(unk_id), fuse_unk_(fuse_unk) {
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(byte_level::byte_to_text(static_cast<unsigned char>(b)));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || m == vocab_.end())
      fail(where, "merge " + std::to_string(rank) + " (\"" + left + "\" \"" + right + "\") uses a token missing from the vocab");
    // A repeated pair keeps its first (best) rank.
    merges_.emplace(pair_key(l->second, r->second), Merge{static_cast<std::int32_t>(rank), m->second});
  }
}

// Calls emit(piece) for each token of the word, from the cache when the word was seen before.
template <class Emit>
void BpeModel::visit_word(std::string_view bytes, Emit&& emit) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    const std::int32_t id = byte_ids_[static_cast<unsigned char>(bytes[0])];
    if (id >= 0) {
      emit(Piece{id, 0, 1});
    } else if (unk_id_ >= 0) {
      emit(Piece{unk_id_, 0, 1});
    }
    return;
  }
  const bool cacheable = bytes.size() <= kCacheMaxWord;
  std::string key;
  if (cacheable) {
    key.assign(bytes);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      for (const Piece& p : it->second) emit(p);
      return;
    }
  }
  std::vector<Piece> pieces = merge_word(bytes);
  for (const Piece& p : pieces) emit(p);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheLimit) cache_.clear();
    cache_.emplace(std::move(key), std::move(pieces));
  }
}

void BpeModel::encode_word(std::string_view bytes, std::vector<std::int32_t>& out) const {
  visit_word(bytes, [&](const Piece& p) { out.push_back(p.id); });
}

void BpeModel::encode_word(std::string_view bytes, std::vector<Piece>& out) const {
  visit_word(bytes, [&](const Piece& p) { out.push_back(p); });
}

// Repeatedly merges the best-ranked adjacent pair (leftmost on ties) until none applies, with a
// heap of candidate pairs over a linked list of symbols: O(n log n) even for very long words.
std::vector<BpeModel::Piece> BpeModel::merge_word(std::string_view bytes) const {
  const auto size = static_cast<std::uint32_t>(bytes.size());
  if (ignore_merges_) {
    std::string text;
    for (char b : bytes) text += byte_level::byte_to_text(static_cast<unsigned char>(b));
    const auto it = vocab_.find(text);
    if (it != vocab_.end()) return {Piece{it->second, 0, size}};
  }

  struct Symbol {
    std::int32_t id;
    std::uint32_t begin, end;  // bytes of the word
    int prev, next;            // -1 at the ends
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(bytes.size());
  bool last_unk = false;
  for (std::uint32_t pos = 0; pos < size; ++pos) {
    std::int32_t id = byte_ids_[static_cast<unsigned char>(bytes[pos])];
    if (id < 0) {  // a byte the vocab lacks: the unknown token, fused with a preceding one
      if (unk_id_ < 0) continue;
      if (fuse_unk_ && last_unk) {
        symbols.back().end = pos + 1;
        continue;
      }
      id = unk_id_;
      last_unk = true;
    } else {
      last_unk = false;
    }
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({id, pos, pos + 1, i - 1, -1, true});
    if (i > 0) symbols[i - 1].next = i;
  }
  const int n = static_cast<int>(symbols.size());
  if (n == 0) return {};

  struct Candidate {
    std::int32_t rank;
    int pos;  // the left symbol
    std::int32_t left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto push_pair = [&](int pos) {
    if (pos < 0) return;
    const int next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, symbols[pos].id, symbols[next].id, it->second.merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.pos];
    // Skip candidates that an earlier merge made stale.
    if (!left.alive || left.next < 0 || left.id != top.left_id) continue;
    Symbol& right = symbols[left.next];
    if (right.id != top.right_id) continue;
    left.id = top.merged_id;
    left.end = right.end;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    push_pair(left.prev);
    push_pair(top.pos);
  }

  std::vector<Piece> pieces;
  for (int i = 0; i >= 0; i = symbols[i].next) pieces.push_back({symbols[i].id, symbols[i].begin, symbols[i].end});
  return pieces;
}

}  // namespace luka
