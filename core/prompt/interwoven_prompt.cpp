#include "core/prompt/interwoven_prompt.h"

#include <algorithm>
#include <array>

namespace luka {

AssembledPrompt assemble(const InterwovenPrompt& prompt) {
  AssembledPrompt out;
  for (std::size_t i = 0; i < prompt.segments.size(); ++i) {
    if (i > 0) out.text += prompt.separator;
    const std::size_t begin = out.text.size();
    out.text += prompt.segments[i].text;
    out.spans.push_back({static_cast<int>(i), begin, out.text.size()});
  }
  if (!prompt.question.empty()) {
    if (!prompt.segments.empty()) out.text += prompt.separator;
    out.text += prompt.question;
  }
  return out;
}

std::vector<int> token_segments(const std::vector<TokenSpan>& tokens, const std::vector<SegmentSpan>& spans,
                                std::size_t text_offset) {
  std::vector<SegmentSpan> sorted = spans;
  std::sort(sorted.begin(), sorted.end(), [](const SegmentSpan& a, const SegmentSpan& b) { return a.begin < b.begin; });
  std::vector<int> out;
  out.reserve(tokens.size());
  for (const TokenSpan& token : tokens) {
    int segment = -1;
    if (token.end > token.begin && token.begin >= text_offset) {
      const std::size_t pos = token.begin - text_offset;
      // The last span starting at or before pos is the only one that can hold it.
      const auto after = std::upper_bound(sorted.begin(), sorted.end(), pos,
                                          [](std::size_t p, const SegmentSpan& s) { return p < s.begin; });
      if (after != sorted.begin() && pos < (after - 1)->end) segment = (after - 1)->segment;
    }
    out.push_back(segment);
  }
  return out;
}

const std::string& default_topic_colour(int topic) {
  static const std::array<std::string, 8> palette = {"#0072b2", "#e69f00", "#009e73", "#cc79a7",
                                                     "#56b4e9", "#d55e00", "#f0e442", "#999999"};
  const int n = static_cast<int>(palette.size());
  return palette[static_cast<std::size_t>(((topic % n) + n) % n)];
}

int topic_index(char letter) { return letter >= 'A' && letter <= 'Z' ? letter - 'A' : -1; }

std::string question_topic_label(const InterwovenPrompt& prompt) {
  if (prompt.question_topic == 0) return "";
  for (std::size_t i = 0; i < prompt.pattern.size() && i < prompt.segments.size(); ++i)
    if (prompt.pattern[i] == prompt.question_topic) return prompt.segments[i].label;
  return "";
}

}  // namespace luka
