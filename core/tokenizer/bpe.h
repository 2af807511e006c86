// The BPE model: a vocabulary and ranked merges over byte-level symbols.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace luka {

class BpeModel {
 public:
  // `vocab` maps byte-level token text to id; `merges` are (left, right) token texts in rank
  // order. A byte whose symbol is not in the vocab encodes as `unk_id` (consecutive ones within
  // a word as one, with `fuse_unk`), or is dropped when there is no unknown token, as in the
  // Rust library. Throws luka::Error naming `where` when a merge uses a token missing from the vocab.
  BpeModel(std::unordered_map<std::string, std::int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
           const std::string& where, std::int32_t unk_id = -1, bool fuse_unk = false);

  // One token of a word and the bytes [begin, end) of the word it stands for. A fused unknown
  // token covers all its bytes; a byte dropped for want of an unknown token is in no piece.
  struct Piece {
    std::int32_t id;
    std::uint32_t begin, end;
  };

  // Appends the ids of one pre-tokenized word given as raw bytes.
  void encode_word(std::string_view bytes, std::vector<std::int32_t>& out) const;
  // The same tokens with the bytes of `bytes` each covers.
  void encode_word(std::string_view bytes, std::vector<Piece>& out) const;

  const std::unordered_map<std::string, std::int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged_id;
  };
  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  std::vector<Piece> merge_word(std::string_view bytes) const;
  template <class Emit>
  void visit_word(std::string_view bytes, Emit&& emit) const;

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::unordered_map<std::uint64_t, Merge> merges_;  // keyed by the pair of ids
  std::int32_t byte_ids_[256];                       // id of each single byte's symbol; -1 if none
  bool ignore_merges_;
  std::int32_t unk_id_;  // -1: none
  bool fuse_unk_;

  // Words repeat a lot in real text; remember their ids. Guarded for concurrent encode().
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<Piece>> cache_;
};

}  // namespace luka
