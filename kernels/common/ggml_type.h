// The ggml tensor type ids that GGUF files store, their names and their block geometry (values and
// bytes per block), written once: what the GGUF reader sizes tensors by (core/gguf/ggml_types.h,
// which adds the dequantization) and what the quantized CPU kernels (kernels/cpu/quant_gemv,
// decode_step) dispatch on. Namespace gguf: the numbers are the file format's. Standard library
// only (kernels/common).
#pragma once

#include <cstdint>

namespace luka::gguf {

enum class GgmlType : std::uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35,
};

// Values per block of the 32-wide types (Q4_0, Q8_0, ...) and per super-block of the K-quants.
constexpr std::int64_t kBlockValues = 32;
constexpr std::int64_t kSuperBlockValues = 256;

// Values and bytes per block; {1, bytes} for the plain types, {0, 0} for numbers that are no ggml
// type. The bytes are ggml's block structs (e.g. Q4_K: half d, half dmin, 12 bytes of scales, 128 of
// 4-bit values = 144).
struct BlockGeometry {
  std::int64_t values;
  std::int64_t bytes;
};
constexpr BlockGeometry block_geometry(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return {1, 4};
    case GgmlType::kF16: return {1, 2};
    case GgmlType::kQ4_0: return {kBlockValues, 18};
    case GgmlType::kQ4_1: return {kBlockValues, 20};
    case GgmlType::kQ5_0: return {kBlockValues, 22};
    case GgmlType::kQ5_1: return {kBlockValues, 24};
    case GgmlType::kQ8_0: return {kBlockValues, 34};
    case GgmlType::kQ8_1: return {kBlockValues, 36};
    case GgmlType::kQ2_K: return {kSuperBlockValues, 84};
    case GgmlType::kQ3_K: return {kSuperBlockValues, 110};
    case GgmlType::kQ4_K: return {kSuperBlockValues, 144};
    case GgmlType::kQ5_K: return {kSuperBlockValues, 176};
    case GgmlType::kQ6_K: return {kSuperBlockValues, 210};
    case GgmlType::kQ8_K: return {kSuperBlockValues, 292};
    case GgmlType::kIQ2_XXS: return {kSuperBlockValues, 66};
    case GgmlType::kIQ2_XS: return {kSuperBlockValues, 74};
    case GgmlType::kIQ3_XXS: return {kSuperBlockValues, 98};
    case GgmlType::kIQ1_S: return {kSuperBlockValues, 50};
    case GgmlType::kIQ4_NL: return {kBlockValues, 18};
    case GgmlType::kIQ3_S: return {kSuperBlockValues, 110};
    case GgmlType::kIQ2_S: return {kSuperBlockValues, 82};
    case GgmlType::kIQ4_XS: return {kSuperBlockValues, 136};
    case GgmlType::kI8: return {1, 1};
    case GgmlType::kI16: return {1, 2};
    case GgmlType::kI32: return {1, 4};
    case GgmlType::kI64: return {1, 8};
    case GgmlType::kF64: return {1, 8};
    case GgmlType::kIQ1_M: return {kSuperBlockValues, 56};
    case GgmlType::kBF16: return {1, 2};
    case GgmlType::kTQ1_0: return {kSuperBlockValues, 54};
    case GgmlType::kTQ2_0: return {kSuperBlockValues, 66};
  }
  return {0, 0};
}

// Name as llama.cpp prints it ("Q4_K", "BF16"); "?" for numbers ggml never used.
inline const char* type_name(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ4_0: return "Q4_0";
    case GgmlType::kQ4_1: return "Q4_1";
    case GgmlType::kQ5_0: return "Q5_0";
    case GgmlType::kQ5_1: return "Q5_1";
    case GgmlType::kQ8_0: return "Q8_0";
    case GgmlType::kQ8_1: return "Q8_1";
    case GgmlType::kQ2_K: return "Q2_K";
    case GgmlType::kQ3_K: return "Q3_K";
    case GgmlType::kQ4_K: return "Q4_K";
    case GgmlType::kQ5_K: return "Q5_K";
    case GgmlType::kQ6_K: return "Q6_K";
    case GgmlType::kQ8_K: return "Q8_K";
    case GgmlType::kIQ2_XXS: return "IQ2_XXS";
    case GgmlType::kIQ2_XS: return "IQ2_XS";
    case GgmlType::kIQ3_XXS: return "IQ3_XXS";
    case GgmlType::kIQ1_S: return "IQ1_S";
    case GgmlType::kIQ4_NL: return "IQ4_NL";
    case GgmlType::kIQ3_S: return "IQ3_S";
    case GgmlType::kIQ2_S: return "IQ2_S";
    case GgmlType::kIQ4_XS: return "IQ4_XS";
    case GgmlType::kI8: return "I8";
    case GgmlType::kI16: return "I16";
    case GgmlType::kI32: return "I32";
    case GgmlType::kI64: return "I64";
    case GgmlType::kF64: return "F64";
    case GgmlType::kIQ1_M: return "IQ1_M";
    case GgmlType::kBF16: return "BF16";
    case GgmlType::kTQ1_0: return "TQ1_0";
    case GgmlType::kTQ2_0: return "TQ2_0";
  }
  return "?";
}

}  // namespace luka::gguf
