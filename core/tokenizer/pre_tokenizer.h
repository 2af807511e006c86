// Pre-tokenizers: split normalized text into the words BPE merges within. tokenizer.json names a
// Split regex; each pattern we support has a hand-written matcher (std::regex lacks \p{..} and
// the lookahead), chosen by the exact pattern string.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace luka {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;

  // Appends the pieces of `text` (valid UTF-8) to `out`, covering it entirely, in order
  // (the Split "Isolated" behaviour: matches and the gaps between them are both pieces).
  virtual void split(std::string_view text, std::vector<std::string_view>& out) const;

  // The matcher for `pattern`; throws luka::Error naming `file` for a pattern we don't know.
  static std::unique_ptr<PreTokenizer> for_pattern(const std::string& pattern,
                                                   const std::filesystem::path& file);

 protected:
  // Length in bytes of the match starting exactly at `pos`, or 0 when none starts there.
  virtual std::size_t match_at(std::string_view text, std::size_t pos) const = 0;
};

// The Qwen2/Qwen3 pattern (GPT-4 style, one digit per number piece):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
class Qwen2PreTokenizer : public PreTokenizer {
 public:
  static const char* pattern();

 protected:
  std::size_t match_at(std::string_view text, std::size_t pos) const override;
};

// GPT-2's pattern, as the ByteLevel pre-tokenizer applies it with use_regex=true:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
class Gpt2PreTokenizer : public PreTokenizer {
 protected:
  std::size_t match_at(std::string_view text, std::size_t pos) const override;
};

// Digits(individual_digits=true) before another pre-tokenizer (SmolLM2, llama.cpp's "smollm"):
// every \p{N} character is a piece of its own; the text between them goes to `inner`.
class IndividualDigitsPreTokenizer : public PreTokenizer {
 public:
  explicit IndividualDigitsPreTokenizer(std::unique_ptr<PreTokenizer> inner) : inner_(std::move(inner)) {}
  void split(std::string_view text, std::vector<std::string_view>& out) const override;

 protected:
  std::size_t match_at(std::string_view, std::size_t) const override { return 0; }

 private:
  std::unique_ptr<PreTokenizer> inner_;
};

// The pre-tokenizer llama.cpp names in a GGUF's `tokenizer.ggml.pre`; throws luka::Error naming
// `where` for names we do not implement. `nfc` says whether the Hugging Face tokenizer of that
// family normalizes to NFC first.
std::unique_ptr<PreTokenizer> pre_tokenizer_for_gguf(const std::string& name, const std::string& where, bool& nfc);

}  // namespace luka
