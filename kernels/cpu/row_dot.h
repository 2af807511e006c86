// One weight row against one input row, fp32 accumulation: the inner loop of the one-row linear
// layers (gemv.cpp) and of the fused decode step (decode_step.cpp), written once so both give the
// same bits. AVX-512 where the CPU has it (callers check fast_gemv_available), a plain loop
// otherwise.
//
// One row at a time with two accumulators: a single sequential stream per thread. Interleaving
// several rows (independent accumulators per row) measured at less than half the read bandwidth
// on Zen 4, where row-at-a-time reaches it (bench/results/decode-cpu.md).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include <c10/util/BFloat16.h>

namespace luka::cpu::detail {

__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline float dot_bf16_avx512(const c10::BFloat16* r,
                                                                                     const c10::BFloat16* x,
                                                                                     std::int64_t in) {
  const std::int64_t pairs = in / 64 * 64;
  const std::int64_t full = in / 32 * 32;
  const __mmask32 tail_mask = static_cast<__mmask32>((std::uint64_t{1} << (in - full)) - 1);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i < pairs; i += 64) {
    a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(r + i), (__m512bh)_mm512_loadu_si512(x + i));
    a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(r + i + 32), (__m512bh)_mm512_loadu_si512(x + i + 32));
  }
  if (i < full) a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(r + i), (__m512bh)_mm512_loadu_si512(x + i));
  if (full < in)
    a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_maskz_loadu_epi16(tail_mask, r + full),
                          (__m512bh)_mm512_maskz_loadu_epi16(tail_mask, x + full));
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

__attribute__((target("avx512f"))) inline float dot_f32_avx512(const float* r, const float* x, std::int64_t in) {
  const std::int64_t pairs = in / 32 * 32;
  const std::int64_t full = in / 16 * 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << (in - full)) - 1);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i < pairs; i += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i + 16), _mm512_loadu_ps(x + i + 16), a1);
  }
  if (i < full) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i), a0);
  if (full < in)
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail_mask, r + full), _mm512_maskz_loadu_ps(tail_mask, x + full), a1);
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// Plain loops, for CPUs without AVX-512 (four partial sums, so the compiler can vectorize).
template <class T>
inline float dot_plain(const T* r, const T* x, std::int64_t in) {
  float s[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= in; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += static_cast<float>(r[i + j]) * static_cast<float>(x[i + j]);
  for (; i < in; ++i) s[0] += static_cast<float>(r[i]) * static_cast<float>(x[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace luka::cpu::detail
