// A token's bytes as text to draw: in the Studio's panels and on figure axes. Byte-level BPE
// tokens need not be whole characters (an emoji or a rare CJK character is often split over two
// or three tokens), so a piece is shown as what it is rather than as U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace luka::viz {

struct TokenTextOptions {
  // At most this many characters (an escape counts as one), the last one then being "…"; 0: all.
  std::size_t max_chars = 0;
  // Code points above this are written <U+XXXX>: for renderers that cannot draw them (Dear
  // ImGui built with 16-bit ImWchar draws nothing beyond U+FFFF).
  char32_t max_code_point = 0x10FFFF;
  // For renderers that draw code points left to right one glyph each (Dear ImGui, cairo's toy
  // text): Arabic letters take their joined forms (presentation forms, as ICU shapes them) and
  // right-to-left runs (Arabic, Hebrew) are put in visual order (ICU's bidi algorithm).
  bool visual_order = false;
  // Code points above max_code_point that the renderer draws under another code point (the
  // Studio's emoji, placed in the private use area): written as that one instead of <U+XXXX>.
  // Real private-use code points are then escaped, so a glyph there is never ambiguous.
  const std::unordered_map<char32_t, char32_t>* substitutes = nullptr;
};

// Valid UTF-8 passes through; each byte of an invalid or unfinished sequence (a lone continuation
// byte, a truncated lead, an overlong form, a surrogate) becomes <0xNN>; newline, tab and carriage
// return become \n, \t, \r, other C0 controls and DEL <0xNN>, C1 controls <U+0080>..<U+009F>.
// The length limit applies before shaping and reordering.
std::string token_text(std::string_view bytes, const TokenTextOptions& options = {});

}  // namespace luka::viz
