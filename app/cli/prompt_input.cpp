#include "app/cli/prompt_input.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "app/cli/args.h"
#include "core/chat/chat_format.h"
#include "core/prompt/interwoven_prompt.h"
#include "core/prompt/prompt_file.h"
#include "core/prompt/segments_file.h"
#include "core/prompt/wikisalad.h"
#include "core/run/run_loop.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::cli {

const char* const kPromptOptionsHelp =
    "prompts:\n"
    "  --prompt-file takes plain text, or an interwoven prompt when the file ends in .json (topics\n"
    "  with labels and colours, segments in a pattern like ABAB, a question; docs/prompt-format.md,\n"
    "  e.g. assets/prompts/demo.json). --segments gives a plain prompt a segment table. Token\n"
    "  segments come from the segments' byte spans through the tokenizer's offsets.";

void add_prompt_options(ArgParser& args) {
  args.option("prompt", "STR", "the prompt text")
      .option("prompt-file", "F", "read the prompt from a file (.json: an interwoven prompt)")
      .option("segments", "FILE", "segment table (JSON) for a plain --prompt / --prompt-file")
      .option("wikisalad", "FILE", "build the prompt from a WikiSalad example (with --example)")
      .option("example", "N", "the WikiSalad example, 0-based", 0)
      .range(0, 1000000)
      .flag("chat", "format the prompt as a chat turn (ChatML with the generation prompt)")
      .option("system", "STR", "system message (with --chat)");
}

namespace {

std::string read_text(const std::string& path) {
  std::string text = read_text_file(path, "prompt file");
  if (text.empty()) fail(path, "prompt file: the file is empty");  // else "the prompt encodes to no tokens", naming nothing
  return text;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

PromptInput build_prompt(const ArgParser& args, const Tokenizer& tokenizer, std::size_t max_tokens) {
  const int given = (args.has("prompt") ? 1 : 0) + (args.has("prompt-file") ? 1 : 0) + (args.has("wikisalad") ? 1 : 0);
  if (given != 1) throw UsageError("give exactly one of --prompt, --prompt-file, --wikisalad");
  if (args.has("system") && !args.get_flag("chat")) throw UsageError("--system needs --chat");
  if (args.has("example") && !args.has("wikisalad")) throw UsageError("--example needs --wikisalad");

  PromptInput p;
  std::string body;
  std::vector<PromptSegment> segs;
  std::vector<SegmentSpan> spans;
  if (args.has("wikisalad")) {
    const std::int64_t example = args.get_int("example");
    const InterwovenPrompt ip = from_wikisalad(args.get("wikisalad"), static_cast<int>(example));
    AssembledPrompt a = assemble(ip);
    body = std::move(a.text);
    segs = ip.segments;
    spans = std::move(a.spans);
    p.source = "wikisalad " + args.get("wikisalad") + " example " + std::to_string(example);
  } else if (args.has("prompt-file") && ends_with(args.get("prompt-file"), ".json")) {
    if (args.has("segments")) throw UsageError("--segments is for plain prompts (an interwoven .json has its own)");
    const InterwovenPrompt ip = load_prompt_file(args.get("prompt-file"));
    AssembledPrompt a = assemble(ip);
    body = std::move(a.text);
    segs = ip.segments;
    spans = std::move(a.spans);
    p.source = "interwoven " + args.get("prompt-file");
    p.question_topic = question_topic_label(ip);
  } else {
    body = args.has("prompt") ? args.get("prompt") : read_text(args.get("prompt-file"));
    p.source = args.has("prompt") ? "--prompt" : "file " + args.get("prompt-file");
    if (args.has("segments")) {
      SegmentTable t = load_segments_file(args.get("segments"), body);
      segs = std::move(t.segments);
      spans = std::move(t.spans);
    }
  }

  PromptInput out = tokenize_prompt(tokenizer, body, segs, spans, args.get_flag("chat"), args.get("system"), max_tokens);
  out.source = p.source;
  out.question_topic = p.question_topic;
  return out;
}

std::size_t prompt_token_limit(std::int64_t context, std::int64_t max_new_tokens) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, context - max_new_tokens + 1));
}

void check_prompt_context(const PromptInput& prompt, std::int64_t context, std::int64_t max_new_tokens) {
  const auto n = static_cast<std::int64_t>(prompt.ids.size());
  if (prompt.complete || n <= static_cast<std::int64_t>(prompt_token_limit(context, max_new_tokens))) {
    check_context(context, 0, n, max_new_tokens);
    return;
  }
  fail("run", "the prompt (more than " + std::to_string(n - 1) + " tokens) plus " + std::to_string(max_new_tokens) +
                  " new tokens exceeds the model's context of " + std::to_string(context) + " tokens");
}

}  // namespace luka::cli
