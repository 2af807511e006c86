#include "viz/token_text.h"

#include <unicode/ubidi.h>
#include <unicode/ushape.h>
#include <unicode/ustring.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "core/tokenizer/unicode.h"

namespace luka::viz {

namespace {

std::string escape(const char* format, unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

bool has_right_to_left(std::string_view text) {
  for (std::size_t pos = 0, len = 0; pos < text.size(); pos += len) {
    const char32_t cp = unicode::decode_at(text, pos, len);
    if ((cp >= 0x0590 && cp <= 0x08FF) || (cp >= 0xFB1D && cp <= 0xFDFF) || (cp >= 0xFE70 && cp <= 0xFEFF)) return true;
  }
  return false;
}

// Valid UTF-8 in (token_text's output); on any ICU error the text is returned as it was.
std::string shape_and_reorder(const std::string& text) {
  UErrorCode err = U_ZERO_ERROR;
  int32_t n = 0;
  std::vector<UChar> logical(text.size() + 1);
  u_strFromUTF8(logical.data(), static_cast<int32_t>(logical.size()), &n, text.data(), static_cast<int32_t>(text.size()), &err);
  // Joined letter forms first (shaping needs logical order); lam + alef become their ligature.
  std::vector<UChar> shaped(static_cast<std::size_t>(n) * 2 + 1);
  const int32_t m = u_shapeArabic(logical.data(), n, shaped.data(), static_cast<int32_t>(shaped.size()),
                                  U_SHAPE_LETTERS_SHAPE | U_SHAPE_LENGTH_GROW_SHRINK | U_SHAPE_TEXT_DIRECTION_LOGICAL, &err);
  if (U_FAILURE(err)) return text;
  const std::unique_ptr<UBiDi, void (*)(UBiDi*)> bidi(ubidi_open(), ubidi_close);
  ubidi_setPara(bidi.get(), shaped.data(), m, UBIDI_DEFAULT_LTR, nullptr, &err);
  std::vector<UChar> visual(static_cast<std::size_t>(m) * 2 + 1);
  // Marks stay after their base letter: the renderer draws a mark over the glyph before it.
  const int32_t v = ubidi_writeReordered(bidi.get(), visual.data(), static_cast<int32_t>(visual.size()),
                                         UBIDI_DO_MIRRORING | UBIDI_KEEP_BASE_COMBINING | UBIDI_REMOVE_BIDI_CONTROLS, &err);
  if (U_FAILURE(err)) return text;
  std::string out(static_cast<std::size_t>(v) * 3 + 1, '\0');
  int32_t bytes = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &bytes, visual.data(), v, &err);
  if (U_FAILURE(err)) return text;
  out.resize(static_cast<std::size_t>(bytes));
  return out;
}

std::string substitute(char32_t cp) {
  std::string s;
  unicode::append_utf8(s, cp);
  return s;
}

}  // namespace

std::string token_text(std::string_view bytes, const TokenTextOptions& options) {
  // One entry per shown character, so that the length limit never cuts a sequence or an escape.
  struct Shown {
    std::string text;
    bool escape;
  };
  std::vector<Shown> chars;
  for (std::size_t pos = 0, len = 0; pos < bytes.size(); pos += len) {
    const char32_t cp = unicode::decode_at(bytes, pos, len);
    const auto code = static_cast<unsigned>(cp);
    // decode_at gives a malformed byte as itself with length 1; a valid one-byte character is ASCII.
    if (len == 1 && cp >= 0x80) chars.push_back({escape("<0x%02X>", code), true});
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
  std::size_t shown = chars.size();
  const bool cut = options.max_chars > 0 && chars.size() > options.max_chars;
  if (cut) shown = options.max_chars - 1;
  // For reordering, each escape is a left-to-right isolate (U+2066 .. U+2069, removed again by
  // the reordering): it reads "<0xD9>" whichever text surrounds it.
  const bool reorder = options.visual_order && has_right_to_left(bytes);
  std::string out;
  for (std::size_t i = 0; i < shown; ++i)
    out += reorder && chars[i].escape ? "\xE2\x81\xA6" + chars[i].text + "\xE2\x81\xA9" : chars[i].text;
  if (cut) out += "\xE2\x80\xA6";  // …
  return reorder ? shape_and_reorder(out) : out;
}

}  // namespace luka::viz
