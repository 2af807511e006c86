// Byte-level BPE tokenizer read from a Hugging Face `tokenizer.json` (docs/design.md §4).
// No LibTorch here: `luka tokenize` needs only the tokenizer files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luka {

namespace gguf {
class File;
}

// What tokenizer_config.json (optional) adds: special token names and the chat template text.
struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::string chat_template;   // empty when absent
  bool add_bos_token = false;  // prompts start with the BOS token

  // A tokenizer_config.json's text; `where` names it in errors (luka::Error).
  static TokenizerConfig from_json_text(const std::string& text, const std::string& where);
};

// One token and the bytes [begin, end) of the encoded text it covers.
struct TokenSpan {
  std::int32_t id;
  std::size_t begin, end;
};

class Tokenizer {
 public:
  struct Impl;
  // `path` is a folder holding tokenizer.json (and optionally tokenizer_config.json), a
  // tokenizer.json file, or a GGUF file (its tokenizer.ggml.* metadata). Throws luka::Error
  // naming the file and the problem.
  static Tokenizer load(const std::filesystem::path& path);

  // The tokenizer of a tokenizer.json's text and, when given, its tokenizer_config.json's text;
  // `source` is the tokenizer.json they come from (named in errors, the config as its neighbour).
  static Tokenizer from_json_text(const std::string& tokenizer_json, const std::optional<std::string>& config_json,
                                  const std::filesystem::path& source);

  // The tokenizer in a GGUF's tokenizer.ggml.* metadata.
  static Tokenizer from_gguf(const gguf::File& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Encodes like the Rust `tokenizers` library with add_special_tokens=false: added tokens
  // (special or not) are split out of the raw text first, the rest is NFC-normalized,
  // pre-tokenized with the Split regex, byte-level mapped and merged by rank.
  std::vector<std::int32_t> encode(std::string_view text) const;

  // encode() with what each token covers, in bytes of `text`: the Rust library's offsets
  // (return_offsets_mapping, trim_offsets=false) in UTF-8 bytes instead of characters. Ranges refer
  // to the original text, before NFC; a token holding part of a multi-byte character covers the
  // whole character; an added token covers its match (with the whitespace lstrip/rstrip took).
  // Like the Rust library, NFC can leave gaps: a mark composed into the character before it
  // ("e" U+0301 -> "é") belongs to no token. Invalid UTF-8 is repaired as encode() does; a U+FFFD
  // token covers the invalid bytes it replaced.
  // With `max_tokens`, encoding stops as soon as there are more tokens than that: the result is
  // then the first max_tokens + 1 tokens of the whole encoding, and the words after them are never
  // merged (a prompt longer than the context is refused without encoding all of it).
  std::vector<TokenSpan> encode_with_offsets(std::string_view text, std::size_t max_tokens = SIZE_MAX) const;

  // The BOS token every sequence starts with when the tokenizer asks for one (add_bos_token, and
  // a BOS token it has); nothing otherwise. Prompts put it in front unless they start with it.
  std::optional<std::int32_t> sequence_bos() const;
  // `ids` with sequence_bos() in front, unless they are empty or already start with it.
  std::vector<std::int32_t> with_sequence_bos(std::vector<std::int32_t> ids) const;

  // Decodes ids to UTF-8 (invalid byte sequences become U+FFFD). Special tokens are kept.
  std::string decode(const std::vector<std::int32_t>& ids) const;

  // The raw bytes a token stands for (added tokens: their content).
  std::string token_bytes(std::int32_t id) const;
  // token_bytes of every id, 0 .. vocab_size() - 1.
  const std::vector<std::string>& all_token_bytes() const;

  // The token's string as written in the vocabulary (byte-level alphabet for normal tokens).
  const std::string& token_text(std::int32_t id) const;

  std::optional<std::int32_t> token_id(std::string_view token) const;
  bool is_special(std::int32_t id) const;

  // One past the largest id the tokenizer knows (vocab and added tokens).
  std::int32_t vocab_size() const;

  const TokenizerConfig& config() const;
  const std::filesystem::path& source() const;  // the tokenizer.json it was read from

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streams token ids to text, holding back an incomplete UTF-8 sequence until its last byte
// arrives, so a multi-byte character split across tokens is never printed as garbage.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  // Returns the text that became complete with this token (possibly empty).
  std::string push(std::int32_t id);
  // Returns what is left; an incomplete sequence becomes U+FFFD.
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace luka
