// Dequantization of every supported ggml type: blocks packed by hand from chosen values (the
// expected floats follow from the block definition, element by element), then random blocks
// against the `gguf` package's dequantize (the reference transformers uses).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/gguf/ggml_types.h"
#include "core/util/npy.h"

namespace luka::gguf {
namespace {

void put_half(std::uint8_t* p, std::uint16_t h) { std::memcpy(p, &h, 2); }

constexpr std::uint16_t kHalfOne = 0x3C00, kHalfHalf = 0x3800, kHalfQuarter = 0x3400, kHalfMinusOne = 0xBC00;

std::vector<float> run(GgmlType type, const std::vector<std::uint8_t>& block, std::int64_t blocks = 1) {
  std::vector<float> out(static_cast<std::size_t>(blocks * type_traits(static_cast<std::uint32_t>(type))->block_elements));
  dequantize(type, block.data(), blocks, out.data());
  return out;
}

TEST(Dequant, HalfAndBfloat16BitPatterns) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)) && half_to_float(0x8000) == 0.0f);
  EXPECT_TRUE(std::isinf(half_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC040), -3.0f);

  const std::vector<std::uint8_t> f16 = {0x00, 0x3C, 0x00, 0xC0};
  EXPECT_EQ(run(GgmlType::kF16, f16, 2), (std::vector<float>{1.0f, -2.0f}));
  const std::vector<std::uint8_t> bf16 = {0x80, 0x3F, 0x40, 0xC0};
  EXPECT_EQ(run(GgmlType::kBF16, bf16, 2), (std::vector<float>{1.0f, -3.0f}));
}

TEST(Dequant, Q8_0) {
  std::vector<std::uint8_t> b(34);
  put_half(b.data(), kHalfHalf);  // d = 0.5
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(4 * j - 64));
  const auto y = run(GgmlType::kQ8_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(4 * j - 64)) << j;
}

// Element j < 16 is the low nibble of qs[j], element j >= 16 the high nibble of qs[j - 16].
std::vector<std::uint8_t> pack_nibbles_32(const int* v) {
  std::vector<std::uint8_t> qs(16);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<std::uint8_t>(v[j] | (v[j + 16] << 4));
  return qs;
}

TEST(Dequant, Q4_0) {
  int v[32];
  for (int j = 0; j < 32; ++j) v[j] = (5 * j + 3) % 16;
  std::vector<std::uint8_t> b(2);
  put_half(b.data(), kHalfQuarter);  // d = 0.25
  const auto qs = pack_nibbles_32(v);
  b.insert(b.end(), qs.begin(), qs.end());
  const auto y = run(GgmlType::kQ4_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * static_cast<float>(v[j] - 8)) << j;
}

TEST(Dequant, Q4_1) {
  int v[32];
  for (int j = 0; j < 32; ++j) v[j] = (7 * j + 1) % 16;
  std::vector<std::uint8_t> b(4);
  put_half(b.data(), kHalfHalf);          // d = 0.5
  put_half(b.data() + 2, kHalfMinusOne);  // m = -1
  const auto qs = pack_nibbles_32(v);
  b.insert(b.end(), qs.begin(), qs.end());
  const auto y = run(GgmlType::kQ4_1, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(v[j]) - 1.0f) << j;
}

TEST(Dequant, Q4_K) {
  // Eight sub-blocks of 32 with 6-bit scales and mins; one scale (37) and one min (50) use the
  // high bits that live in the top of the first eight bytes.
  const int sc[8] = {1, 2, 3, 4, 5, 37, 7, 8};
  const int mn[8] = {0, 2, 4, 6, 8, 10, 50, 14};
  std::uint8_t scales[12] = {};
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<std::uint8_t>(sc[j] & 63);
    scales[j + 4] = static_cast<std::uint8_t>(mn[j] & 63);
  }
  for (int j = 4; j < 8; ++j) {
    scales[j + 4] = static_cast<std::uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
    scales[j - 4] |= static_cast<std::uint8_t>((sc[j] >> 4) << 6);
    scales[j] |= static_cast<std::uint8_t>((mn[j] >> 4) << 6);
  }
  int v[256];
  for (int e = 0; e < 256; ++e) v[e] = (e * 11 + 5) % 16;
  // Element e of 64-chunk k = e / 64, r = e % 64: low nibble of qs[32k + r] for r < 32, else the
  // high nibble of qs[32k + r - 32].
  std::uint8_t qs[128] = {};
  for (int e = 0; e < 256; ++e) {
    const int k = e / 64, r = e % 64;
    if (r < 32) {
      qs[32 * k + r] |= static_cast<std::uint8_t>(v[e]);
    } else {
      qs[32 * k + r - 32] |= static_cast<std::uint8_t>(v[e] << 4);
    }
  }
  std::vector<std::uint8_t> b(144);
  put_half(b.data(), kHalfOne);       // d = 1
  put_half(b.data() + 2, kHalfHalf);  // dmin = 0.5
  std::memcpy(b.data() + 4, scales, 12);
  std::memcpy(b.data() + 16, qs, 128);
  const auto y = run(GgmlType::kQ4_K, b);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    EXPECT_EQ(y[e], 1.0f * static_cast<float>(sc[s]) * static_cast<float>(v[e]) - 0.5f * static_cast<float>(mn[s])) << e;
  }
}

TEST(Dequant, Q6_K) {
  std::int8_t sc[16];
  for (int i = 0; i < 16; ++i) sc[i] = static_cast<std::int8_t>(3 * i - 20);
  int v[256];  // 6-bit values 0..63
  for (int e = 0; e < 256; ++e) v[e] = (e * 7 + 3) % 64;
  // Element e, n = e / 128, k = (e % 128) / 32, l = e % 32: the low 4 bits sit in ql[64n + l] (k
  // 0, 2) or ql[64n + 32 + l] (k 1, 3), low nibble for k < 2 and high for k >= 2; the top 2 bits
  // sit in qh[32n + l] at bit 2k.
  std::uint8_t ql[128] = {}, qh[64] = {};
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = v[e] & 0xF, hi = v[e] >> 4;
    std::uint8_t& q = ql[64 * n + (k % 2 == 1 ? 32 : 0) + l];
    q |= static_cast<std::uint8_t>(k < 2 ? lo : lo << 4);
    qh[32 * n + l] |= static_cast<std::uint8_t>(hi << (2 * k));
  }
  std::vector<std::uint8_t> b(210);
  std::memcpy(b.data(), ql, 128);
  std::memcpy(b.data() + 128, qh, 64);
  std::memcpy(b.data() + 192, sc, 16);
  put_half(b.data() + 208, kHalfQuarter);  // d = 0.25
  const auto y = run(GgmlType::kQ6_K, b);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.25f * static_cast<float>(sc[e / 16]) * static_cast<float>(v[e] - 32)) << e;
}

TEST(Dequant, SizesAndNames) {
  EXPECT_EQ(type_traits(12)->block_bytes, 144);  // Q4_K
  EXPECT_EQ(type_traits(14)->block_bytes, 210);  // Q6_K
  EXPECT_EQ(type_traits(3)->block_bytes, 20);    // Q4_1
  EXPECT_FALSE(type_traits(4).has_value());      // removed Q4_2
  EXPECT_FALSE(type_traits(1000).has_value());
  EXPECT_EQ(type_label(13), "Q5_K");
  EXPECT_EQ(type_label(77), "type 77");
  EXPECT_FALSE(can_dequantize(GgmlType::kQ5_K));
  float out[256];
  std::uint8_t block[176] = {};
  EXPECT_THROW(dequantize(GgmlType::kQ5_K, block, 1, out), std::invalid_argument);
}

// Random blocks against gguf.quants.dequantize, written by tests/fixtures/gguf_reference.py.
TEST(Dequant, MatchesGgufPackageOnRandomBlocks) {
  const std::filesystem::path dir = std::filesystem::path(LUKA_TEST_WORK) / "gguf" / "dequant";
  if (!std::filesystem::exists(dir / "Q4_K.bin")) GTEST_SKIP() << "no dequant references in " << dir;
  const std::pair<const char*, GgmlType> types[] = {{"F16", GgmlType::kF16},   {"BF16", GgmlType::kBF16},
                                                    {"Q8_0", GgmlType::kQ8_0}, {"Q4_0", GgmlType::kQ4_0},
                                                    {"Q4_1", GgmlType::kQ4_1}, {"Q4_K", GgmlType::kQ4_K},
                                                    {"Q6_K", GgmlType::kQ6_K}};
  for (const auto& [name, type] : types) {
    std::ifstream in(dir / (std::string(name) + ".bin"), std::ios::binary);
    const std::vector<std::uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const NpyArray ref = read_npy_f32(dir / (std::string(name) + ".npy"));
    const auto t = *type_traits(static_cast<std::uint32_t>(type));
    const std::int64_t blocks = static_cast<std::int64_t>(raw.size()) / t.block_bytes;
    ASSERT_EQ(static_cast<std::int64_t>(ref.data.size()), blocks * t.block_elements) << name;
    const auto y = run(type, raw, blocks);
    // The same arithmetic in the same order: bit-identical.
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < y.size(); ++i) mismatches += std::memcmp(&y[i], &ref.data[i], 4) != 0;
    EXPECT_EQ(mismatches, 0u) << name << ": " << mismatches << " of " << y.size() << " values differ";
  }
}

}  // namespace
}  // namespace luka::gguf
