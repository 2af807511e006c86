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

}  // namespace luka::cpu
