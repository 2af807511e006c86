#include "core/util/half.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace luka {

#if defined(__x86_64__)
namespace {
bool has_f16c() {
  // clang before 16 has no "f16c" for __builtin_cpu_supports: CPUID leaf 1 says it; "avx" also
  // checks that the OS saves the YMM registers.
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  return yes;
}
__attribute__((target("avx,f16c"))) void to_half_f16c(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}
__attribute__((target("avx,f16c"))) void to_float_f16c(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}
}  // namespace
#endif

void floats_to_halves(const float* in, std::uint16_t* out, std::size_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return to_half_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return to_float_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

}  // namespace luka
