// ggml tensor types: block sizes and byte sizes, and dequantization of the supported ones into
// float. Block layouts follow ggml's (ggml-common.h); every block starts with its fp16 scale(s)
// except Q6_K, which ends with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/util/half.h"

namespace luka::gguf {

enum class GgmlType : std::uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35,
};

// Name as llama.cpp prints it ("Q4_K", "BF16"); "type 123" for numbers ggml never used.
const char* type_name(GgmlType type);
std::string type_label(std::uint32_t raw);

struct TypeTraits {
  std::int64_t block_elements;  // values per block (1 for plain types)
  std::int64_t block_bytes;     // bytes per block
};
// Block geometry of every type ggml defines (so the reader can size any tensor); nullopt for
// numbers that are no ggml type.
std::optional<TypeTraits> type_traits(std::uint32_t raw);

// True for the types `dequantize` handles: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K.
bool can_dequantize(GgmlType type);

// Decodes `blocks` consecutive blocks of `type` at `src` into `dst` (blocks × block_elements
// floats). The arithmetic is ggml's reference dequantization, in the same order.
void dequantize(GgmlType type, const void* src, std::int64_t blocks, float* dst);

// bfloat16 bit patterns to float (exact); half: core/util/half.h.
float bf16_to_float(std::uint16_t b);

}  // namespace luka::gguf
