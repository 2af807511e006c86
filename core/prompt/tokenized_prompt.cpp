#include "core/prompt/tokenized_prompt.h"

#include "core/chat/chat_format.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace luka {

TokenizedPrompt tokenize_prompt(const Tokenizer& tokenizer, const std::string& body, const std::vector<PromptSegment>& segs,
                                const std::vector<SegmentSpan>& spans, bool chat, const std::string& system, std::size_t max_tokens) {
  TokenizedPrompt p;
  std::size_t offset = 0;
  p.text = body;
  if (chat) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", body});
    ChatOptions options;
    options.default_system = default_system_prompt(tokenizer.config());
    p.text = format_chatml(messages, options, is_hybrid_thinking(tokenizer.config()));
    // The user turn is inserted verbatim: its last occurrence is where the body starts.
    offset = p.text.rfind(body);
    if (offset == std::string::npos) fail("prompt", "chat formatting changed the prompt text; segments cannot be placed");
  }

  // The encoder stops past max_tokens; the tokens it gave are the first of the whole encoding.
  std::vector<TokenSpan> spans_tok = name_out_of_memory("prompt", "encoding a prompt of " + std::to_string(p.text.size()) + " bytes",
                                                         [&] { return tokenizer.encode_with_offsets(p.text, max_tokens); });
  // Tokenizers that ask for it (add_bos_token) start every sequence with BOS.
  if (const auto bos = tokenizer.sequence_bos(); bos && (spans_tok.empty() || spans_tok.front().id != *bos))
    spans_tok.insert(spans_tok.begin(), TokenSpan{*bos, 0, 0});
  if (spans_tok.size() > max_tokens) {
    // The encoder stopped at max_tokens + 1 tokens; a BOS put in front made one more.
    if (spans_tok.size() - max_tokens == 2) spans_tok.pop_back();
    p.complete = false;
  }
  if (spans_tok.empty()) fail("prompt", "the prompt encodes to no tokens");
  for (const TokenSpan& t : spans_tok) p.ids.push_back(t.id);
  p.segment.assign(spans_tok.size(), -1);
  if (!spans.empty()) {
    // A BOS token added in front covers no text: keep it out of every segment.
    std::vector<TokenSpan> real = spans_tok;
    for (TokenSpan& t : real)
      if (t.begin == t.end) t.begin = t.end = static_cast<std::size_t>(-1);
    const std::vector<int> seg = token_segments(real, spans, offset);
    for (std::size_t i = 0; i < seg.size(); ++i) p.segment[i] = seg[i];
    // Each segment's first and last token, in one pass over the tokens (linear in both counts).
    for (const PromptSegment& s : segs) p.segments.push_back(TokenSegment{s.label, s.colour, -1, -1});
    for (std::size_t i = 0; i < seg.size(); ++i) {
      if (seg[i] < 0 || static_cast<std::size_t>(seg[i]) >= p.segments.size()) continue;
      TokenSegment& out = p.segments[static_cast<std::size_t>(seg[i])];
      if (out.begin < 0) out.begin = static_cast<std::int64_t>(i);
      out.end = static_cast<std::int64_t>(i) + 1;
    }
    for (TokenSegment& out : p.segments)
      if (out.begin < 0) out.begin = out.end = 0;  // a segment no token starts in
  }
  return p;
}

}  // namespace luka
