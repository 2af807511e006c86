#include "kernels/cpu/vec.h"

#include <immintrin.h>

#include <algorithm>

namespace luka::cpu {

namespace {

const bool kAvx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl");

__mmask16 lanes(std::int64_t n) { return n >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << n) - 1); }

__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 load(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 load(const c10::BFloat16* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) float dot_avx512(const float* q, const T* k, std::int64_t d) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= d; i += 32) {
    a0 = _mm512_fmadd_ps(load(k + i, 0xFFFF), _mm512_loadu_ps(q + i), a0);
    a1 = _mm512_fmadd_ps(load(k + i + 16, 0xFFFF), _mm512_loadu_ps(q + i + 16), a1);
  }
  for (; i < d; i += 16) {
    const __mmask16 m = lanes(d - i);
    a0 = _mm512_fmadd_ps(load(k + i, m), _mm512_maskz_loadu_ps(m, q + i), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void axpy_avx512(float a, const T* x, float* y, std::int64_t d) {
  const __m512 av = _mm512_set1_ps(a);
  for (std::int64_t i = 0; i < d; i += 16) {
    const __mmask16 m = lanes(d - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, load(x + i, m), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// A cover's rows lie scattered over the cache (heavy hitters anywhere in the context), beyond
// what the hardware prefetcher follows: each row is asked for kAhead rows before it is read.
constexpr std::int64_t kAhead = 8;

template <typename T>
inline void prefetch_row(const T* row, std::int64_t d) {
  const char* p = reinterpret_cast<const char*>(row);
  for (std::int64_t b = 0; b < d * static_cast<std::int64_t>(sizeof(T)); b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void gather_dots_avx512(const float* q, const T* rows, std::int64_t stride,
                                                                          const std::int64_t* idx, std::int64_t n,
                                                                          std::int64_t d, float scale, float* out) {
  for (std::int64_t j = 0; j < std::min(n, kAhead); ++j) prefetch_row(rows + idx[j] * stride, d);
  for (std::int64_t j = 0; j < n; ++j) {
    if (j + kAhead < n) prefetch_row(rows + idx[j + kAhead] * stride, d);
    out[j] = scale * dot_avx512(q, rows + idx[j] * stride, d);
  }
}

// y += p[j] * row_j for every j, as axpy_avx512 row after row; up to 128 columns of y are kept in
// registers across the rows (the same fused multiply-adds in the same order, so the same bits).
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void gather_axpy_avx512(const float* p, const T* rows, std::int64_t stride,
                                                                          const std::int64_t* idx, std::int64_t n,
                                                                          std::int64_t d, float* y) {
  constexpr std::int64_t kHeld = 8;  // zmm registers of y
  for (std::int64_t c0 = 0; c0 < d; c0 += 16 * kHeld) {
    const std::int64_t width = std::min<std::int64_t>(d - c0, 16 * kHeld), parts = (width + 15) / 16;
    __m512 acc[kHeld];
    for (std::int64_t k = 0; k < parts; ++k) acc[k] = _mm512_maskz_loadu_ps(lanes(width - 16 * k), y + c0 + 16 * k);
    for (std::int64_t j = 0; j < std::min(n, kAhead); ++j) prefetch_row(rows + idx[j] * stride + c0, width);
    for (std::int64_t j = 0; j < n; ++j) {
      if (j + kAhead < n) prefetch_row(rows + idx[j + kAhead] * stride + c0, width);
      const __m512 av = _mm512_set1_ps(p[j]);
      const T* x = rows + idx[j] * stride + c0;
      for (std::int64_t k = 0; k < parts; ++k) acc[k] = _mm512_fmadd_ps(av, load(x + 16 * k, lanes(width - 16 * k)), acc[k]);
    }
    for (std::int64_t k = 0; k < parts; ++k) _mm512_mask_storeu_ps(y + c0 + 16 * k, lanes(width - 16 * k), acc[k]);
  }
}

template <typename T>
float dot_plain(const float* q, const T* k, std::int64_t d) {
  float acc = 0;
  for (std::int64_t i = 0; i < d; ++i) acc += q[i] * static_cast<float>(k[i]);
  return acc;
}

template <typename T>
void axpy_plain(float a, const T* x, float* y, std::int64_t d) {
  for (std::int64_t i = 0; i < d; ++i) y[i] += a * static_cast<float>(x[i]);
}

}  // namespace

float dot(const float* q, const float* k, std::int64_t d) { return kAvx512 ? dot_avx512(q, k, d) : dot_plain(q, k, d); }
float dot(const float* q, const c10::BFloat16* k, std::int64_t d) {
  return kAvx512 ? dot_avx512(q, k, d) : dot_plain(q, k, d);
}
void axpy(float a, const float* x, float* y, std::int64_t d) {
  kAvx512 ? axpy_avx512(a, x, y, d) : axpy_plain(a, x, y, d);
}
void axpy(float a, const c10::BFloat16* x, float* y, std::int64_t d) {
  kAvx512 ? axpy_avx512(a, x, y, d) : axpy_plain(a, x, y, d);
}

namespace {

template <typename T>
void gather_dots_any(const float* q, const T* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n, std::int64_t d,
                     float scale, float* out) {
  if (kAvx512) return gather_dots_avx512(q, rows, stride, idx, n, d, scale, out);
  for (std::int64_t j = 0; j < n; ++j) out[j] = scale * dot_plain(q, rows + idx[j] * stride, d);
}

template <typename T>
void gather_axpy_any(const float* p, const T* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n, std::int64_t d,
                     float* y) {
  if (kAvx512) return gather_axpy_avx512(p, rows, stride, idx, n, d, y);
  for (std::int64_t j = 0; j < n; ++j) axpy_plain(p[j], rows + idx[j] * stride, y, d);
}

}  // namespace

void gather_dots(const float* q, const float* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n, std::int64_t d,
                 float scale, float* out) {
  gather_dots_any(q, rows, stride, idx, n, d, scale, out);
}
void gather_dots(const float* q, const c10::BFloat16* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n,
                 std::int64_t d, float scale, float* out) {
  gather_dots_any(q, rows, stride, idx, n, d, scale, out);
}
void gather_axpy(const float* p, const float* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n, std::int64_t d,
                 float* y) {
  gather_axpy_any(p, rows, stride, idx, n, d, y);
}
void gather_axpy(const float* p, const c10::BFloat16* rows, std::int64_t stride, const std::int64_t* idx, std::int64_t n,
                 std::int64_t d, float* y) {
  gather_axpy_any(p, rows, stride, idx, n, d, y);
}

}  // namespace luka::cpu
