// ChatML formatting against Hugging Face's apply_chat_template. The reference is rendered by
// tests/fixtures/chat_reference.py (transformers from the project's virtualenv) into the test
// work folder; without Python/transformers the comparison is skipped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/chat/chat_format.h"
#include "tests/core/tokenizer/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

// Renders the reference once per process (ctest runs each test in its own process, so an
// up-to-date file from an earlier run is reused). Returns an empty path and a reason on failure.
fs::path chat_reference(std::string& why_missing) {
  const fs::path out = fs::path(LUKA_TEST_WORK) / "chat_reference.json";
  const fs::path script = LUKA_CHAT_REFERENCE_SCRIPT;
  if (fs::exists(out) && fs::last_write_time(out) >= fs::last_write_time(script)) return out;
  if (!fs::exists(LUKA_PYTHON)) {
    why_missing = std::string("python not found at ") + LUKA_PYTHON;
    return {};
  }
  fs::create_directories(out.parent_path());
  const fs::path tmp = out.string() + ".tmp";
  const std::string cmd = "\"" + std::string(LUKA_PYTHON) + "\" \"" + script.string() + "\" \"" +
                          test::qwen3_dir().string() + "\" \"" + tmp.string() + "\"";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    why_missing = "reference script failed (exit " + std::to_string(rc) + ", transformers missing?): " + cmd;
    return {};
  }
  fs::rename(tmp, out);  // atomic, so a parallel test never reads half a file
  return out;
}

TEST(ChatFormat, MatchesTransformersApplyChatTemplate) {
  LUKA_REQUIRE_QWEN3();
  std::string why;
  const fs::path reference = chat_reference(why);
  if (reference.empty()) GTEST_SKIP() << why;
  const nlohmann::json cases = nlohmann::json::parse(std::ifstream(reference));
  ASSERT_GE(cases.size(), 3u);
  const bool hybrid = is_hybrid_thinking(test::qwen3()->config());
  ASSERT_TRUE(hybrid);
  for (const nlohmann::json& c : cases) {
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c.at("messages"))
      messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    ChatOptions options;
    options.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    options.enable_thinking = c.at("enable_thinking").get<bool>();
    EXPECT_EQ(format_chatml(messages, options, hybrid), c.at("text").get<std::string>())
        << "case " << c.at("name").get<std::string>();
  }
}

// The three scenarios the design names, spelled out (these strings match transformers too).
TEST(ChatFormat, Qwen3Basics) {
  ChatOptions no_thinking;
  EXPECT_EQ(format_chatml({{"user", "Hello!"}}, no_thinking, true),
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(format_chatml({{"system", "Be brief."}, {"user", "Hi"}}, no_thinking, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Earlier assistant turns lose their reasoning.
  EXPECT_EQ(format_chatml({{"user", "Hi"}, {"assistant", "<think>\nhm\n</think>\n\nHello"}, {"user", "Bye"}},
                          ChatOptions{true, true}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormat, PlainChatMLForNonHybridModels) {
  // enable_thinking means nothing to a model whose template doesn't know it.
  EXPECT_EQ(format_chatml({{"user", "Hi"}, {"assistant", "<think>x</think>Yo"}}, ChatOptions{true, false}, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>x</think>Yo<|im_end|>\n"
            "<|im_start|>assistant\n");
  TokenizerConfig config;
  EXPECT_FALSE(is_hybrid_thinking(config));
  config.chat_template = "{%- if enable_thinking is defined and enable_thinking is false %}";
  EXPECT_TRUE(is_hybrid_thinking(config));
}

}  // namespace
}  // namespace luka
