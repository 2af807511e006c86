// GPT-2's byte-level alphabet: every byte maps to a printable code point so BPE vocabularies
// can be stored as text. Printable Latin-1 bytes map to themselves, the rest to U+0100 onward.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace luka::byte_level {

// The UTF-8 text of the code point byte `b` maps to.
const std::string& byte_to_text(unsigned char b);

// The inverse: the bytes a byte-level token stands for; nullopt when `token` contains a
// character outside the alphabet.
std::optional<std::string> text_to_bytes(std::string_view token);

}  // namespace luka::byte_level
