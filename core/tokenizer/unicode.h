// UTF-8 and Unicode helpers for the tokenizer: code point iteration, the character classes the
// pre-tokenizer regex needs, NFC and lossy decoding. Classes and NFC come from ICU.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace luka::unicode {

// Decodes the code point starting at `text[pos]`, sets `len` to its byte length. Input is assumed
// valid UTF-8 (callers validate first); a malformed byte decodes as itself with len 1.
char32_t decode_at(std::string_view text, std::size_t pos, std::size_t& len);

void append_utf8(std::string& out, char32_t cp);

// True when `text` is well-formed UTF-8 (no surrogates, no overlongs).
bool is_valid_utf8(std::string_view text);

// Regex classes as Oniguruma (the Rust tokenizers' engine, Unicode 16 tables) defines them:
// ICU 72's classes plus the letters and numbers assigned since Unicode 15.0.
bool is_letter(char32_t cp);      // \p{L}: Lu Ll Lt Lm Lo
bool is_number(char32_t cp);      // \p{N}: Nd Nl No
bool is_whitespace(char32_t cp);  // \s: the White_Space property

// NFC of valid UTF-8 as the Rust tokenizers compute it: ICU's, except that marks newer than the
// Rust normalizer's Unicode tables neither reorder nor compose (see unicode.cpp).
std::string nfc(std::string_view text);

// Input bytes [begin, end) that one output byte of a normalization stems from.
struct ByteRange {
  std::size_t begin = 0, end = 0;
};

// nfc() plus, for each byte of the result, the input bytes it stems from, as the Rust tokenizers'
// NormalizedString records them (the source of their offsets): output characters are matched to
// input characters by position, a composed character gets the range of its first input character
// only ("e" U+0301 -> "é" keeps "e"'s byte), and characters a decomposition adds share the range
// of the input character before them. Valid UTF-8 in.
std::string nfc_aligned(std::string_view text, std::vector<ByteRange>& origins);

// Bytes to UTF-8 like Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// The same, also giving for each byte of the result, and for its end, the position in `bytes` of
// the character or invalid subpart it came from.
std::string utf8_lossy(std::string_view bytes, std::vector<std::size_t>& source_positions);

// Length of the trailing bytes of `bytes` that begin a valid but unfinished UTF-8 sequence
// (0 when the text ends on a complete character or on bytes that can never complete).
std::size_t incomplete_utf8_tail(std::string_view bytes);

}  // namespace luka::unicode
