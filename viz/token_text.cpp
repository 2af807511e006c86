#include "viz/token_text.h"

#include <unicode/ubidi.h>
#include <unicode/ushape.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "core/tokenizer/unicode.h"

namespace luka::viz {

bool has_right_to_left(std::string_view text) {
  for (std::size_t pos = 0, len = 0; pos < text.size(); pos += len) {
    const char32_t cp = unicode::decode_at(text, pos, len);
    if ((cp >= 0x0590 && cp <= 0x08FF) || (cp >= 0xFB1D && cp <= 0xFDFF) || (cp >= 0xFE70 && cp <= 0xFEFF)) return true;
  }
  return false;
}

namespace {

std::string escape(const char* format, unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::vector<UChar> to_utf16(const std::string& text, UErrorCode& err) {
  int32_t n = 0;
  std::vector<UChar> out(text.size() + 1);
  u_strFromUTF8(out.data(), static_cast<int32_t>(out.size()), &n, text.data(), static_cast<int32_t>(text.size()), &err);
  out.resize(U_FAILURE(err) ? 0 : static_cast<std::size_t>(n));
  return out;
}

std::string to_utf8(const UChar* text, int32_t n, UErrorCode& err) {
  std::string out(static_cast<std::size_t>(n) * 3 + 1, '\0');
  int32_t bytes = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &bytes, text, n, &err);
  out.resize(U_FAILURE(err) ? 0 : static_cast<std::size_t>(bytes));
  return out;
}

// Joined letter forms (shaping needs logical order); lam + alef become their ligature.
std::vector<UChar> shape_arabic(const std::vector<UChar>& logical, UErrorCode& err) {
  const auto n = static_cast<int32_t>(logical.size());
  std::vector<UChar> shaped(static_cast<std::size_t>(n) * 2 + 1);
  const int32_t m = u_shapeArabic(logical.data(), n, shaped.data(), static_cast<int32_t>(shaped.size()),
                                  U_SHAPE_LETTERS_SHAPE | U_SHAPE_LENGTH_GROW_SHRINK | U_SHAPE_TEXT_DIRECTION_LOGICAL, &err);
  shaped.resize(U_FAILURE(err) ? 0 : static_cast<std::size_t>(m));
  return shaped;
}

// A paragraph or line set in `bidi`, in visual order. Marks stay after their base letter: the
// renderer draws a mark over the glyph before it.
std::string write_visual(UBiDi* bidi, int32_t length, UErrorCode& err) {
  std::vector<UChar> visual(static_cast<std::size_t>(length) * 2 + 1);
  const int32_t v = ubidi_writeReordered(bidi, visual.data(), static_cast<int32_t>(visual.size()),
                                         UBIDI_DO_MIRRORING | UBIDI_KEEP_BASE_COMBINING | UBIDI_REMOVE_BIDI_CONTROLS, &err);
  if (U_FAILURE(err)) return "";
  return to_utf8(visual.data(), v, err);
}

using Bidi = std::unique_ptr<UBiDi, void (*)(UBiDi*)>;

// Valid UTF-8 in (token_text's output); on any ICU error the text is returned as it was.
std::string shape_and_reorder(const std::string& text) {
  UErrorCode err = U_ZERO_ERROR;
  const std::vector<UChar> shaped = shape_arabic(to_utf16(text, err), err);
  if (U_FAILURE(err)) return text;
  const Bidi bidi(ubidi_open(), ubidi_close);
  ubidi_setPara(bidi.get(), shaped.data(), static_cast<int32_t>(shaped.size()), UBIDI_DEFAULT_LTR, nullptr, &err);
  const std::string out = write_visual(bidi.get(), static_cast<int32_t>(shaped.size()), err);
  return U_FAILURE(err) ? text : out;
}

std::string substitute(char32_t cp) {
  std::string s;
  unicode::append_utf8(s, cp);
  return s;
}

// One entry per shown character, so that the length limit never cuts a sequence or an escape.
struct Shown {
  std::string text;
  bool escape;
};

// `display`: text of several lines shown as text (a tab as four spaces, a carriage return not at
// all); the caller splits it at newlines first.
std::vector<Shown> shown_chars(std::string_view bytes, const TokenTextOptions& options, bool display) {
  std::vector<Shown> chars;
  for (std::size_t pos = 0, len = 0; pos < bytes.size(); pos += len) {
    const char32_t cp = unicode::decode_at(bytes, pos, len);
    const auto code = static_cast<unsigned>(cp);
    // decode_at gives a malformed byte as itself with length 1; a valid one-byte character is ASCII.
    if (len == 1 && cp >= 0x80) chars.push_back({escape("<0x%02X>", code), true});
    else if (display && cp == '\t') chars.push_back({"    ", false});
    else if (display && cp == '\r') continue;
    else if (cp == '\n') chars.push_back({"\\n", true});
    else if (cp == '\t') chars.push_back({"\\t", true});
    else if (cp == '\r') chars.push_back({"\\r", true});
    else if (cp < 0x20 || cp == 0x7F) chars.push_back({escape("<0x%02X>", code), true});
    else if (cp > options.max_code_point && options.substitutes && options.substitutes->count(cp))
      chars.push_back({substitute(options.substitutes->at(cp)), false});
    else if ((cp >= 0x80 && cp <= 0x9F) || cp > options.max_code_point || (options.substitutes && cp >= 0xE000 && cp <= 0xF8FF))
      chars.push_back({escape("<U+%04X>", code), true});
    else chars.push_back({std::string(bytes.substr(pos, len)), false});
  }
  return chars;
}

// For reordering, each escape is a left-to-right isolate (U+2066 .. U+2069, removed again by the
// reordering): it reads "<0xD9>" whichever text surrounds it.
const char* const kIsolate = "\xE2\x81\xA6";
const char* const kPopIsolate = "\xE2\x81\xA9";

}  // namespace

std::string token_text(std::string_view bytes, const TokenTextOptions& options) {
  const std::vector<Shown> chars = shown_chars(bytes, options, false);
  std::size_t shown = chars.size();
  const bool cut = options.max_chars > 0 && chars.size() > options.max_chars;
  if (cut) shown = options.max_chars - 1;
  const bool reorder = options.visual_order && has_right_to_left(bytes);
  std::string out;
  for (std::size_t i = 0; i < shown; ++i) out += reorder && chars[i].escape ? kIsolate + chars[i].text + kPopIsolate : chars[i].text;
  if (cut) out += "\xE2\x80\xA6";  // …
  return reorder ? shape_and_reorder(out) : out;
}

namespace {

// [begin, end) of each line of `u` (UTF-16): whole words while they fit, a word wider than a line
// between characters; a line never ends in spaces, and the spaces after it start no line.
std::vector<std::pair<int32_t, int32_t>> break_lines(const std::vector<UChar>& u, const std::function<float(std::string_view)>& width,
                                                     float max_width) {
  const auto n = static_cast<int32_t>(u.size());
  std::vector<std::pair<int32_t, int32_t>> lines;
  if (n == 0 || max_width <= 0) return {{0, n}};
  // The width of u[s, e) as drawn: without the isolates the reordering removes.
  const auto measure = [&](int32_t s, int32_t e) {
    std::vector<UChar> shown;
    for (int32_t i = s; i < e; ++i)
      if (u[static_cast<std::size_t>(i)] < 0x2066 || u[static_cast<std::size_t>(i)] > 0x2069) shown.push_back(u[static_cast<std::size_t>(i)]);
    UErrorCode err = U_ZERO_ERROR;
    return width(to_utf8(shown.data(), static_cast<int32_t>(shown.size()), err));
  };
  const auto space = [&](int32_t i) { return u[static_cast<std::size_t>(i)] == u' '; };
  for (int32_t s = 0; s < n;) {
    int32_t end = -1;  // after the last word that fits
    for (int32_t e = s + 1; e <= n; ++e) {
      if (!(e == n || (space(e) && !space(e - 1)))) continue;  // ends a word
      if (measure(s, e) > max_width) break;
      end = e;
    }
    if (end < 0) {  // the first word alone is too wide: as many characters as fit, at least one
      end = s;
      do {
        int32_t next = end;
        U16_FWD_1(u.data(), next, n);
        if (end > s && measure(s, next) > max_width) break;
        end = next;
      } while (end < n && !space(end));
    }
    lines.push_back({s, end});
    for (s = end; s < n && space(s);) ++s;
  }
  return lines;
}

void paragraph_lines(std::string_view para, const std::function<float(std::string_view)>& width, float max_width, const TokenTextOptions& options,
                     std::vector<VisualLine>& out) {
  const bool rtl = has_right_to_left(para);
  std::string logical;
  for (const Shown& c : shown_chars(para, options, true)) logical += rtl && c.escape ? kIsolate + c.text + kPopIsolate : c.text;
  UErrorCode err = U_ZERO_ERROR;
  std::vector<UChar> u = to_utf16(logical, err);
  if (rtl && U_SUCCESS(err)) {
    std::vector<UChar> shaped = shape_arabic(u, err);
    if (U_SUCCESS(err)) u = std::move(shaped);
  }
  const auto lines = break_lines(u, width, max_width);
  const auto logical_lines = [&] {  // left to right as stored: no right-to-left text, or ICU failed
    for (const auto& [s, e] : lines) {
      UErrorCode e8 = U_ZERO_ERROR;
      out.push_back({to_utf8(u.data() + s, e - s, e8), false});
    }
  };
  if (!rtl) return logical_lines();
  // The paragraph's direction and levels from the whole paragraph; each line reordered on its own.
  const Bidi para_bidi(ubidi_open(), ubidi_close), line_bidi(ubidi_open(), ubidi_close);
  err = U_ZERO_ERROR;
  ubidi_setPara(para_bidi.get(), u.data(), static_cast<int32_t>(u.size()), UBIDI_DEFAULT_LTR, nullptr, &err);
  if (U_FAILURE(err)) return logical_lines();
  const bool right_to_left = (ubidi_getParaLevel(para_bidi.get()) & 1) != 0;
  std::vector<VisualLine> visual;
  for (const auto& [s, e] : lines) {
    if (e == s) {
      visual.push_back({"", right_to_left});
      continue;
    }
    ubidi_setLine(para_bidi.get(), s, e, line_bidi.get(), &err);
    std::string text = write_visual(line_bidi.get(), e - s, err);
    if (U_FAILURE(err)) return logical_lines();
    visual.push_back({std::move(text), right_to_left});
  }
  out.insert(out.end(), visual.begin(), visual.end());
}

}  // namespace

std::vector<VisualLine> display_lines(std::string_view text, const std::function<float(std::string_view)>& width, float max_width,
                                      const TokenTextOptions& options) {
  std::vector<VisualLine> out;
  for (std::size_t start = 0;;) {
    const std::size_t nl = text.find('\n', start);
    paragraph_lines(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start), width, max_width, options, out);
    if (nl == std::string_view::npos) return out;
    start = nl + 1;
  }
}

}  // namespace luka::viz
