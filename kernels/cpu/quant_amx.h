// The AMX-INT8 multi-row product behind quant_gemm's amx path (kernels/cpu/quant_gemv.cpp):
// internal to kernels/cpu.
#pragma once

#include <cstdint>

#include "kernels/common/ggml_type.h"

namespace luka::cpu::detail {

// True for the weight types amx_gemm reads: Q4_0, Q4_1, Q8_0 and Q4_K (blocks of 32 values with
// one scale each, or Q4_K's 32-value sub-blocks with a scale and a min each).
bool amx_gemm_supports(gguf::GgmlType type);

// Y[r, o] = Σᵢ W[o, i] · X[r, i] for r < rows, o < out, with X's rows quantized as
// quantize_activation does for `type` (8 bits per 32 or 256 values). The caller has checked the
// type, `in` (a multiple of the block) and that the process holds the AMX tile state.
void amx_gemm(gguf::GgmlType type, const void* w, std::int64_t out, std::int64_t in, const float* x, std::int64_t rows,
              float* y);

}  // namespace luka::cpu::detail
