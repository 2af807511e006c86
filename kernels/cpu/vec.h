// Small dense vector helpers for attention over selected rows (LuKA covers): fp32 queries against
// fp32 or bf16 rows, with fp32 accumulation. AVX-512 where the CPU has it (chosen at run time),
// plain loops elsewhere.
#pragma once

#include <cstdint>

#include <c10/util/BFloat16.h>

namespace luka::cpu {

float dot(const float* q, const float* k, std::int64_t d);
float dot(const float* q, const c10::BFloat16* k, std::int64_t d);
// y += a * x
void axpy(float a, const float* x, float* y, std::int64_t d);
void axpy(float a, const c10::BFloat16* x, float* y, std::int64_t d);

// The same over the rows of a cover, in one call: the rows at `rows + idx[i] * stride` for
// i < n. Each value is bit for bit what the one-row helpers give in a loop (out[i] = scale *
// dot(q, row_i); y += p[i] * row_i in order i), without a call per row, and y stays in registers.
void gather_dots(const float* q, const float* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n,
                 std::int64_t d, float scale, float* out);
void gather_dots(const float* q, const c10::BFloat16* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n,
                 std::int64_t d, float scale, float* out);
void gather_axpy(const float* p, const float* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n,
                 std::int64_t d, float* y);
void gather_axpy(const float* p, const c10::BFloat16* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n,
                 std::int64_t d, float* y);

}  // namespace luka::cpu
