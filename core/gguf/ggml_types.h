// ggml tensor types: block sizes and byte sizes, and dequantization of the supported ones into
// float. Block layouts follow ggml's (ggml-common.h); every block starts with its fp16 scale(s)
// except Q6_K, which ends with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/util/half.h"
#include "kernels/common/ggml_type.h"  // GgmlType and type_name(), which the CPU kernels dispatch on

namespace luka::gguf {

// type_name() for a raw number from a file: "type 123" for numbers ggml never used.
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

// The first of `blocks` consecutive blocks of `type` whose fp16 scale fields (d, and m or dmin
// where the type has one) are not finite, or -1. A block's values are small integers times these
// scales, so finite scales mean finite values: the check a load makes on blocks it keeps instead
// of dequantizing. Types without per-block scales (F32, F16, BF16) are not checked here.
std::int64_t first_nonfinite_block(GgmlType type, const void* src, std::int64_t blocks);

// bfloat16 bit patterns to float (exact); half: core/util/half.h.
float bf16_to_float(std::uint16_t b);

}  // namespace luka::gguf
