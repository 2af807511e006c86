#include "core/tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "core/util/error.h"

namespace luka::unicode {
namespace {

// Length of the valid prefix of a UTF-8 sequence starting at `pos` (Unicode Table 3-7), and
// whether that prefix is a whole character. Used by both lossy decoding and streaming.
struct SequenceCheck {
  std::size_t valid_len;  // bytes that form a valid (possibly unfinished) sequence prefix
  std::size_t need;       // total bytes the lead byte announces (0: invalid lead)
};

SequenceCheck check_sequence(std::string_view s, std::size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {1, 1};
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;        // no overlongs
    if (b0 == 0xED) hi = 0x9F;        // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;        // no overlongs
    if (b0 == 0xF4) hi = 0x8F;        // nothing above U+10FFFF
  } else {
    return {0, 0};
  }
  std::size_t len = 1;
  while (len < need && pos + len < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos + len]);
    const bool ok = len == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++len;
  }
  return {len, need};
}

struct Range {
  char32_t first, last;
};

bool in_ranges(const Range* begin, const Range* end, char32_t cp) {
  const Range* it = std::upper_bound(begin, end, cp, [](char32_t c, const Range& r) { return c < r.first; });
  return it != begin && cp <= (it - 1)->last;
}

// The Rust tokenizers' regex engine (Oniguruma) carries Unicode 16 tables, ICU 72 Unicode 15.0.
// These letters and numbers, new in Unicode 15.1/16.0 and unassigned for ICU, were found by
// classifying every code point with tokenizers 0.22.2's pre-tokenizer and diffing against ICU.
constexpr Range kNewerLetters[] = {
    {0x1C89, 0x1C8A}, {0xA7CB, 0xA7CD}, {0xA7DA, 0xA7DC}, {0x105C0, 0x105F3}, {0x10D4A, 0x10D65},
    {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E},
    {0x11390, 0x113B5}, {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0},
    {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF}, {0x1E5D0, 0x1E5ED},
    {0x1E5F0, 0x1E5F0}, {0x2EBF0, 0x2EE5D}};
constexpr Range kNewerNumbers[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x16130, 0x16139},
    {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1E5F1, 0x1E5FA}};

// The Rust normalizer (unicode-normalization-alignments) is older than ICU the other way round:
// it lacks the combining classes of marks added in Unicode 11-15 (treating them as starters)
// and the Dives Akuru composition U+11935 U+11930 -> U+11938 (Unicode 13). Normalizing the text
// between these characters separately, and leaving them as they are, reproduces that. Found by
// running every code point through both normalizers next to U+0301 and U+0334.
constexpr Range kRustNormalizerStarters[] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C},
    {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0xA82C, 0xA82C},
    {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85},
    {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x11930, 0x11930},
    {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47},
    {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97}, {0x11F41, 0x11F42},
    {0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF},
    {0x1E4EC, 0x1E4EF}};

template <std::size_t N>
constexpr bool sorted(const Range (&table)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (table[i].first > table[i].last || (i > 0 && table[i - 1].last >= table[i].first)) return false;
  return true;
}
static_assert(sorted(kNewerLetters) && sorted(kNewerNumbers) && sorted(kRustNormalizerStarters),
              "range tables must be sorted for binary search");

template <std::size_t N>
bool in_table(const Range (&table)[N], char32_t cp) {
  return in_ranges(table, table + N, cp);
}

// ICU NFC of one stretch of valid UTF-8.
std::string icu_nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) fail("ICU", std::string("cannot load the NFC normalizer: ") + u_errorName(status));
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (normalizer->isNormalized(source, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const icu::UnicodeString normalized = normalizer->normalize(source, status);
  if (U_FAILURE(status)) fail("ICU", std::string("NFC normalization failed: ") + u_errorName(status));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

// --- NFC with alignments --------------------------------------------------------------------
// The Rust tokenizers normalize with unicode-normalization-alignments, which pairs every output
// character with a change count: 0 for a character that replaces one input character, +1 for one
// a decomposition inserted, -n for a composed character that swallowed n more. NormalizedString then
// walks the input by position with these counts. Its offsets (and so ours) follow from replaying
// the same decomposition, canonical ordering and composition with ICU's data, restricted to what
// the Rust normalizer's older tables know (kRustNormalizerStarters).

struct NormalizingChar {
  char32_t cp;
  int change;
  std::uint8_t ccc;  // canonical combining class as the Rust normalizer sees it
};

const icu::Normalizer2& nfc_instance() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) fail("ICU", std::string("cannot load the NFC normalizer: ") + u_errorName(status));
  return *normalizer;
}

bool known_to_rust_normalizer(char32_t cp) { return cp < 0x7FD || !in_table(kRustNormalizerStarters, cp); }

std::uint8_t rust_ccc(const icu::Normalizer2& nfc, char32_t cp) {
  if (cp < 0x300 || !known_to_rust_normalizer(cp)) return 0;
  return nfc.getCombiningClass(static_cast<UChar32>(cp));
}

// Full canonical decomposition of `cp` into `out` (first character change 0, the rest +1), or
// `cp` itself when it has none the Rust normalizer knows.
void decompose(const icu::Normalizer2& nfc, char32_t cp, std::vector<NormalizingChar>& out) {
  icu::UnicodeString mapping;
  if (cp >= 0xC0 && known_to_rust_normalizer(cp) && nfc.getDecomposition(static_cast<UChar32>(cp), mapping)) {
    std::vector<char32_t> parts;
    for (int32_t i = 0; i < mapping.length(); i = mapping.moveIndex32(i, 1)) parts.push_back(mapping.char32At(i));
    bool known = true;
    for (char32_t p : parts) known = known && known_to_rust_normalizer(p);
    if (known && !parts.empty()) {
      for (std::size_t i = 0; i < parts.size(); ++i) out.push_back({parts[i], i == 0 ? 0 : 1, rust_ccc(nfc, parts[i])});
      return;
    }
  }
  out.push_back({cp, 0, rust_ccc(nfc, cp)});
}

// The primary composite of a + b, or 0.
char32_t compose(const icu::Normalizer2& nfc, char32_t a, char32_t b) {
  if (!known_to_rust_normalizer(a) || !known_to_rust_normalizer(b)) return 0;
  const UChar32 c = nfc.composePair(static_cast<UChar32>(a), static_cast<UChar32>(b));
  if (c < 0 || !known_to_rust_normalizer(static_cast<char32_t>(c))) return 0;
  return static_cast<char32_t>(c);
}

// Canonical composition in the Rust normalizer's order of output: a starter absorbs every later
// unblocked character it composes with; the marks it could not absorb follow it.
std::vector<NormalizingChar> recompose(const icu::Normalizer2& nfc, const std::vector<NormalizingChar>& chars) {
  std::vector<NormalizingChar> out;
  out.reserve(chars.size());
  std::vector<NormalizingChar> held;  // marks after the starter that did not compose with it
  bool have_starter = false;
  NormalizingChar starter{};
  int last_ccc = -1;                  // class of the last held mark; -1 when none is held
  const auto flush = [&] {
    if (have_starter) out.push_back(starter);
    out.insert(out.end(), held.begin(), held.end());
    held.clear();
    last_ccc = -1;
  };
  for (const NormalizingChar& c : chars) {
    if (!have_starter) {
      if (c.ccc != 0) {
        out.push_back(c);  // a mark with no starter before it
        continue;
      }
      starter = c;
      have_starter = true;
      continue;
    }
    const bool blocked = last_ccc >= 0 && last_ccc >= c.ccc;
    if (!blocked) {
      if (const char32_t composite = compose(nfc, starter.cp, c.cp)) {
        starter = {composite, starter.change + c.change - 1, 0};
        continue;
      }
    }
    if (c.ccc == 0) {
      flush();
      starter = c;
      continue;
    }
    held.push_back(c);
    last_ccc = c.ccc;
  }
  flush();
  return out;
}

}  // namespace

char32_t decode_at(std::string_view text, std::size_t pos, std::size_t& len) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  const SequenceCheck c = check_sequence(text, pos);
  if (c.need == 0 || c.valid_len != c.need) {
    len = 1;
    return b0;
  }
  len = c.need;
  char32_t cp = b0 & (0xFF >> (c.need + 1));
  for (std::size_t i = 1; i < c.need; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const SequenceCheck c = check_sequence(text, pos);
    if (c.need == 0 || c.valid_len != c.need) return false;
    pos += c.need;
  }
  return true;
}

bool is_letter(char32_t cp) {
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK) return true;
  return (mask & U_GC_CN_MASK) && in_table(kNewerLetters, cp);
}

bool is_number(char32_t cp) {
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_N_MASK) return true;
  return (mask & U_GC_CN_MASK) && in_table(kNewerNumbers, cp);
}

bool is_whitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(cp)) != 0;
}

std::string nfc(std::string_view text) {
  // ASCII is always NFC; most pre-tokenized text takes this path.
  bool ascii = true;
  for (char ch : text) {
    if (static_cast<unsigned char>(ch) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);
  std::string out;
  std::size_t start = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t len = 0;
    const char32_t cp = decode_at(text, pos, len);
    if (cp >= 0x7FD && in_table(kRustNormalizerStarters, cp)) {
      out += icu_nfc(text.substr(start, pos - start));
      out.append(text.data() + pos, len);
      start = pos + len;
    }
    pos += len;
  }
  out += icu_nfc(text.substr(start));
  return out;
}

std::string nfc_aligned(std::string_view text, std::vector<ByteRange>& origins) {
  const icu::Normalizer2& nfc = nfc_instance();
  // Decompose, then put each run of marks in canonical order (stable by class).
  std::vector<NormalizingChar> chars;
  chars.reserve(text.size());
  std::size_t run_start = 0;  // first mark of the run not yet ordered
  const auto order_run = [&](std::size_t end) {
    std::stable_sort(chars.begin() + static_cast<std::ptrdiff_t>(run_start), chars.begin() + static_cast<std::ptrdiff_t>(end),
                     [](const NormalizingChar& a, const NormalizingChar& b) { return a.ccc < b.ccc; });
  };
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t len = 0;
    const char32_t cp = decode_at(text, pos, len);
    pos += len;
    const std::size_t first = chars.size();
    decompose(nfc, cp, chars);
    for (std::size_t i = first; i < chars.size(); ++i) {
      if (chars[i].ccc != 0) continue;
      order_run(i);
      run_start = i + 1;
    }
  }
  order_run(chars.size());
  const std::vector<NormalizingChar> composed = recompose(nfc, chars);

  // Walk the input by position, as NormalizedString::transform does.
  std::string out;
  out.reserve(text.size());
  origins.clear();
  origins.reserve(text.size());
  std::size_t pos = 0;  // next input byte no output character has claimed
  const auto char_len = [&](std::size_t at) {
    std::size_t len = 0;
    if (at < text.size()) decode_at(text, at, len);
    return len;
  };
  for (const NormalizingChar& c : composed) {
    ByteRange origin;
    if (c.change > 0) {  // inserted: shares the range of the input character before it
      if (pos > 0) {
        std::size_t start = pos - 1;
        while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        origin = {start, pos};
      }
    } else {
      origin = {pos, pos + char_len(pos)};
      pos = origin.end;
      for (int k = 0; k < -c.change; ++k) pos += char_len(pos);
    }
    const std::size_t before = out.size();
    append_utf8(out, c.cp);
    origins.insert(origins.end(), out.size() - before, origin);
  }
  return out;
}

namespace {

std::string lossy(std::string_view bytes, std::vector<std::size_t>* source_positions) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::size_t before = out.size();
    const SequenceCheck c = check_sequence(bytes, pos);
    std::size_t consumed = 0;
    if (c.need != 0 && c.valid_len == c.need) {
      out.append(bytes.data() + pos, c.need);
      consumed = c.need;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal invalid subpart
      consumed = c.valid_len == 0 ? 1 : c.valid_len;
    }
    if (source_positions) source_positions->insert(source_positions->end(), out.size() - before, pos);
    pos += consumed;
  }
  if (source_positions) source_positions->push_back(bytes.size());
  return out;
}

}  // namespace

std::string utf8_lossy(std::string_view bytes) { return lossy(bytes, nullptr); }

std::string utf8_lossy(std::string_view bytes, std::vector<std::size_t>& source_positions) {
  source_positions.clear();
  return lossy(bytes, &source_positions);
}

std::size_t incomplete_utf8_tail(std::string_view bytes) {
  // A sequence is at most 4 bytes, so only the last 3 can start an unfinished one.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const std::size_t pos = n - back;
    const auto b = static_cast<unsigned char>(bytes[pos]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const SequenceCheck c = check_sequence(bytes, pos);
    return (c.need > back && c.valid_len == back) ? back : 0;
  }
  return 0;
}

}  // namespace luka::unicode
