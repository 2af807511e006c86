#include "core/util/half.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace luka {

std::uint16_t float_to_half(float value) {
  std::uint32_t f;
  std::memcpy(&f, &value, 4);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN (keep a quiet NaN's top payload bits)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to zero (2^-25 ties to 0)
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // so that the result counts units of 2^-24
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  std::uint32_t h = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is correct
  return static_cast<std::uint16_t>(sign | h);
}

float half_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
  std::uint32_t f;
  if (exp == 0x1f) {
    f = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    f = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    f = sign;
  } else {  // subnormal: normalize
    int e = -1;
    std::uint32_t m = mant;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    f = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

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
