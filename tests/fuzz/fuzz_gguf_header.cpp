// Fuzz target for the GGUF header parser (core/gguf/gguf.cpp) and what is read from a GGUF's
// metadata: the model config (core/model/gguf_config.cpp) and the tokenizer (tokenizer.ggml.*).
// Any byte string must either parse or fail with a luka::Error, never crash, hang or read outside
// the buffer. Parsed tensors are dequantized (first block of each) to prove their data lies inside
// the buffer; a tokenizer that loads encodes a sample.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/gguf/gguf.h"
#include "core/model/gguf_config.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::shared_ptr<const luka::gguf::File> file;
  try {
    file = luka::gguf::File::parse(data, size, "fuzz.gguf");
    for (const auto& [key, value] : file->metadata()) (void)value.size();
    (void)file->get_int_or("general.alignment");
    std::vector<float> out(256);
    for (const luka::gguf::TensorInfo& t : file->tensors()) {
      if (!luka::gguf::can_dequantize(t.type)) continue;
      const auto traits = *luka::gguf::type_traits(static_cast<std::uint32_t>(t.type));
      if (t.bytes < static_cast<std::uint64_t>(traits.block_bytes)) continue;
      luka::gguf::dequantize(t.type, t.data, 1, out.data());
    }
  } catch (const luka::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  try {
    (void)luka::config_from_gguf(*file);
  } catch (const luka::Error&) {
  }
  try {
    const luka::Tokenizer tokenizer = luka::Tokenizer::from_gguf(*file);
    const std::vector<std::int32_t> ids = tokenizer.encode("Hello, world! 123 caf\xc3\xa9\n<|im_end|> \xff");
    for (const std::int32_t id : ids)
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
    (void)tokenizer.decode(ids);
  } catch (const luka::Error&) {
  }
  return 0;
}
