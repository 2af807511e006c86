// Fuzz target for interwoven prompt files (core/prompt/prompt_file.cpp): any text must give a
// prompt or a luka::Error. A prompt that loads assembles into spans that hold its segments' text,
// and its pattern can be laid out again (reversed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/prompt/interwoven_prompt.h"
#include "core/prompt/prompt_file.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  luka::InterwovenPrompt prompt;
  try {
    prompt = luka::parse_prompt_file(std::string(reinterpret_cast<const char*>(data), size), "fuzz/prompt.json");
  } catch (const luka::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  const luka::AssembledPrompt assembled = luka::assemble(prompt);
  if (assembled.spans.size() != prompt.segments.size()) std::abort();
  for (std::size_t i = 0; i < assembled.spans.size(); ++i) {
    const luka::SegmentSpan& s = assembled.spans[i];
    if (s.end > assembled.text.size() || assembled.text.compare(s.begin, s.end - s.begin, prompt.segments[i].text) != 0)
      std::abort();
  }
  luka::apply_pattern(prompt, std::string(prompt.pattern.rbegin(), prompt.pattern.rend()));
  return 0;
}
