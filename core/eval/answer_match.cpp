#include "core/eval/answer_match.h"

#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/locid.h>

namespace luka::eval {

namespace {

bool is_punctuation(UChar32 c) {
  if (u_ispunct(c)) return true;
  // string.punctuation's symbols, which Unicode files under S (symbols), not P.
  switch (c) {
    case '$': case '+': case '<': case '=': case '>': case '^': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_article(const std::string& word) { return word == "a" || word == "an" || word == "the"; }

}  // namespace

std::string normalize_answer(std::string_view text) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
  s.toLower(icu::Locale::getRoot());
  std::string out, word;
  const auto end_word = [&] {
    if (!word.empty() && !is_article(word)) {
      if (!out.empty()) out += ' ';
      out += word;
    }
    word.clear();
  };
  for (std::int32_t i = 0; i < s.length();) {
    const UChar32 c = s.char32At(i);
    i += U16_LENGTH(c);
    if (is_punctuation(c)) continue;
    if (u_isUWhiteSpace(c)) {
      end_word();
      continue;
    }
    icu::UnicodeString(c).toUTF8String(word);
  }
  end_word();
  return out;
}

bool lenient_match(std::string_view prediction, const std::vector<std::string>& golds) {
  const std::string p = normalize_answer(prediction);
  if (p.empty()) return false;
  for (const std::string& gold : golds) {
    const std::string g = normalize_answer(gold);
    if (g.empty()) continue;
    if (p == g || p.find(g) != std::string::npos || g.find(p) != std::string::npos) return true;
  }
  return false;
}

std::string strip_space(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
  std::size_t a = 0, b = s.size();
  while (a < b && space(s[a])) ++a;
  while (b > a && space(s[b - 1])) --b;
  return std::string(s.substr(a, b - a));
}

}  // namespace luka::eval
