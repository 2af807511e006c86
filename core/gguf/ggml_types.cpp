#include "core/gguf/ggml_types.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace luka::gguf {

namespace {

constexpr std::int64_t kQK = kBlockValues;         // elements per block of the 32-wide types
constexpr std::int64_t kQK_K = kSuperBlockValues;  // elements per K-quant super-block

std::uint16_t read_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
float read_half(const std::uint8_t* p) { return half_to_float(read_u16(p)); }

// Q4_K scales: 12 bytes pack eight 6-bit scales and eight 6-bit mins.
void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& d, std::uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// block_q4_0 { half d; u8 qs[16]; }: x = (nibble - 8) * d; low nibbles are elements 0..15.
void dequant_q4_0(const std::uint8_t* b, float* y) {
  const float d = read_half(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// block_q4_1 { half d; half m; u8 qs[16]; }: x = nibble * d + m.
void dequant_q4_1(const std::uint8_t* b, float* y) {
  const float d = read_half(b), m = read_half(b + 2);
  const std::uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// block_q8_0 { half d; i8 qs[32]; }: x = q * d.
void dequant_q8_0(const std::uint8_t* b, float* y) {
  const float d = read_half(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

// block_q4_K { half d; half dmin; u8 scales[12]; u8 qs[128]; }: eight sub-blocks of 32, each
// x = d * scale * nibble - dmin * min.
void dequant_q4_k(const std::uint8_t* b, float* y) {
  const float d = read_half(b), dmin = read_half(b + 2);
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < kQK_K; j += 64) {
    std::uint8_t sc, m;
    scale_min_k4(is + 0, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; half d; }: 6-bit values (low 4 bits in ql,
// high 2 in qh) minus 32, times d * scale of each 16-element group.
void dequant_q6_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = read_half(b + 208);
  for (int n = 0; n < kQK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<std::int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<std::int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<std::int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<std::int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * static_cast<float>(q1);
      y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
      y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
      y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::string type_label(std::uint32_t raw) {
  if (type_traits(raw)) return type_name(static_cast<GgmlType>(raw));
  return "type " + std::to_string(raw);
}

std::optional<TypeTraits> type_traits(std::uint32_t raw) {
  const BlockGeometry g = block_geometry(static_cast<GgmlType>(raw));
  if (g.values == 0) return std::nullopt;
  return TypeTraits{g.values, g.bytes};
}

bool can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void dequantize(GgmlType type, const void* src, std::int64_t blocks, float* dst) {
  const auto* p = static_cast<const std::uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, p, static_cast<std::size_t>(blocks) * 4); return;
    case GgmlType::kF16:
      for (std::int64_t i = 0; i < blocks; ++i) dst[i] = half_to_float(read_u16(p + 2 * i));
      return;
    case GgmlType::kBF16:
      for (std::int64_t i = 0; i < blocks; ++i) dst[i] = bf16_to_float(read_u16(p + 2 * i));
      return;
    default: break;
  }
  void (*block)(const std::uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::kQ4_0: block = dequant_q4_0; break;
    case GgmlType::kQ4_1: block = dequant_q4_1; break;
    case GgmlType::kQ8_0: block = dequant_q8_0; break;
    case GgmlType::kQ4_K: block = dequant_q4_k; break;
    case GgmlType::kQ6_K: block = dequant_q6_k; break;
    default: throw std::invalid_argument(std::string("dequantize: unsupported type ") + type_name(type));
  }
  const TypeTraits t = *type_traits(static_cast<std::uint32_t>(type));
  for (std::int64_t b = 0; b < blocks; ++b) block(p + b * t.block_bytes, dst + b * t.block_elements);
}

std::int64_t first_nonfinite_block(GgmlType type, const void* src, std::int64_t blocks) {
  // Byte offsets of each block's fp16 scales (see dequantize).
  int offsets[2] = {-1, -1};
  switch (type) {
    case GgmlType::kQ4_0: offsets[0] = 0; break;
    case GgmlType::kQ4_1: offsets[0] = 0, offsets[1] = 2; break;
    case GgmlType::kQ8_0: offsets[0] = 0; break;
    case GgmlType::kQ4_K: offsets[0] = 0, offsets[1] = 2; break;
    case GgmlType::kQ6_K: offsets[0] = 208; break;
    default: return -1;
  }
  const std::int64_t block_bytes = block_geometry(type).bytes;
  const auto* p = static_cast<const std::uint8_t*>(src);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (const int o : offsets) {
      if (o < 0) continue;
      const std::uint8_t* h = p + b * block_bytes + o;
      // fp16 exponent all ones: Inf or NaN.
      if (((h[1] >> 2) & 0x1F) == 0x1F) return b;
    }
  return -1;
}

}  // namespace luka::gguf
