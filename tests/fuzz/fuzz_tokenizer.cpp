// Fuzz target for tokenizer.json (core/tokenizer): any text must give a Tokenizer or a luka::Error.
// A tokenizer that loads encodes a fixed sample and the input's first bytes: ids must be in the
// vocabulary and decode, encode_with_offsets must give the same ids with spans inside the text.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace {

void check_encoding(const luka::Tokenizer& tokenizer, std::string_view text) {
  const std::vector<std::int32_t> ids = tokenizer.encode(text);
  for (const std::int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
  (void)tokenizer.decode(ids);
  const std::vector<luka::TokenSpan> spans = tokenizer.encode_with_offsets(text);
  if (spans.size() != ids.size()) std::abort();
  for (std::size_t i = 0; i < spans.size(); ++i)
    if (spans[i].id != ids[i] || spans[i].begin > spans[i].end || spans[i].end > text.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    const luka::Tokenizer tokenizer = luka::Tokenizer::from_json_text(input, std::nullopt, "fuzz/tokenizer.json");
    check_encoding(tokenizer, "Hello, world! It's 2024: na\xc3\xafve caf\xc3\xa9 e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd\n\n\t<|im_end|>  x \xff\xfe");
    check_encoding(tokenizer, std::string_view(input).substr(0, std::min<std::size_t>(size, 64)));
  } catch (const luka::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
