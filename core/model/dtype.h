#pragma once

#include <string>
#include <string_view>

namespace luka {

// Compute dtypes. CPU computes in fp32 or bf16 (no fp16 matmul there); fp16 is for CUDA.
enum class DType { kF32, kBF16, kF16 };

const char* to_string(DType dtype);               // "fp32", "bf16", "fp16"
// Accepts fp32/float32, bf16/bfloat16, fp16/float16; throws luka::Error otherwise.
DType parse_dtype(std::string_view text);

}  // namespace luka
