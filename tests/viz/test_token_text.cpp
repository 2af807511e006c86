// Token pieces as display text: whole characters pass through, the bytes of partial or invalid
// UTF-8 sequences are written <0xNN>, controls are escaped, and the length limit counts characters.
#include <gtest/gtest.h>

#include "viz/token_text.h"

namespace {

using luka::viz::token_text;
using luka::viz::TokenTextOptions;

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

}  // namespace
