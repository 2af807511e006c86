// Fuzz target for tokenizer_config.json (core/tokenizer/tokenizer.cpp) and what the chat code reads
// from it (core/chat/chat_format.cpp: the default system prompt and thinking switch found in the
// chat template): any text must give a TokenizerConfig or a luka::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/chat/chat_format.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const luka::TokenizerConfig config = luka::TokenizerConfig::from_json_text(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz/tokenizer_config.json");
    luka::ChatOptions options;
    options.default_system = luka::default_system_prompt(config);
    const std::vector<luka::ChatMessage> messages = {{"user", "hi"}, {"assistant", "<think>a</think>b"}, {"user", "?"}};
    (void)luka::format_chatml(messages, options, luka::is_hybrid_thinking(config));
  } catch (const luka::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
