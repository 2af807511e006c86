#include "core/chat/chat_format.h"

#include "core/tokenizer/tokenizer.h"

namespace luka {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Python's str.lstrip('\n') / rstrip('\n').
std::string lstrip_newlines(const std::string& s) {
  const std::size_t i = s.find_first_not_of('\n');
  return i == std::string::npos ? std::string() : s.substr(i);
}
std::string rstrip_newlines(const std::string& s) {
  const std::size_t i = s.find_last_not_of('\n');
  return i == std::string::npos ? std::string() : s.substr(0, i + 1);
}

// An assistant message split like Qwen3's template does: the reasoning is what lies between
// the last <think> before the first </think> and that </think>; the answer follows the last </think>.
struct AssistantTurn {
  std::string reasoning;
  std::string content;
};

AssistantTurn split_thinking(const std::string& message) {
  AssistantTurn turn{"", message};
  const std::string close = "</think>";
  const std::size_t first_close = message.find(close);
  if (first_close == std::string::npos) return turn;
  const std::size_t last_close = message.rfind(close);
  turn.content = lstrip_newlines(message.substr(last_close + close.size()));
  std::string before = rstrip_newlines(message.substr(0, first_close));
  const std::size_t open = before.rfind("<think>");
  if (open != std::string::npos) before = before.substr(open + 7);
  turn.reasoning = lstrip_newlines(before);
  return turn;
}

// Qwen3's template, without tools: earlier assistant turns lose their reasoning; assistant turns
// after the last real user query keep it (the final one always gets a think block).
void format_qwen3(const std::vector<ChatMessage>& messages, std::string& out) {
  const std::size_t n = messages.size();
  // The last user message that is not a wrapped tool response (n - 1 when there is none).
  std::size_t last_query = n == 0 ? 0 : n - 1;
  for (std::size_t i = n; i-- > 0;) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" && !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == n;
    if (m.role == "user" || m.role == "system") {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      const AssistantTurn turn = split_thinking(m.content);
      if (i > last_query && (last || !turn.reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n" + lstrip_newlines(rstrip_newlines(turn.reasoning)) +
               "\n</think>\n\n" + lstrip_newlines(turn.content);
      } else {
        out += "<|im_start|>assistant\n" + turn.content;
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      // Consecutive tool results share one user turn.
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // Other roles render nothing, as in the template.
  }
}

}  // namespace

bool is_hybrid_thinking(const TokenizerConfig& config) {
  return config.chat_template.find("enable_thinking") != std::string::npos;
}

std::optional<std::string> default_system_prompt(const TokenizerConfig& config) {
  const std::string& t = config.chat_template;
  const std::size_t branch = t.find("!= 'system'");
  if (branch == std::string::npos) return std::nullopt;
  const std::string open = "'<|im_start|>system\n";
  const std::size_t start = t.find(open, branch);
  const std::size_t block_end = t.find("{% endif %}", branch);
  if (start == std::string::npos || (block_end != std::string::npos && start > block_end)) return std::nullopt;
  const std::size_t text = start + open.size();
  const std::size_t end = t.find("<|im_end|>", text);
  if (end == std::string::npos) return std::nullopt;
  const std::string prompt = t.substr(text, end - text);
  // Only a plain literal: a template expression or quote inside means something we do not render.
  if (prompt.find_first_of("'{}") != std::string::npos) return std::nullopt;
  return prompt;
}

std::string format_chatml(const std::vector<ChatMessage>& input, const ChatOptions& options,
                          bool hybrid_thinking) {
  std::vector<ChatMessage> messages = input;
  if (options.default_system && !messages.empty() && messages.front().role != "system")
    messages.insert(messages.begin(), ChatMessage{"system", *options.default_system});
  std::string out;
  if (hybrid_thinking) {
    format_qwen3(messages, out);
  } else {
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (hybrid_thinking && !options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace luka
