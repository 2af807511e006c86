// Shared helpers for the tokenizer tests: where the Qwen3 tokenizer lives, loaded once.
#pragma once

#include <filesystem>
#include <string>

#include "core/tokenizer/tokenizer.h"

namespace luka::test {

inline std::filesystem::path qwen3_dir() { return std::filesystem::path(LUKA_SHARED_DATA) / "qwen3-tokenizer"; }

// Loaded on first use; nullptr when the shared data folder is absent.
inline const Tokenizer* qwen3() {
  static const std::unique_ptr<Tokenizer> tokenizer = []() -> std::unique_ptr<Tokenizer> {
    if (!std::filesystem::exists(qwen3_dir() / "tokenizer.json")) return nullptr;
    return std::make_unique<Tokenizer>(Tokenizer::load(qwen3_dir()));
  }();
  return tokenizer.get();
}

}  // namespace luka::test

#define LUKA_REQUIRE_QWEN3()                                                                       \
  if (luka::test::qwen3() == nullptr)                                                              \
  GTEST_SKIP() << "Qwen3 tokenizer not found at " << (luka::test::qwen3_dir() / "tokenizer.json")  \
               << " (set LUKA_SHARED_DATA)"
