#include "core/tokenizer/byte_level.h"

#include <unordered_map>

#include "core/tokenizer/unicode.h"

namespace luka::byte_level {
namespace {

struct Alphabet {
  std::array<std::string, 256> text;
  std::unordered_map<char32_t, unsigned char> byte_of;

  Alphabet() {
    char32_t next_free = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_free++;
      unicode::append_utf8(text[b], cp);
      byte_of.emplace(cp, static_cast<unsigned char>(b));
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

const std::string& byte_to_text(unsigned char b) { return alphabet().text[b]; }

std::optional<std::string> text_to_bytes(std::string_view token) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(token.size());
  std::size_t pos = 0;
  while (pos < token.size()) {
    std::size_t len = 0;
    const char32_t cp = unicode::decode_at(token, pos, len);
    const auto it = a.byte_of.find(cp);
    if (it == a.byte_of.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    pos += len;
  }
  return out;
}

}  // namespace luka::byte_level
