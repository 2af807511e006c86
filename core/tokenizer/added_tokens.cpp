#include "core/tokenizer/added_tokens.h"

#include <algorithm>

#include "core/tokenizer/unicode.h"

namespace luka {
namespace {

bool is_word_char(char32_t cp) { return cp == '_' || unicode::is_letter(cp) || unicode::is_number(cp); }

// The code point that ends just before byte `pos`.
char32_t char_before(std::string_view text, std::size_t pos, std::size_t& start) {
  start = pos;
  do {
    --start;
  } while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80);
  std::size_t len = 0;
  return unicode::decode_at(text, start, len);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool match_normalized)
    : first_bytes_(256, 0) {
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    std::string text = match_normalized ? unicode::nfc(token.content) : token.content;
    first_bytes_[static_cast<unsigned char>(text[0])] = 1;
    patterns_.push_back({std::move(text), token});
  }
  std::stable_sort(patterns_.begin(), patterns_.end(),
                   [](const Pattern& a, const Pattern& b) { return a.text.size() > b.text.size(); });
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>& out) const {
  std::size_t piece_start = 0;  // start of text not yet emitted
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (!first_bytes_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const Pattern* hit = nullptr;
    for (const Pattern& p : patterns_) {
      if (text.compare(pos, p.text.size(), p.text) == 0) {
        hit = &p;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + hit->text.size();
    const AddedToken& token = hit->token;
    if (token.single_word) {
      std::size_t before_start = 0, len = 0;
      const bool word_before = start > 0 && is_word_char(char_before(text, start, before_start));
      const bool word_after = stop < text.size() && is_word_char(unicode::decode_at(text, stop, len));
      if (word_before || word_after) {  // inside a word: not this token
        ++pos;
        continue;
      }
    }
    if (token.lstrip) {
      while (start > piece_start) {
        std::size_t prev = 0;
        if (!unicode::is_whitespace(char_before(text, start, prev))) break;
        start = prev;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        std::size_t len = 0;
        if (!unicode::is_whitespace(unicode::decode_at(text, stop, len))) break;
        stop += len;
      }
    }
    if (piece_start < start) out.push_back({text.substr(piece_start, start - piece_start), -1});
    out.push_back({text.substr(start, stop - start), token.id});
    pos = piece_start = stop;
  }
  if (piece_start < text.size()) out.push_back({text.substr(piece_start), -1});
}

}  // namespace luka
