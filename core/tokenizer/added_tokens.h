// Added tokens (tokenizer.json "added_tokens", special or not): they are cut out of the text
// before normalization and BPE and map straight to their ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace luka {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;  // only match when not inside a word
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool normalized = false;   // matched in NFC text instead of the raw text
};

// A piece of text after splitting out added tokens: either a token id or plain text.
struct TextPiece {
  std::string_view text;
  std::int32_t added_id = -1;  // >= 0 for an added token
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` is the subset to match; with `match_normalized`, their contents are NFC'd first.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool match_normalized);

  // Splits `text` at leftmost-longest, non-overlapping matches (like the Rust library's
  // Aho-Corasick LeftmostLongest), appending pieces in order.
  void split(std::string_view text, std::vector<TextPiece>& out) const;

  bool empty() const { return patterns_.empty(); }

 private:
  struct Pattern {
    std::string text;
    AddedToken token;
  };
  std::vector<Pattern> patterns_;           // longest first, so the first hit is the longest
  std::vector<std::uint8_t> first_bytes_;   // 256 flags: can a pattern start with this byte
};

}  // namespace luka
