// Fuzz target for the GGUF header parser: any byte string must either parse or fail with a
// luka::Error, never crash, hang or read outside the buffer. Parsed tensors are dequantized
// (first block of each) to prove their data lies inside the buffer.
//
// Built two ways: with libFuzzer when the compiler is clang (-fsanitize=fuzzer), and always with
// mutation_driver.cpp, a bounded random-mutation loop under AddressSanitizer and UBSan that
// ctest runs (tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/gguf/gguf.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = luka::gguf::File::parse(data, size, "fuzz");
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
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
