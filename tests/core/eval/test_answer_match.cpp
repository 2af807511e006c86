// Lenient exact match (core/eval/answer_match.h) on hand-written cases: the normalization step by
// step, the three ways to match, unanswerable questions and the empty-string guard.
#include <gtest/gtest.h>

#include "core/eval/answer_match.h"

using luka::eval::lenient_match;
using luka::eval::normalize_answer;

TEST(AnswerMatch, NormalizationLowersStripsPunctuationArticlesAndSpaces) {
  EXPECT_EQ(normalize_answer("The Eiffel Tower!"), "eiffel tower");
  EXPECT_EQ(normalize_answer("  A  cat,\tan apple;\nTHE end. "), "cat apple end");
  EXPECT_EQ(normalize_answer("don't"), "dont");
  EXPECT_EQ(normalize_answer("1,000.5"), "10005");
  EXPECT_EQ(normalize_answer("$5 + 3 = 8 <ok> ^`|~"), "5 3 8 ok");   // Python's string.punctuation symbols
  EXPECT_EQ(normalize_answer("\xE2\x80\x9Cquoted\xE2\x80\x9D \xE2\x80\x94 dash"), "quoted dash");  // “ ” — are Unicode punctuation
  EXPECT_EQ(normalize_answer("\xC3\x9C" "BER Stra\xC3\x9F" "e"), "\xC3\xBC" "ber stra\xC3\x9F" "e");  // Ü -> ü, ß stays
  // Articles are whole words only.
  EXPECT_EQ(normalize_answer("theater and anthem: a-ha"), "theater and anthem aha");
  EXPECT_EQ(normalize_answer("The"), "");
  EXPECT_EQ(normalize_answer(""), "");
}

TEST(AnswerMatch, EqualOrEitherContainsTheOther) {
  EXPECT_TRUE(lenient_match("Polish and French.", {"Polish and French"}));
  EXPECT_TRUE(lenient_match("Kerry received 252 votes", {"252"}));     // the prediction contains the gold answer
  EXPECT_TRUE(lenient_match("Gabriel", {"the angel Gabriel"}));        // the gold answer contains the prediction
  EXPECT_TRUE(lenient_match("car", {"scar"}));                         // containment is on characters, as specified
  EXPECT_FALSE(lenient_match("He was Polish", {"Polish and French"}));
  EXPECT_TRUE(lenient_match("632 CE", {"In 630", "632"}));             // any gold answer
  EXPECT_FALSE(lenient_match("631", {"630", "632"}));
}

TEST(AnswerMatch, UnanswerableAndEmptySidesScoreZero) {
  EXPECT_FALSE(lenient_match("I do not know", {}));
  EXPECT_FALSE(lenient_match("", {}));
  EXPECT_FALSE(lenient_match("", {"Gabriel"}));        // "" is inside every string
  EXPECT_FALSE(lenient_match("  the . ", {"a"}));      // both normalize to ""
  EXPECT_FALSE(lenient_match("Gabriel", {"!?"}));
  EXPECT_TRUE(lenient_match("Gabriel", {"!?", "gabriel"}));
}
