// The capture's consistency rules (captures/consistency.h) on hand-made tables: what each accepts
// and refuses, with the refusal naming the file and the part, worked out by hand from the rules in
// docs/capture-format.md.
#include <gtest/gtest.h>

#include <string>

#include "captures/consistency.h"
#include "core/util/error.h"

namespace luka::capture {
namespace {

// The message of the luka::Error that f throws ("" when it throws none).
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CaptureConsistency, LayoutLayersAndHeadsMustBeSortedAndInRange) {
  Layout l;
  l.num_layers = 4, l.num_heads = 2, l.layers = {0, 3}, l.heads = {0, 1}, l.page_size = {16, 16}, l.prompt_tokens = 10;
  EXPECT_EQ(refusal([&] { check_layout(l, "a.h5"); }), "");
  Layout unsorted = l;
  unsorted.layers = {3, 0};
  EXPECT_NE(refusal([&] { check_layout(unsorted, "a.h5"); }).find("a.h5: damaged capture: inconsistent /layout"),
            std::string::npos);
  Layout past = l;
  past.heads = {0, 2};
  EXPECT_NE(refusal([&] { check_layout(past, "a.h5"); }).find("recorded head out of range"), std::string::npos);
  Layout pages = l;
  pages.page_size = {16};
  EXPECT_NE(refusal([&] { check_layout(pages, "a.h5"); }).find("inconsistent /layout"), std::string::npos);
}

TEST(CaptureConsistency, AStepAttendsBetweenOneAndAllRecordedTokens) {
  EXPECT_EQ(refusal([] { check_step_tokens({11, 12}, 12, "a.h5"); }), "");
  EXPECT_NE(refusal([] { check_step_tokens({11, 13}, 12, "a.h5"); }).find("decode step 2 attends 13 tokens, outside the 12"),
            std::string::npos);
  EXPECT_NE(refusal([] { check_step_tokens({0}, 12, "a.h5"); }).find("decode step 1 attends 0"), std::string::npos);
}

TEST(CaptureConsistency, TokenPiecesTileTheBytesInOrder) {
  TokenColumns c;
  c.ids = {7, 8, 9}, c.segments = {0, 0, -1}, c.probs = {0.f, 0.f, 0.5f}, c.generated = {0, 0, 1};
  c.piece_end = {2, 2, 5}, c.pieces = "abcde";
  const std::vector<Token> t = tokens_from_columns(c, "a.h5");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].piece, "ab");
  EXPECT_EQ(t[1].piece, "");
  EXPECT_EQ(t[2].piece, "cde");
  EXPECT_TRUE(t[2].generated);
  EXPECT_EQ(t[2].prob, 0.5f);
  TokenColumns back = c;
  back.piece_end = {3, 2, 5};
  EXPECT_NE(refusal([&] { tokens_from_columns(back, "a.h5"); }).find("token pieces out of order"), std::string::npos);
  TokenColumns past = c;
  past.piece_end = {2, 2, 6};
  EXPECT_NE(refusal([&] { tokens_from_columns(past, "a.h5"); }).find("token pieces out of range"), std::string::npos);
  TokenColumns ragged = c;
  ragged.generated = {0, 0};
  EXPECT_NE(refusal([&] { tokens_from_columns(ragged, "a.h5"); }).find("columns differ"), std::string::npos);
}

TEST(CaptureConsistency, ASegmentIsASpanOfTheRecordedTokens) {
  SegmentColumns c;
  c.labels = {"A", "B"}, c.colours = {"#fff", "#000"}, c.begin = {0, 5}, c.end = {5, 12};
  EXPECT_EQ(segments_from_columns(c, 12, "a.h5").size(), 2u);
  SegmentColumns backwards = c;
  backwards.begin = {0, 7}, backwards.end = {5, 6};
  EXPECT_NE(refusal([&] { segments_from_columns(backwards, 12, "a.h5"); }).find("segment 1 spans tokens [7, 6)"),
            std::string::npos);
  EXPECT_NE(refusal([&] { segments_from_columns(c, 11, "a.h5"); }).find("not a span of the 11 recorded"), std::string::npos);
}

TEST(CaptureConsistency, PagesOfCompleteStepsAreSpansWithTheirMembersInside) {
  PageColumns c;
  c.start = {0, 4, 8}, c.end = {4, 8, 12}, c.created = {0, 1, 3};
  c.raw = {0, 1, 0}, c.member_end = {2, 6, 7}, c.members = {0, 2, 4, 5, 6, 7, 9};
  // Step 3 did not complete: its page is left out, whatever it holds.
  const std::vector<PageInfo> p = pages_from_columns(5, c, 2, /*complete_steps=*/2, /*num_tokens=*/12, "a.h5");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].members, (std::vector<std::int64_t>{0, 2}));
  EXPECT_TRUE(p[1].raw);
  // Version 1 has no member lists: every page holds its whole span.
  PageColumns v1;
  v1.start = c.start, v1.end = c.end, v1.created = c.created;
  EXPECT_TRUE(pages_from_columns(5, v1, 1, 3, 12, "a.h5")[2].members.empty());
  PageColumns outside = c;
  outside.members = {0, 5, 4, 5, 6, 7, 9};
  EXPECT_NE(refusal([&] { pages_from_columns(5, outside, 2, 2, 12, "a.h5"); }).find("page 0 lists positions outside"),
            std::string::npos);
  PageColumns past = c;
  past.end = {4, 13, 12};
  EXPECT_NE(refusal([&] { pages_from_columns(5, past, 2, 2, 12, "a.h5"); }).find("layer 5 page 1 spans tokens [4, 13)"),
            std::string::npos);
  PageColumns unordered = c;
  unordered.member_end = {2, 1, 7};
  EXPECT_NE(refusal([&] { pages_from_columns(5, unordered, 2, 2, 12, "a.h5"); }).find("member ends are not ascending"),
            std::string::npos);
}

}  // namespace
}  // namespace luka::capture
