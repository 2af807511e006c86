// A prompt turned into tokens with its segments: the text (after chat formatting), the ids, each
// token's segment and each segment's token span. The CLI's prompt options and the Studio's
// prompt panel both make one, and captures store it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/prompt/interwoven_prompt.h"
#include "core/prompt/token_segment.h"

namespace luka {

class Tokenizer;

struct TokenizedPrompt {
  std::string text;    // what is tokenized (after chat formatting)
  std::string source;  // how it was given, for a capture's manifest
  std::string question_topic;  // the label of the topic its question asks about ("" when not said)
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> segment;  // per token, -1 outside every segment
  std::vector<TokenSegment> segments; // token spans
  // false when encoding stopped at max_tokens: the prompt has more than max_tokens tokens and ids
  // (and segment) hold its first max_tokens + 1.
  bool complete = true;
};

// Tokenizes `body` (optionally as a chat turn, with a system message when not empty) and gives
// each token its segment from the byte `spans` of `segments` in body. A BOS token is added where
// the tokenizer asks for one. Throws luka::Error for a prompt that encodes to no tokens.
// `max_tokens` (the context, or a cut the caller makes anyway) stops the encoding once the prompt,
// BOS included, is known to be longer: a prompt of a million tokens costs no more to refuse than
// one just over the limit. Segments that start after the tokens kept get empty spans.
TokenizedPrompt tokenize_prompt(const Tokenizer& tokenizer, const std::string& body, const std::vector<PromptSegment>& segments,
                                const std::vector<SegmentSpan>& spans, bool chat, const std::string& system,
                                std::size_t max_tokens = SIZE_MAX);

}  // namespace luka
