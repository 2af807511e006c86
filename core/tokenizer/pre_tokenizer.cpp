#include "core/tokenizer/pre_tokenizer.h"

#include "core/tokenizer/unicode.h"
#include "core/util/error.h"

namespace luka {
namespace {

// One decoded character of the text being split.
struct Char {
  char32_t cp = 0;
  std::size_t len = 0;  // bytes; 0 past the end
};

Char char_at(std::string_view text, std::size_t pos) {
  Char c;
  if (pos < text.size()) c.cp = unicode::decode_at(text, pos, c.len);
  return c;
}

bool is_cr_lf(char32_t cp) { return cp == '\r' || cp == '\n'; }

// [^\s\p{L}\p{N}]: what the regex treats as punctuation/symbols.
bool is_other(char32_t cp) {
  return !unicode::is_whitespace(cp) && !unicode::is_letter(cp) && !unicode::is_number(cp);
}

// Lower-cases what (?i) folds onto the ASCII letters of the contractions. U+017F (long s) folds
// to 's' under Unicode case folding; no other non-ASCII character folds to t, r, e, v, m, l, d
// (U+212A KELVIN folds to 'k', which no contraction uses).
char32_t fold_contraction_letter(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
  if (cp == 0x017F) return 's';
  return cp;
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::size_t pos = 0;
  std::size_t gap_start = 0;  // start of text no match has covered yet
  while (pos < text.size()) {
    const std::size_t len = match_at(text, pos);
    if (len == 0) {
      std::size_t clen = 0;
      unicode::decode_at(text, pos, clen);
      pos += clen;
      continue;
    }
    if (gap_start < pos) out.push_back(text.substr(gap_start, pos - gap_start));
    out.push_back(text.substr(pos, len));
    pos += len;
    gap_start = pos;
  }
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

std::unique_ptr<PreTokenizer> PreTokenizer::for_pattern(const std::string& pattern,
                                                        const std::filesystem::path& file) {
  if (pattern == Qwen2PreTokenizer::pattern()) return std::make_unique<Qwen2PreTokenizer>();
  fail(file.string(), "unsupported pre-tokenizer Split pattern \"" + pattern +
                          "\" (supported: the Qwen2/Qwen3 pattern)");
}

const char* Qwen2PreTokenizer::pattern() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

// Tries the alternatives in order, as a backtracking engine does: the first that matches wins,
// even when a later one would match more.
std::size_t Qwen2PreTokenizer::match_at(std::string_view text, std::size_t pos) const {
  const Char c0 = char_at(text, pos);
  if (c0.len == 0) return 0;
  const Char c1 = char_at(text, pos + c0.len);

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c0.cp == '\'' && c1.len != 0) {
    const char32_t a = fold_contraction_letter(c1.cp);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return c0.len + c1.len;
    const Char c2 = char_at(text, pos + c0.len + c1.len);
    if (c2.len != 0) {
      const char32_t b = fold_contraction_letter(c2.cp);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return c0.len + c1.len + c2.len;
    }
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    std::size_t start = pos;
    if (unicode::is_letter(c0.cp)) {
      start = pos;  // a letter can't be the optional prefix; L+ starts here
    } else if (!is_cr_lf(c0.cp) && !unicode::is_number(c0.cp) && c1.len != 0 &&
               unicode::is_letter(c1.cp)) {
      start = pos + c0.len;
    } else {
      start = std::string_view::npos;
    }
    if (start != std::string_view::npos) {
      std::size_t end = start;
      for (Char c = char_at(text, end); c.len != 0 && unicode::is_letter(c.cp); c = char_at(text, end))
        end += c.len;
      return end - pos;
    }
  }

  // \p{N}
  if (unicode::is_number(c0.cp)) return c0.len;

  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  {
    std::size_t start = std::string_view::npos;
    if (is_other(c0.cp)) {
      start = pos;
    } else if (c0.cp == ' ' && c1.len != 0 && is_other(c1.cp)) {
      start = pos + c0.len;
    }
    if (start != std::string_view::npos) {
      std::size_t end = start;
      for (Char c = char_at(text, end); c.len != 0 && is_other(c.cp); c = char_at(text, end)) end += c.len;
      while (end < text.size() && is_cr_lf(static_cast<unsigned char>(text[end]))) ++end;
      return end - pos;
    }
  }

  if (!unicode::is_whitespace(c0.cp)) return 0;

  // The whitespace run from pos, and where its last \r or \n ends.
  std::size_t run_end = pos;
  std::size_t last_crlf_end = 0;
  std::size_t last_char_start = pos;
  for (Char c = char_at(text, run_end); c.len != 0 && unicode::is_whitespace(c.cp); c = char_at(text, run_end)) {
    last_char_start = run_end;
    run_end += c.len;
    if (is_cr_lf(c.cp)) last_crlf_end = run_end;
  }

  // \s*[\r\n]+ : \s* backs off to the last line break of the run, [\r\n]+ takes just that one
  // (anything after it in the run is not a line break).
  if (last_crlf_end != 0) return last_crlf_end - pos;

  // \s+(?!\S) : the whole run at the end of text, else all but its last character (which the
  // next piece, e.g. " word", takes); fails on a single whitespace before a non-space.
  if (run_end == text.size()) return run_end - pos;
  if (last_char_start > pos) return last_char_start - pos;

  // \s+
  return run_end - pos;
}

std::size_t Gpt2PreTokenizer::match_at(std::string_view text, std::size_t pos) const {
  const Char c0 = char_at(text, pos);
  if (c0.len == 0) return 0;
  const Char c1 = char_at(text, pos + c0.len);

  // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
  if (c0.cp == '\'' && c1.len != 0) {
    if (c1.cp == 's' || c1.cp == 't' || c1.cp == 'm' || c1.cp == 'd') return c0.len + c1.len;
    const Char c2 = char_at(text, pos + c0.len + c1.len);
    if (c2.len != 0 && ((c1.cp == 'r' && c2.cp == 'e') || (c1.cp == 'v' && c2.cp == 'e') || (c1.cp == 'l' && c2.cp == 'l')))
      return c0.len + c1.len + c2.len;
  }

  // ' ?X+' for X = letters, numbers, other: an optional single space, then a run of one class.
  const auto run = [&](auto&& in_class) -> std::size_t {
    std::size_t start;
    if (in_class(c0.cp)) {
      start = pos;
    } else if (c0.cp == ' ' && c1.len != 0 && in_class(c1.cp)) {
      start = pos + c0.len;
    } else {
      return 0;
    }
    std::size_t end = start;
    for (Char c = char_at(text, end); c.len != 0 && in_class(c.cp); c = char_at(text, end)) end += c.len;
    return end - pos;
  };
  if (const std::size_t n = run(unicode::is_letter)) return n;
  if (const std::size_t n = run(unicode::is_number)) return n;
  if (const std::size_t n = run(is_other)) return n;

  if (!unicode::is_whitespace(c0.cp)) return 0;
  std::size_t run_end = pos;
  std::size_t last_char_start = pos;
  for (Char c = char_at(text, run_end); c.len != 0 && unicode::is_whitespace(c.cp); c = char_at(text, run_end)) {
    last_char_start = run_end;
    run_end += c.len;
  }
  // \s+(?!\S): the whole run at the end of text, else all but its last character; a single
  // whitespace before a non-space falls through to \s+.
  if (run_end == text.size()) return run_end - pos;
  if (last_char_start > pos) return last_char_start - pos;
  return run_end - pos;
}

void IndividualDigitsPreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::size_t start = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t len = 0;
    const char32_t cp = unicode::decode_at(text, pos, len);
    if (unicode::is_number(cp)) {
      if (start < pos) inner_->split(text.substr(start, pos - start), out);
      out.push_back(text.substr(pos, len));
      start = pos + len;
    }
    pos += len;
  }
  if (start < text.size()) inner_->split(text.substr(start), out);
}

std::unique_ptr<PreTokenizer> pre_tokenizer_for_gguf(const std::string& name, const std::string& where, bool& nfc) {
  nfc = false;
  if (name == "qwen2") {
    nfc = true;  // Qwen2/Qwen3 tokenizers normalize to NFC
    return std::make_unique<Qwen2PreTokenizer>();
  }
  if (name == "smollm") return std::make_unique<IndividualDigitsPreTokenizer>(std::make_unique<Gpt2PreTokenizer>());
  if (name == "gpt-2" || name == "gpt2") return std::make_unique<Gpt2PreTokenizer>();
  fail(where, "GGUF: unsupported pre-tokenizer \"" + name + "\" in tokenizer.ggml.pre (supported: qwen2, smollm, gpt-2)");
}

}  // namespace luka
