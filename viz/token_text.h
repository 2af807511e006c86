// A token's bytes as text to draw: in the Studio's panels and on figure axes. Byte-level BPE
// tokens need not be whole characters (an emoji or a rare CJK character is often split over two
// or three tokens), so a piece is shown as what it is rather than as U+FFFD.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

// Whether `text` has right-to-left letters (Hebrew, Arabic, their presentation forms): what
// visual_order and display_lines reorder.
bool has_right_to_left(std::string_view text);

// One line of display text, ready for a renderer that draws code points left to right.
struct VisualLine {
  std::string text;
  bool right_to_left = false;  // its paragraph reads right to left: align it to the right
};

// Read-only text of several lines (a prompt, generated text) for the same renderers as
// visual_order: each paragraph (split at '\n'; a tab shows as four spaces, a carriage return not
// at all) has its Arabic letters joined, is broken into lines at spaces so that
// width(line) <= max_width (a word wider than that between characters; max_width <= 0: no
// breaking), and each line is put in visual order with its paragraph's direction, so a wrapped
// right-to-left paragraph still starts on its first line. Breaking comes before reordering: a
// renderer that wrapped the reordered text would start such a paragraph with its last words.
// Other characters are written as token_text writes them (options' max_code_point and
// substitutes apply; max_chars and visual_order do not). Never for an editable buffer: the
// result is for drawing only.
std::vector<VisualLine> display_lines(std::string_view text, const std::function<float(std::string_view)>& width, float max_width,
                                      const TokenTextOptions& options = {});

}  // namespace luka::viz
