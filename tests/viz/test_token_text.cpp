// Token pieces as display text: whole characters pass through, the bytes of partial or invalid
// UTF-8 sequences are written <0xNN>, controls are escaped, and the length limit counts characters;
// text of several lines (display_lines) is broken to a width, shaped, and ordered line by line.
#include <gtest/gtest.h>

#include "viz/token_text.h"

namespace {

using luka::viz::display_lines;
using luka::viz::token_text;
using luka::viz::TokenTextOptions;
using luka::viz::VisualLine;

// Display text measured in code points (a fixed-width renderer): width of "abc" is 3.
float code_points(std::string_view s) {
  float n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> texts(const std::vector<VisualLine>& lines) {
  std::vector<std::string> out;
  for (const VisualLine& l : lines) out.push_back(l.text);
  return out;
}

TEST(TokenText, ValidUtf8PassesThrough) {
  EXPECT_EQ(token_text(" the"), " the");
  EXPECT_EQ(token_text("caf\xC3\xA9"), "caf\xC3\xA9");                          // é: 2 bytes
  EXPECT_EQ(token_text("\xE7\x81\xAF"), "\xE7\x81\xAF");                          // 灯: 3 bytes
  EXPECT_EQ(token_text("\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7"), "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7");  // مرحبا
  EXPECT_EQ(token_text("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");                  // U+1F600: 4 bytes
  EXPECT_EQ(token_text(""), "");
}

TEST(TokenText, TruncatedSequencesShowTheirBytes) {
  EXPECT_EQ(token_text("\xE2"), "<0xE2>");                      // the lead of a 3-byte sequence
  EXPECT_EQ(token_text("\xE2\x80"), "<0xE2><0x80>");            // two of its three bytes
  EXPECT_EQ(token_text("\xF0\x9F\x98"), "<0xF0><0x9F><0x98>");  // an emoji without its last byte
  EXPECT_EQ(token_text(" \xE7\x81"), " <0xE7><0x81>");          // a space, then a partial character
  // A character's last bytes: the next token of a split emoji.
  EXPECT_EQ(token_text("\x98\x80!"), "<0x98><0x80>!");
  // A truncated sequence followed by a whole one: only the broken bytes are escaped.
  EXPECT_EQ(token_text("\xE2\x80\xC3\xA9"), "<0xE2><0x80>\xC3\xA9");
}

TEST(TokenText, InvalidBytesShowAsBytes) {
  EXPECT_EQ(token_text("\x80"), "<0x80>");                      // lone continuation byte
  EXPECT_EQ(token_text("a\xBF" "b"), "a<0xBF>b");
  EXPECT_EQ(token_text("\xC0\xAF"), "<0xC0><0xAF>");            // overlong '/'
  EXPECT_EQ(token_text("\xE0\x80\xAF"), "<0xE0><0x80><0xAF>");  // overlong, 3 bytes
  EXPECT_EQ(token_text("\xED\xA0\x80"), "<0xED><0xA0><0x80>");  // a surrogate (U+D800)
  EXPECT_EQ(token_text("\xF4\x90\x80\x80"), "<0xF4><0x90><0x80><0x80>");  // above U+10FFFF
  EXPECT_EQ(token_text("\xFF\xFE"), "<0xFF><0xFE>");            // never valid
}

TEST(TokenText, ControlsAreEscaped) {
  EXPECT_EQ(token_text("a\nb"), "a\\nb");
  EXPECT_EQ(token_text("\t\r"), "\\t\\r");
  EXPECT_EQ(token_text(std::string("\x00\x1B\x7F", 3)), "<0x00><0x1B><0x7F>");
  EXPECT_EQ(token_text("\xC2\x85"), "<U+0085>");                // C1 NEXT LINE
}

TEST(TokenText, CodePointsAboveTheLimitAreNamed) {
  TokenTextOptions bmp;
  bmp.max_code_point = 0xFFFF;
  EXPECT_EQ(token_text("\xF0\x9F\x98\x80", bmp), "<U+1F600>");
  EXPECT_EQ(token_text("ok \xF0\x9F\x91\x8D\xE2\x9C\x94", bmp), "ok <U+1F44D>\xE2\x9C\x94");  // 👍 named, ✔ kept
}

TEST(TokenText, LengthLimitCountsCharacters) {
  TokenTextOptions o;
  o.max_chars = 4;
  EXPECT_EQ(token_text("abcd", o), "abcd");
  EXPECT_EQ(token_text("abcde", o), "abc\xE2\x80\xA6");
  // Never cuts inside a character or an escape.
  EXPECT_EQ(token_text("\xE7\x81\xAF\xE7\x81\xAF\xE7\x81\xAF\xE7\x81\xAF\xE7\x81\xAF", o), "\xE7\x81\xAF\xE7\x81\xAF\xE7\x81\xAF\xE2\x80\xA6");
  EXPECT_EQ(token_text("\xE2\x80\xE2\x80\xE2", o), "<0xE2><0x80><0xE2>\xE2\x80\xA6");
}

// Arabic and Hebrew for renderers without shaping or bidi: joined letter forms, visual order.
TEST(TokenText, VisualOrderShapesArabicAndReversesRightToLeftRuns) {
  TokenTextOptions o;
  o.visual_order = true;
  // Hebrew שלום (shin lamed vav final-mem) is drawn right to left: mem first.
  EXPECT_EQ(token_text("\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D", o), "\xD7\x9D\xD7\x95\xD7\x9C\xD7\xA9");
  // Arabic بيت (beh yeh teh): initial beh FE91, medial yeh FEF4, final teh FE96, drawn right to left.
  EXPECT_EQ(token_text("\xD8\xA8\xD9\x8A\xD8\xAA", o), "\xEF\xBA\x96\xEF\xBB\xB4\xEF\xBA\x91");
  // Lam + alef is one ligature (FEFB); a lone letter keeps its isolated form (FE8F for beh).
  EXPECT_EQ(token_text("\xD9\x84\xD8\xA7", o), "\xEF\xBB\xBB");
  EXPECT_EQ(token_text("\xD8\xA8", o), "\xEF\xBA\x8F");
  // In left-to-right text only the right-to-left run turns; escapes and Latin stay in place.
  EXPECT_EQ(token_text("a \xD7\xA9\xD7\x9C <\xD7", o), "a \xD7\x9C\xD7\xA9 <<0xD7>");
  // Without the option nothing moves.
  EXPECT_EQ(token_text("\xD8\xA8\xD9\x8A\xD8\xAA"), "\xD8\xA8\xD9\x8A\xD8\xAA");
}

// Emoji the renderer holds at private-use code points are written there; other code points above
// the limit stay named, and real private-use characters are named too, so a glyph is never ambiguous.
TEST(TokenText, SubstitutesTakeTheirPrivateUseCodePoints) {
  const std::unordered_map<char32_t, char32_t> at{{0x1F600, 0xE000}, {0x1F680, 0xE001}};
  TokenTextOptions o;
  o.max_code_point = 0xFFFF;
  o.substitutes = &at;
  EXPECT_EQ(token_text("\xF0\x9F\x98\x80!", o), "\xEE\x80\x80!");         // U+1F600 -> U+E000
  EXPECT_EQ(token_text("\xF0\x9F\x9A\x80", o), "\xEE\x80\x81");           // U+1F680 -> U+E001
  EXPECT_EQ(token_text("\xF0\x9F\x98\x81", o), "<U+1F601>");                 // not held: named
  EXPECT_EQ(token_text("\xEE\x80\x80", o), "<U+E000>");                      // a real U+E000
  EXPECT_EQ(token_text("\xF0\x9F\x98", o), "<0xF0><0x9F><0x98>");            // partial: still bytes
  o.max_chars = 2;
  EXPECT_EQ(token_text("\xF0\x9F\x98\x80\xF0\x9F\x9A\x80", o), "\xEE\x80\x80\xEE\x80\x81");  // one character each
}

// Read-only text of several lines: broken at spaces to the width, paragraphs kept, and the
// characters token_text escapes escaped, except that a tab is spaces and a carriage return nothing.
TEST(TokenText, DisplayLinesBreakAtSpacesAndKeepParagraphs) {
  using V = std::vector<std::string>;
  EXPECT_EQ(texts(display_lines("the quick brown fox", code_points, 10)), (V{"the quick", "brown fox"}));
  EXPECT_EQ(texts(display_lines("the quick brown fox", code_points, 0)), (V{"the quick brown fox"}));  // no breaking
  EXPECT_EQ(texts(display_lines("a  b", code_points, 1)), (V{"a", "b"}));  // spaces start no line
  EXPECT_EQ(texts(display_lines("  indented", code_points, 20)), (V{"  indented"}));
  EXPECT_EQ(texts(display_lines("abcdefghij", code_points, 4)), (V{"abcd", "efgh", "ij"}));  // a word wider than a line
  EXPECT_EQ(texts(display_lines("a\r\n\nb\tc\xE2", code_points, 40)), (V{"a", "", "b    c<0xE2>"}));
  EXPECT_EQ(texts(display_lines("", code_points, 40)), (V{""}));
  TokenTextOptions bmp;
  bmp.max_code_point = 0xFFFF;
  EXPECT_EQ(texts(display_lines("ok \xF0\x9F\x98\x80", code_points, 40, bmp)), (V{"ok <U+1F600>"}));
  for (const VisualLine& l : display_lines("plain\ntext", code_points, 40)) EXPECT_FALSE(l.right_to_left);
}

// Arabic joined over the whole text (not token by token), right-to-left paragraphs in visual order
// line by line: a wrapped Hebrew or Arabic paragraph starts with its first words, on its first line.
TEST(TokenText, DisplayLinesShapeArabicAndOrderEachLineOfARightToLeftParagraph) {
  // بيت: initial beh FE91, medial yeh FEF4, final teh FE96, drawn right to left.
  const auto bayt = display_lines("\xD8\xA8\xD9\x8A\xD8\xAA", code_points, 40);
  ASSERT_EQ(bayt.size(), 1u);
  EXPECT_EQ(bayt[0].text, "\xEF\xBA\x96\xEF\xBB\xB4\xEF\xBA\x91");
  EXPECT_TRUE(bayt[0].right_to_left);
  // في البيت (in the house): feh initial FED3 + yeh final FEF2; alef isolated FE8D, lam initial
  // FEDF, beh medial FE92, yeh medial FEF4, teh final FE96; the second word drawn left of the first.
  const auto fi_albayt = display_lines("\xD9\x81\xD9\x8A \xD8\xA7\xD9\x84\xD8\xA8\xD9\x8A\xD8\xAA", code_points, 40);
  ASSERT_EQ(fi_albayt.size(), 1u);
  EXPECT_EQ(fi_albayt[0].text, "\xEF\xBA\x96\xEF\xBB\xB4\xEF\xBA\x92\xEF\xBB\x9F\xEF\xBA\x8D \xEF\xBB\xB2\xEF\xBB\x93");
  // שלום עולם broken after its first word: line 1 is שלום (mem first), line 2 עולם. Reordering
  // the whole paragraph and then breaking it would put עולם on line 1.
  const auto hebrew = display_lines("\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD7\xA2\xD7\x95\xD7\x9C\xD7\x9D", code_points, 5);
  ASSERT_EQ(hebrew.size(), 2u);
  EXPECT_EQ(hebrew[0].text, "\xD7\x9D\xD7\x95\xD7\x9C\xD7\xA9");
  EXPECT_EQ(hebrew[1].text, "\xD7\x9D\xD7\x9C\xD7\x95\xD7\xA2");
  EXPECT_TRUE(hebrew[0].right_to_left && hebrew[1].right_to_left);
  // A left-to-right paragraph keeps its order; only the Arabic word inside it turns.
  const auto mixed = display_lines("see \xD8\xA8\xD9\x8A\xD8\xAA here\n\xD8\xA8\xD9\x8A\xD8\xAA \xD8", code_points, 40);
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[0].text, "see \xEF\xBA\x96\xEF\xBB\xB4\xEF\xBA\x91 here");
  EXPECT_FALSE(mixed[0].right_to_left);
  // A right-to-left paragraph with an escape: the escape reads left to right, at the visual left.
  EXPECT_TRUE(mixed[1].right_to_left);
  EXPECT_EQ(mixed[1].text, "<0xD8> \xEF\xBA\x96\xEF\xBB\xB4\xEF\xBA\x91");
}

}  // namespace

