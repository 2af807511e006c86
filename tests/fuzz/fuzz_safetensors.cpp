// Fuzz target for the safetensors header (core/model/safetensors.cpp): any byte string must parse
// or fail with a luka::Error. A tensor that parses must lie inside the input and span exactly the
// bytes its shape and dtype need.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/model/safetensors.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const luka::SafetensorsFile file = luka::SafetensorsFile::parse(data, size, "fuzz.safetensors");
    for (const auto& [name, t] : file.tensors()) {
      std::uint64_t elements = 1;
      for (const std::int64_t d : t.shape) elements *= static_cast<std::uint64_t>(d);
      if (elements * luka::safetensors_dtype_size(t.dtype) != t.nbytes) std::abort();
      if (t.data < data + 8 || t.nbytes > static_cast<std::size_t>(data + size - t.data)) std::abort();
      if (file.find(name) != &t) std::abort();
    }
  } catch (const luka::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
