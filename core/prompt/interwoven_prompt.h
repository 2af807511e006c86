// Interwoven prompts: segments of a few topics in a pattern such as ABAB (docs/design.md §7), joined into
// one text with each segment's byte span, and the segment every token of that text belongs to.
// The file formats are in docs/prompt-format.md; loaders in prompt_file.h, wikisalad.h, segments_file.h.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace luka {

struct PromptSegment {
  std::string label;   // the segment's topic, e.g. "Lighthouse log"
  std::string colour;  // "#rrggbb", lower case
  std::string text;
};

struct InterwovenPrompt {
  std::string title;
  std::string pattern;  // one letter per segment, same letter = same topic, e.g. "ABAB"
  std::vector<PromptSegment> segments;
  std::string question;  // optional text after the segments, part of no segment
  char question_topic = 0;  // the pattern letter of the topic the question asks about; 0: not said
  std::string separator = "\n\n";
};

// Segment `segment` occupies bytes [begin, end) of a text.
struct SegmentSpan {
  int segment;
  std::size_t begin, end;
};

struct AssembledPrompt {
  std::string text;
  std::vector<SegmentSpan> spans;  // one per segment, in order
};

// The label of the topic the question asks about (question_topic's segments' label); "" when the
// prompt does not say, or no segment has that letter.
std::string question_topic_label(const InterwovenPrompt& prompt);

// segments[0] + separator + segments[1] + ... and, when the question is not empty, separator +
// question. Separators and the question belong to no segment.
AssembledPrompt assemble(const InterwovenPrompt& prompt);

// The segment each token belongs to: the span holding the token's first byte, or -1 (separators,
// the question, chat template text, and tokens that cover no bytes, such as an inserted BOS). `text_offset` is where the spans' text starts in the text the
// tokens were encoded from (e.g. after a chat template prefix). Spans must not overlap.
std::vector<int> token_segments(const std::vector<TokenSpan>& tokens, const std::vector<SegmentSpan>& spans,
                                std::size_t text_offset = 0);

// The colour a topic gets when its file names none: a fixed colour-blind-safe qualitative palette
// (Okabe-Ito, black replaced by grey), by topic index (A = 0), wrapping after eight.
const std::string& default_topic_colour(int topic);

// The topic index of a pattern letter ('A' -> 0 ... 'Z' -> 25), or -1.
int topic_index(char letter);

}  // namespace luka
