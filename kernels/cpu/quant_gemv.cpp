// Index of this file:
//   [SECTION] Block geometry and shared scalar pieces
//   [SECTION] Scalar path: the reference for the lane arithmetic the SIMD paths reproduce
//   [SECTION] AVX-512 paths (F, BW, DQ, VL; with and without VNNI): 64 values per instruction
//   [SECTION] AVX2 path: 32 values per instruction; lanes 0-7 and 8-15 in two accumulators
//   [SECTION] Activation quantization: the same values from every path (products of the same
//   [SECTION] Q8_0 against fp32 activations (no activation quantization)
//   [SECTION] Dispatch

#include "kernels/cpu/quant_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>

#include <ATen/Parallel.h>

#include "kernels/common/half.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_amx.h"

namespace luka::cpu {

namespace {

using gguf::GgmlType;

// [SECTION] Block geometry and shared scalar pieces

// The kernels' types (block bytes from ggml_type.h's table): Q4_0 half d, u8 qs[16]; Q4_1 half d,
// half m, u8 qs[16]; Q8_0 half d, i8 qs[32]; Q4_K half d, half dmin, u8 scales[12], u8 qs[128];
// Q6_K u8 ql[128], u8 qh[64], i8 scales[16], half d.
bool kernel_type(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K ||
         type == GgmlType::kQ6_K;
}
constexpr std::int64_t kQ4_0Bytes = block_geometry(GgmlType::kQ4_0).bytes;
constexpr std::int64_t kQ4_1Bytes = block_geometry(GgmlType::kQ4_1).bytes;
constexpr std::int64_t kQ8_0Bytes = block_geometry(GgmlType::kQ8_0).bytes;
constexpr std::int64_t kQ4_KBytes = block_geometry(GgmlType::kQ4_K).bytes;
constexpr std::int64_t kQ6_KBytes = block_geometry(GgmlType::kQ6_K).bytes;

std::int64_t block_elements(GgmlType type) { return kernel_type(type) ? block_geometry(type).values : 32; }

std::int64_t block_bytes(GgmlType type) { return kernel_type(type) ? block_geometry(type).bytes : 0; }

float half_at(const std::uint8_t* p) { return half_to_float(static_cast<std::uint16_t>(p[0] | (p[1] << 8))); }

// Q4_K: twelve bytes hold eight 6-bit sub-block scales and eight 6-bit mins. Bytes 0-3 carry
// scales 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the same for the mins;
// bytes 8-11 the low 4 bits of scales 4-7 (low nibbles) and mins 4-7 (high nibbles). Unpacked
// four at a time as 32-bit words: sc holds the 8 scales as bytes, mn the 8 mins.
inline void unpack_q4_k_scale_bytes(const std::uint8_t* s, std::uint32_t sc[2], std::uint32_t mn[2]) {
  std::uint32_t u[3];
  std::memcpy(u, s, 12);
  sc[0] = u[0] & 0x3F3F3F3Fu;
  mn[0] = u[1] & 0x3F3F3F3Fu;
  sc[1] = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  mn[1] = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
}

inline void unpack_q4_k_scales(const std::uint8_t* s, int sc[8], int mn[8]) {
  std::uint32_t scw[2], mnw[2];
  unpack_q4_k_scale_bytes(s, scw, mnw);
  for (int j = 0; j < 8; ++j) {
    sc[j] = (scw[j / 4] >> (8 * (j % 4))) & 0xFF;
    mn[j] = (mnw[j / 4] >> (8 * (j % 4))) & 0xFF;
  }
}

// Σⱼ minⱼ · (sum of the activation's q over sub-block j): Q4_K's offset term, in integers.
inline int q4_k_offset(const int mn[8], const std::int16_t* sums16) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += mn[j] * (sums16[2 * j] + sums16[2 * j + 1]);
  return s;
}

// Σ_g scale_g · (sum of q over group g): with Q6_K's values stored as 0..63, the "− 32" of every
// value comes out as −32 times this.
inline int q6_k_offset(const std::int8_t* sc, const std::int16_t* sums16) {
  int s = 0;
  for (int g = 0; g < 16; ++g) s += sc[g] * sums16[g];
  return s;
}

// The fixed summation tree of the 16 lanes: (l, l+8), then (l, l+4), (l, l+2), (l, l+1).
float reduce16(const float* a) {
  float r8[8], r4[4];
  for (int l = 0; l < 8; ++l) r8[l] = a[l] + a[l + 8];
  for (int l = 0; l < 4; ++l) r4[l] = r8[l] + r8[l + 4];
  return (r4[0] + r4[2]) + (r4[1] + r4[3]);
}

// [SECTION] Scalar path: the reference for the lane arithmetic the SIMD paths reproduce

// Value e (0..31) of a Q4 block: low nibbles are values 0..15, high nibbles 16..31.
inline int q4_value(const std::uint8_t* qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

float row_scalar_q4_0(const std::uint8_t* row, const QuantizedActivation& a) {
  float acc[16] = {};
  const std::int64_t nb = a.in / 32;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ4_0Bytes;
    const std::int8_t* xq = a.q.data() + b * 32;
    const float dd = half_at(blk) * a.d[b];
    float* lane = acc + (b & 1) * 8;
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int e = 4 * j; e < 4 * j + 4; ++e) s += (q4_value(blk + 2, e) - 8) * xq[e];
      lane[j] = std::fma(static_cast<float>(s), dd, lane[j]);
    }
  }
  return reduce16(acc);
}

float row_scalar_q4_1(const std::uint8_t* row, const QuantizedActivation& a) {
  float acc[16] = {};
  const std::int64_t nb = a.in / 32;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ4_1Bytes;
    const std::int8_t* xq = a.q.data() + b * 32;
    const float dd = half_at(blk) * a.d[b];
    const float m = half_at(blk + 2);
    float* lane = acc + (b & 1) * 8;
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int e = 4 * j; e < 4 * j + 4; ++e) s += q4_value(blk + 4, e) * xq[e];
      lane[j] = std::fma(static_cast<float>(s), dd, lane[j]);
      lane[j] = std::fma(m, a.lane_sums[b * 8 + j], lane[j]);
    }
  }
  return reduce16(acc);
}

float row_scalar_q8_0(const std::uint8_t* row, const QuantizedActivation& a) {
  float acc[16] = {};
  const std::int64_t nb = a.in / 32;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ8_0Bytes;
    const auto* wq = reinterpret_cast<const std::int8_t*>(blk + 2);
    const std::int8_t* xq = a.q.data() + b * 32;
    const float dd = half_at(blk) * a.d[b];
    float* lane = acc + (b & 1) * 8;
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int e = 4 * j; e < 4 * j + 4; ++e) s += wq[e] * xq[e];
      lane[j] = std::fma(static_cast<float>(s), dd, lane[j]);
    }
  }
  return reduce16(acc);
}

float row_scalar_q4_k(const std::uint8_t* row, const QuantizedActivation& a) {
  float acc[16] = {};
  float offset = 0;
  const std::int64_t nb = a.in / 256;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ4_KBytes;
    const std::uint8_t* qs = blk + 16;
    const std::int8_t* xq = a.q.data() + b * 256;
    int sc[8], mn[8];
    unpack_q4_k_scales(blk + 4, sc, mn);
    int il[16] = {};
    for (int c = 0; c < 4; ++c) {  // 64 values: low nibbles of qs[32c..], then high nibbles
      for (int l = 0; l < 16; ++l) {
        int s = 0;
        for (int e = 4 * l; e < 4 * l + 4; ++e) {
          const int w = e < 32 ? qs[32 * c + e] & 0xF : qs[32 * c + e - 32] >> 4;
          s += w * xq[64 * c + e];
        }
        il[l] += sc[2 * c + (l >= 8)] * s;
      }
    }
    const float dd = half_at(blk) * a.d[b];
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(static_cast<float>(il[l]), dd, acc[l]);
    offset = std::fma(static_cast<float>(q4_k_offset(mn, a.sums16.data() + b * 16)), half_at(blk + 2) * a.d[b], offset);
  }
  return reduce16(acc) - offset;
}

// Value e (0..255) of a Q6_K block as stored, 0..63: 128-value halves n; in each, four runs k of
// 32 values take the low or high nibble of ql and two bits of qh.
inline int q6_k_value(const std::uint8_t* blk, int e) {
  const int n = e / 128, k = (e % 128) / 32, l = e % 32;
  const std::uint8_t* ql = blk + 64 * n;
  const std::uint8_t* qh = blk + 128 + 32 * n;
  const int low = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
  const int high = (qh[l] >> (2 * k)) & 3;
  return low | (high << 4);
}

float row_scalar_q6_k(const std::uint8_t* row, const QuantizedActivation& a) {
  float acc[16] = {};
  float offset = 0;
  const std::int64_t nb = a.in / 256;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ6_KBytes;
    const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192);
    const std::int8_t* xq = a.q.data() + b * 256;
    int il[16] = {};
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 16; ++l) {
        int s = 0;
        for (int e = 64 * c + 4 * l; e < 64 * c + 4 * l + 4; ++e) s += q6_k_value(blk, e) * xq[e];
        il[l] += sc[(64 * c + 4 * l) / 16] * s;
      }
    }
    const float dd = half_at(blk + 208) * a.d[b];
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(static_cast<float>(il[l]), dd, acc[l]);
    offset = std::fma(static_cast<float>(q6_k_offset(sc, a.sums16.data() + b * 16)), 32.0f * dd, offset);
  }
  return reduce16(acc) - offset;
}

// [SECTION] AVX-512 paths (F, BW, DQ, VL; with and without VNNI): 64 values per instruction

#define LUKA_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))
#define LUKA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace avx512_bw {
#define LUKA_Q512 LUKA_AVX512
#define LUKA_Q512_VNNI 0
#include "kernels/cpu/quant_avx512.inc"
#undef LUKA_Q512
#undef LUKA_Q512_VNNI
}  // namespace avx512_bw

namespace avx512_vnni {
#define LUKA_Q512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c")))
#define LUKA_Q512_VNNI 1
#include "kernels/cpu/quant_avx512.inc"
#undef LUKA_Q512
#undef LUKA_Q512_VNNI
}  // namespace avx512_vnni

using avx512_bw::half_at_512;
using avx512_bw::reduce16_512;


// [SECTION] AVX2 path: 32 values per instruction; lanes 0-7 and 8-15 in two accumulators

LUKA_AVX2 inline float half_at_256(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

LUKA_AVX2 inline float reduce16_256(__m256 lanes0, __m256 lanes8) {
  const __m256 r8 = _mm256_add_ps(lanes0, lanes8);
  const __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
  const __m128 r2 = _mm_add_ps(r4, _mm_movehl_ps(r4, r4));
  return _mm_cvtss_f32(_mm_add_ss(r2, _mm_movehdup_ps(r2)));
}

// One Q4 block's 16 packed bytes as 32 values [low, high] (value order).
LUKA_AVX2 inline __m256i unpack_q4_256(const std::uint8_t* qs) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_blend_epi32(v, _mm256_srli_epi16(v, 4), 0xF0), _mm256_set1_epi8(0x0F));
}

// Lane sums (4 values each) of unsigned w × signed x.
LUKA_AVX2 inline __m256i dot_unsigned_256(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

LUKA_AVX2 inline __m256i dot_signed_256(__m256i w, __m256i x) {
  return dot_unsigned_256(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

LUKA_AVX2 inline __m256i load_x_256(const QuantizedActivation& a, std::int64_t b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q.data() + b * 32));
}

LUKA_AVX2 float row_avx2_q4_0(const std::uint8_t* row, const QuantizedActivation& a) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const std::int64_t nb = a.in / 32;
  const __m256i eight = _mm256_set1_epi8(8);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ4_0Bytes;
    const __m256i s = dot_signed_256(_mm256_sub_epi8(unpack_q4_256(blk + 2), eight), load_x_256(a, b));
    acc[b & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(half_at_256(blk) * a.d[b]), acc[b & 1]);
  }
  return reduce16_256(acc[0], acc[1]);
}

LUKA_AVX2 float row_avx2_q4_1(const std::uint8_t* row, const QuantizedActivation& a) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const std::int64_t nb = a.in / 32;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ4_1Bytes;
    const __m256i s = dot_unsigned_256(unpack_q4_256(blk + 4), load_x_256(a, b));
    __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(half_at_256(blk) * a.d[b]), acc[b & 1]);
    acc[b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(half_at_256(blk + 2)), _mm256_loadu_ps(a.lane_sums.data() + b * 8), v);
  }
  return reduce16_256(acc[0], acc[1]);
}

LUKA_AVX2 float row_avx2_q8_0(const std::uint8_t* row, const QuantizedActivation& a) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const std::int64_t nb = a.in / 32;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ8_0Bytes;
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m256i s = dot_signed_256(w, load_x_256(a, b));
    acc[b & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(half_at_256(blk) * a.d[b]), acc[b & 1]);
  }
  return reduce16_256(acc[0], acc[1]);
}

LUKA_AVX2 float row_avx2_q4_k(const std::uint8_t* row, const QuantizedActivation& a) {
  __m256 acc0 = _mm256_setzero_ps(), acc8 = _mm256_setzero_ps();
  float offset = 0;
  const std::int64_t nb = a.in / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ4_KBytes;
    const std::int8_t* xq = a.q.data() + b * 256;
    int sc[8], mn[8];
    unpack_q4_k_scales(blk + 4, sc, mn);
    __m256i il0 = _mm256_setzero_si256(), il8 = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * c));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * c + 32));
      const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), x0);
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), x1);
      il0 = _mm256_add_epi32(il0, _mm256_madd_epi16(p0, _mm256_set1_epi16(static_cast<short>(sc[2 * c]))));
      il8 = _mm256_add_epi32(il8, _mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1]))));
    }
    const __m256 dd = _mm256_set1_ps(half_at_256(blk) * a.d[b]);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il0), dd, acc0);
    acc8 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il8), dd, acc8);
    offset = std::fma(static_cast<float>(q4_k_offset(mn, a.sums16.data() + b * 16)), half_at_256(blk + 2) * a.d[b], offset);
  }
  return reduce16_256(acc0, acc8) - offset;
}

// Scales for 16 words: words 0-7 take s0, 8-15 take s1.
LUKA_AVX2 inline __m256i scale_pair_256(int s0, int s1) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s1)), _mm_set1_epi16(static_cast<short>(s0)));
}

LUKA_AVX2 float row_avx2_q6_k(const std::uint8_t* row, const QuantizedActivation& a) {
  __m256 acc0 = _mm256_setzero_ps(), acc8 = _mm256_setzero_ps();
  float offset = 0;
  const std::int64_t nb = a.in / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::uint8_t* blk = row + b * kQ6_KBytes;
    const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192);
    const std::int8_t* xq = a.q.data() + b * 256;
    __m256i il0 = _mm256_setzero_si256(), il8 = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * n));
      const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * n + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * n));
      // Chunk 2n: low nibbles with qh bits (0,1) and (2,3); chunk 2n+1: high nibbles, bits (4,5) and (6,7).
      const __m256i w[4] = {
          _mm256_or_si256(_mm256_and_si256(qa, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(qb, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), low4), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
      };
      for (int h = 0; h < 2; ++h) {
        const int c = 2 * n + h;
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * c));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * c + 32));
        il0 = _mm256_add_epi32(il0, _mm256_madd_epi16(_mm256_maddubs_epi16(w[2 * h], x0), scale_pair_256(sc[4 * c], sc[4 * c + 1])));
        il8 = _mm256_add_epi32(il8,
                               _mm256_madd_epi16(_mm256_maddubs_epi16(w[2 * h + 1], x1), scale_pair_256(sc[4 * c + 2], sc[4 * c + 3])));
      }
    }
    const float dd = half_at_256(blk + 208) * a.d[b];
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il0), _mm256_set1_ps(dd), acc0);
    acc8 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il8), _mm256_set1_ps(dd), acc8);
    offset = std::fma(static_cast<float>(q6_k_offset(sc, a.sums16.data() + b * 16)), 32.0f * dd, offset);
  }
  return reduce16_256(acc0, acc8) - offset;
}

// [SECTION] Activation quantization: the same values from every path (products of the same
// floats, rounded to nearest even: std::nearbyint in the default rounding mode, cvtps2dq).

void quantize_blocks_scalar(const float* x, std::int64_t nb, std::int64_t block, std::int8_t* q, float* d) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * block;
    float amax = 0;
    for (std::int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (std::int64_t i = 0; i < block; ++i) q[b * block + i] = static_cast<std::int8_t>(std::nearbyint(xb[i] * inv));
    d[b] = amax / 127.0f;
  }
}

LUKA_AVX512 void quantize_blocks_avx512(const float* x, std::int64_t nb, std::int64_t block, std::int8_t* q, float* d) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * block;
    __m512 m = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < block; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + i)));
    const float amax = _mm512_reduce_max_ps(m);
    const __m512 inv = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
    for (std::int64_t i = 0; i < block; i += 16) {
      const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + i), inv));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * block + i), _mm512_cvtsepi32_epi8(qi));
    }
    d[b] = amax / 127.0f;
  }
}

LUKA_AVX2 void quantize_blocks_avx2(const float* x, std::int64_t nb, std::int64_t block, std::int8_t* q, float* d) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (std::int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * block;
    __m256 m = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < block; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + i), abs_mask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const __m256 inv = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
    for (std::int64_t i = 0; i < block; i += 32) {
      __m256i v[4];
      for (int k = 0; k < 4; ++k) v[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + i + 8 * k), inv));
      // The packs interleave 128-bit halves; the permutation puts the 32 bytes back in order.
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * block + i), _mm256_permutevar8x32_epi32(bytes, order));
    }
    d[b] = amax / 127.0f;
  }
}

// [SECTION] Q8_0 against fp32 activations (no activation quantization)
// Per block: s = w[0..15]·x[0..15] + w[16..31]·x[16..31] lane by lane (a product, then one fused
// multiply-add), then lane += s · d; the 16 lanes summed by the same tree as the other paths.

float q8_0_f32_scalar(const std::uint8_t* row, const float* x, std::int64_t in) {
  float acc[16] = {};
  for (std::int64_t b = 0; b < in / 32; ++b) {
    const std::uint8_t* blk = row + b * kQ8_0Bytes;
    const auto* w = reinterpret_cast<const std::int8_t*>(blk + 2);
    const float d = half_at(blk);
    const float* xb = x + b * 32;
    for (int l = 0; l < 16; ++l) {
      float s = static_cast<float>(w[l]) * xb[l];
      s = std::fma(static_cast<float>(w[l + 16]), xb[l + 16], s);
      acc[l] = std::fma(s, d, acc[l]);
    }
  }
  return reduce16(acc);
}

LUKA_AVX512 float q8_0_f32_avx512(const std::uint8_t* row, const float* x, std::int64_t in) {
  __m512 acc = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < in / 32; ++b) {
    const std::uint8_t* blk = row + b * kQ8_0Bytes;
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18))));
    __m512 s = _mm512_mul_ps(lo, _mm512_loadu_ps(x + b * 32));
    s = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * 32 + 16), s);
    acc = _mm512_fmadd_ps(s, _mm512_set1_ps(half_at_512(blk)), acc);
  }
  return reduce16_512(acc);
}

#undef LUKA_AVX512
#undef LUKA_AVX2

// [SECTION] Dispatch

using RowKernel = float (*)(const std::uint8_t*, const QuantizedActivation&);

RowKernel row_kernel(GgmlType type, QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kAmx:  // one row fills one of a tile's 16 rows: the VNNI kernels (bench/results/cpu-quant-amx.md)
    case QuantIsa::kVnni:
      switch (type) {
        case GgmlType::kQ4_0: return avx512_vnni::row_avx512_q4_0;
        case GgmlType::kQ4_1: return avx512_vnni::row_avx512_q4_1;
        case GgmlType::kQ8_0: return avx512_vnni::row_avx512_q8_0;
        case GgmlType::kQ4_K: return avx512_vnni::row_avx512_q4_k;
        case GgmlType::kQ6_K: return avx512_vnni::row_avx512_q6_k;
        default: return nullptr;
      }
    case QuantIsa::kAvx512:
      switch (type) {
        case GgmlType::kQ4_0: return avx512_bw::row_avx512_q4_0;
        case GgmlType::kQ4_1: return avx512_bw::row_avx512_q4_1;
        case GgmlType::kQ8_0: return avx512_bw::row_avx512_q8_0;
        case GgmlType::kQ4_K: return avx512_bw::row_avx512_q4_k;
        case GgmlType::kQ6_K: return avx512_bw::row_avx512_q6_k;
        default: return nullptr;
      }
    case QuantIsa::kAvx2:
      switch (type) {
        case GgmlType::kQ4_0: return row_avx2_q4_0;
        case GgmlType::kQ4_1: return row_avx2_q4_1;
        case GgmlType::kQ8_0: return row_avx2_q8_0;
        case GgmlType::kQ4_K: return row_avx2_q4_k;
        case GgmlType::kQ6_K: return row_avx2_q6_k;
        default: return nullptr;
      }
    case QuantIsa::kScalar:
      switch (type) {
        case GgmlType::kQ4_0: return row_scalar_q4_0;
        case GgmlType::kQ4_1: return row_scalar_q4_1;
        case GgmlType::kQ8_0: return row_scalar_q8_0;
        case GgmlType::kQ4_K: return row_scalar_q4_k;
        case GgmlType::kQ6_K: return row_scalar_q6_k;
        default: return nullptr;
      }
  }
  return nullptr;
}

// AVX-512 (F) or wider: the paths whose activation quantization and Q8_0 × fp32 rows use AVX-512.
bool wide(QuantIsa isa) { return isa == QuantIsa::kAvx512 || isa == QuantIsa::kVnni || isa == QuantIsa::kAmx; }

constexpr QuantIsa kAllPaths[] = {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512, QuantIsa::kVnni, QuantIsa::kAmx};

}  // namespace

const char* quant_isa_name(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kScalar: return "scalar";
    case QuantIsa::kAvx2: return "avx2";
    case QuantIsa::kAvx512: return "avx512";
    case QuantIsa::kVnni: return "vnni";
    case QuantIsa::kAmx: return "amx";
  }
  return "?";
}

bool quant_isa_supported(QuantIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case QuantIsa::kScalar: return true;
    case QuantIsa::kAvx2: return f.avx2;
    case QuantIsa::kAvx512: return f.avx512;
    case QuantIsa::kVnni: return f.avx512 && f.avx512_vnni;
    case QuantIsa::kAmx: return f.avx512 && f.avx512_vnni && f.amx_int8 && amx_tile_state() == AmxTileState::kGranted;
  }
  return false;
}

std::string quant_isa_why_not(QuantIsa isa) {
  if (quant_isa_supported(isa)) return {};
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case QuantIsa::kScalar: return {};
    case QuantIsa::kAvx2: return "this CPU lacks AVX2, FMA or F16C";
    case QuantIsa::kAvx512: return "this CPU lacks AVX-512 F/BW/DQ/VL (or AVX2, FMA, F16C)";
    case QuantIsa::kVnni: return f.avx512 ? "this CPU lacks AVX-512 VNNI" : "this CPU lacks AVX-512 F/BW/DQ/VL";
    case QuantIsa::kAmx:
      if (!(f.avx512 && f.avx512_vnni)) return "this CPU lacks AVX-512 VNNI";
      if (!f.amx_int8) return "this CPU lacks AMX-INT8 tiles";
      return std::string("the AMX tile state is unavailable: ") + amx_tile_state_text(amx_tile_state());
  }
  return {};
}

std::optional<QuantIsa> parse_quant_isa(const std::string& name) {
  for (const QuantIsa isa : kAllPaths)
    if (name == quant_isa_name(isa)) return isa;
  return std::nullopt;
}

QuantIsa quant_isa_from(const char* env) {
  if (env == nullptr || *env == '\0') {
    for (auto it = std::rbegin(kAllPaths); it != std::rend(kAllPaths); ++it)
      if (quant_isa_supported(*it)) return *it;
    return QuantIsa::kScalar;
  }
  const std::optional<QuantIsa> asked = parse_quant_isa(env);
  if (!asked)
    throw std::invalid_argument(std::string("LUKA_QUANT_PATH=") + env + ": expected scalar, avx2, avx512, vnni or amx");
  if (!quant_isa_supported(*asked))
    throw std::invalid_argument(std::string("LUKA_QUANT_PATH=") + env + ": " + quant_isa_why_not(*asked));
  return *asked;
}

QuantIsa quant_isa() {
  static const QuantIsa chosen = quant_isa_from(std::getenv("LUKA_QUANT_PATH"));
  return chosen;
}

bool quant_gemv_supports(GgmlType type) { return block_bytes(type) != 0; }

void quantize_activation(GgmlType type, const float* x, std::int64_t in, QuantizedActivation& out, QuantIsa isa) {
  if (!quant_gemv_supports(type))
    throw std::invalid_argument(std::string("quantize_activation: unsupported weight type ") + gguf::type_name(type));
  const std::int64_t block = block_elements(type);
  if (in <= 0 || in % block != 0)
    throw std::invalid_argument("quantize_activation: input length " + std::to_string(in) + " is not a positive multiple of " +
                                std::to_string(block) + " (" + gguf::type_name(type) + " blocks)");
  if (!quant_isa_supported(isa))
    throw std::invalid_argument(std::string("quantize_activation: the ") + quant_isa_name(isa) + " path cannot run: " + quant_isa_why_not(isa));
  const std::int64_t nb = in / block;
  out.block = block;
  out.in = in;
  out.q.resize(static_cast<std::size_t>(in));
  out.d.resize(static_cast<std::size_t>(nb));
  out.lane_sums.resize(block == 32 ? static_cast<std::size_t>(nb * 8) : 0);
  out.sums16.resize(block == 256 ? static_cast<std::size_t>(nb * 16) : 0);
  switch (isa) {
    case QuantIsa::kAvx512:
    case QuantIsa::kVnni:
    case QuantIsa::kAmx: quantize_blocks_avx512(x, nb, block, out.q.data(), out.d.data()); break;
    case QuantIsa::kAvx2: quantize_blocks_avx2(x, nb, block, out.q.data(), out.d.data()); break;
    case QuantIsa::kScalar: quantize_blocks_scalar(x, nb, block, out.q.data(), out.d.data()); break;
  }
  const std::int8_t* q = out.q.data();
  if (block == 32) {
    for (std::int64_t j = 0; j < nb * 8; ++j)
      out.lane_sums[j] = out.d[j / 8] * static_cast<float>(q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
  } else {
    for (std::int64_t g = 0; g < nb * 16; ++g) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += q[16 * g + i];
      out.sums16[g] = static_cast<std::int16_t>(s);
    }
  }
}

QuantRowDot quant_row_dot(GgmlType type, QuantIsa isa) {
  if (!quant_gemv_supports(type))
    throw std::invalid_argument(std::string("quant_gemv: unsupported weight type ") + gguf::type_name(type));
  if (!quant_isa_supported(isa))
    throw std::invalid_argument(std::string("quant_gemv: the ") + quant_isa_name(isa) + " path cannot run: " + quant_isa_why_not(isa));
  return row_kernel(type, isa);
}

std::int64_t quant_block_elements(GgmlType type) { return block_elements(type); }

std::int64_t quant_row_bytes(GgmlType type, std::int64_t in) { return in / block_elements(type) * block_bytes(type); }

void quant_gemv(const QuantizedActivation& xq, GgmlType type, const void* w, std::int64_t out, float* y, QuantIsa isa) {
  if (!quant_gemv_supports(type))
    throw std::invalid_argument(std::string("quant_gemv: unsupported weight type ") + gguf::type_name(type));
  if (xq.block != block_elements(type))
    throw std::invalid_argument(std::string("quant_gemv: activation quantized for another block size than ") +
                                gguf::type_name(type));
  if (!quant_isa_supported(isa))
    throw std::invalid_argument(std::string("quant_gemv: the ") + quant_isa_name(isa) + " path cannot run: " + quant_isa_why_not(isa));
  const RowKernel kernel = row_kernel(type, isa);
  const auto* base = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = xq.in / xq.block * block_bytes(type);
  // Chunks of at least ~32K weights, so a thread's share outweighs its start-up.
  const std::int64_t grain = std::max<std::int64_t>(1, 32768 / xq.in);
  at::parallel_for(0, out, grain, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o) y[o] = kernel(base + o * row_bytes, xq);
  });
}

float q8_0_row_f32(const std::uint8_t* row, const float* x, std::int64_t in, QuantIsa isa) {
  if (in % 32 != 0) throw std::invalid_argument("q8_0_row_f32: input length " + std::to_string(in) + " is not a multiple of 32");
  if (!quant_isa_supported(isa))
    throw std::invalid_argument(std::string("q8_0_row_f32: the ") + quant_isa_name(isa) + " path cannot run: " + quant_isa_why_not(isa));
  return wide(isa) ? q8_0_f32_avx512(row, x, in) : q8_0_f32_scalar(row, x, in);
}

void q8_0_gemv_f32(const void* w, std::int64_t out, std::int64_t in, const float* x, float* y, QuantIsa isa) {
  if (in % 32 != 0) throw std::invalid_argument("q8_0_gemv_f32: input length " + std::to_string(in) + " is not a multiple of 32");
  if (!quant_isa_supported(isa))
    throw std::invalid_argument(std::string("q8_0_gemv_f32: the ") + quant_isa_name(isa) + " path cannot run: " + quant_isa_why_not(isa));
  const auto* base = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = in / 32 * kQ8_0Bytes;
  const std::int64_t grain = std::max<std::int64_t>(1, 32768 / in);
  at::parallel_for(0, out, grain, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o)
      y[o] = wide(isa) ? q8_0_f32_avx512(base + o * row_bytes, x, in) : q8_0_f32_scalar(base + o * row_bytes, x, in);
  });
}

void quant_gemv(GgmlType type, const void* w, std::int64_t out, std::int64_t in, const float* x, float* y, QuantIsa isa) {
  thread_local QuantizedActivation xq;  // keeps its buffers between calls
  quantize_activation(type, x, in, xq, isa);
  quant_gemv(xq, type, w, out, y, isa);
}

bool quant_gemm_uses_tiles(GgmlType type, QuantIsa isa) {
  return isa == QuantIsa::kAmx && quant_isa_supported(isa) && detail::amx_gemm_supports(type);
}

bool quant_gemm_preferred(GgmlType type, std::int64_t rows, QuantIsa isa) {
  return rows >= kTileMinRows && quant_gemm_uses_tiles(type, isa);
}

std::vector<QuantPathLine> quant_path_report(QuantIsa isa) {
  const CpuFeatures& f = cpu_features();
  std::string cpu = f.avx512_vnni ? "AVX-512 VNNI" : f.avx512 ? "AVX-512" : f.avx2 ? "AVX2" : "no AVX2";
  if (f.avx512_bf16) cpu += ", AVX-512 BF16";
  if (f.amx_int8) cpu += std::string(", AMX-INT8 (tile state ") + amx_tile_state_text(amx_tile_state()) + ")";
  const char* env = std::getenv("LUKA_QUANT_PATH");
  const std::string chosen = std::string(quant_isa_name(isa)) +
                             (env != nullptr && *env != '\0' ? " (forced by LUKA_QUANT_PATH)" : " (the widest this CPU runs)");
  // One-row products take the vnni kernels on the amx path too (quant_gemv's row_kernel).
  const char* row_isa = isa == QuantIsa::kAmx ? "vnni" : quant_isa_name(isa);
  std::vector<QuantPathLine> lines;
  lines.push_back({"cpu", cpu});
  lines.push_back({"quant path", chosen});
  lines.push_back({"decode rows", std::string(row_isa) + " kernels, 8-bit activations (Q4_0 Q4_1 Q8_0 Q4_K Q6_K)"});
  lines.push_back({"lm_head Q8_0", std::string(wide(isa) ? "avx512" : "scalar") + " kernel against fp32 activations"});
  if (quant_gemm_uses_tiles(GgmlType::kQ4_0, isa))
    lines.push_back({"prefill", "amx int8 tiles from " + std::to_string(kTileMinRows) +
                                    " rows (Q4_0 Q4_1 Q8_0 Q4_K); Q6_K and fewer rows: dequantized slices, LibTorch fp32"});
  else
    lines.push_back({"prefill", "dequantized slices, LibTorch fp32 matmul"});
  return lines;
}

void quant_gemm(GgmlType type, const void* w, std::int64_t out, std::int64_t in, const float* x, std::int64_t rows, float* y,
                QuantIsa isa) {
  if (!quant_gemv_supports(type))
    throw std::invalid_argument(std::string("quant_gemm: unsupported weight type ") + gguf::type_name(type));
  const std::int64_t block = block_elements(type);
  if (in <= 0 || in % block != 0)
    throw std::invalid_argument("quant_gemm: input length " + std::to_string(in) + " is not a positive multiple of " +
                                std::to_string(block) + " (" + gguf::type_name(type) + " blocks)");
  if (!quant_isa_supported(isa))
    throw std::invalid_argument(std::string("quant_gemm: the ") + quant_isa_name(isa) + " path cannot run: " + quant_isa_why_not(isa));
  if (rows <= 0 || out <= 0) return;
  if (quant_gemm_uses_tiles(type, isa)) {
    detail::amx_gemm(type, w, out, in, x, rows, y);
    return;
  }
  const RowKernel kernel = row_kernel(type, isa);
  const auto* base = static_cast<const std::uint8_t*>(w);
  const std::int64_t row_bytes = in / block * block_bytes(type);
  std::vector<QuantizedActivation> xq(static_cast<std::size_t>(rows));
  at::parallel_for(0, rows, 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) quantize_activation(type, x + r * in, in, xq[static_cast<std::size_t>(r)], isa);
  });
  // Rows of weights outermost: each weight row is read once and stays in cache for every input row.
  const std::int64_t grain = std::max<std::int64_t>(1, 32768 / (in * rows));
  at::parallel_for(0, out, grain, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o)
      for (std::int64_t r = 0; r < rows; ++r) y[r * out + o] = kernel(base + o * row_bytes, xq[static_cast<std::size_t>(r)]);
  });
}

}  // namespace luka::cpu
