// The run-length + Huffman deflate encoder against zlib's own inflate: every stream decodes to
// its input exactly, on inputs that exercise each part of the format (runs of every length,
// runs across block and plane boundaries, incompressible data, skewed frequencies that need the
// code-length limit, empty and one-byte inputs), and its AVX-512 literal writer emits the same
// bytes as the portable one.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <vector>

#include "captures/rle_deflate.h"

namespace luka::capture {
namespace {

std::vector<std::uint8_t> inflate_all(const std::vector<std::uint8_t>& z, std::size_t expected) {
  std::vector<std::uint8_t> out(expected + 1);  // one spare byte: a longer stream is an error too
  uLongf got = static_cast<uLongf>(out.size());
  const int rc = uncompress(out.data(), &got, z.data(), static_cast<uLong>(z.size()));
  EXPECT_EQ(rc, Z_OK);
  out.resize(rc == Z_OK ? got : 0);
  return out;
}

std::vector<std::uint8_t> compress(const std::vector<std::uint8_t>& in, std::size_t plane = 0, bool allow_avx512 = true) {
  std::vector<std::uint8_t> z(rle_zlib_bound(in.size(), plane));
  z.resize(rle_zlib_compress(in.data(), in.size(), plane, z.data(), allow_avx512));
  return z;
}

// Both literal writers (the AVX-512 one where the CPU has it, and the portable one) must emit
// the same bytes; the stream must inflate to the input.
std::vector<std::uint8_t> round_trip(const std::vector<std::uint8_t>& in, std::size_t plane = 0) {
  const std::vector<std::uint8_t> z = compress(in, plane);
  EXPECT_EQ(z, compress(in, plane, /*allow_avx512=*/false)) << "the literal writers disagree";
  return inflate_all(z, in.size());
}

TEST(RleDeflate, EmptyAndSingleBytes) {
  EXPECT_EQ(round_trip({}), std::vector<std::uint8_t>{});
  for (const int b : {0, 1, 127, 255}) {
    const std::vector<std::uint8_t> one{static_cast<std::uint8_t>(b)};
    EXPECT_EQ(round_trip(one), one) << b;
  }
}

TEST(RleDeflate, RunsOfEveryLengthUpToTwoMatches) {
  // Each run length 1..600 after a different byte: covers every length symbol from 8 up and
  // its extra bits, runs split into several matches (over 258), and runs of 1-8 bytes that stay
  // literals (a run's first byte is a literal; a match repeats it 8 times or more).
  std::vector<std::uint8_t> in;
  for (int len = 1; len <= 600; ++len) {
    in.push_back(static_cast<std::uint8_t>(len * 7));
    in.insert(in.end(), static_cast<std::size_t>(len), static_cast<std::uint8_t>(len % 3 == 0 ? 0 : len));
  }
  EXPECT_EQ(round_trip(in), in);
  const std::vector<std::uint8_t> z = compress(in);
  EXPECT_LT(z.size() * 20, in.size()) << "runs should compress well";
}

TEST(RleDeflate, RandomBytesAreStoredNotExpanded) {
  std::mt19937 rng(3);
  std::vector<std::uint8_t> in(200000);
  for (auto& b : in) b = static_cast<std::uint8_t>(rng());
  const std::vector<std::uint8_t> z = compress(in);
  EXPECT_EQ(inflate_all(z, in.size()), in);
  // Stored: a 64 KiB block is two stored blocks of 5 bytes' overhead; plus the zlib header and checksum.
  EXPECT_LE(z.size(), in.size() + 6 + 10 * (in.size() / 65536 + 1));
}

TEST(RleDeflate, SkewedFrequenciesNeedTheLengthLimit) {
  // Fibonacci-like counts make an unlimited Huffman tree deeper than 15 bits.
  std::vector<std::uint8_t> in;
  std::uint64_t a = 1, b = 1;
  for (int s = 0; s < 24; ++s) {
    for (std::uint64_t k = 0; k < a; ++k) {
      in.push_back(static_cast<std::uint8_t>(s));
      in.push_back(static_cast<std::uint8_t>(200 - s));  // no runs: every byte is a literal
    }
    const std::uint64_t c = a + b;
    a = b;
    b = c;
    if (in.size() > 60000) break;
  }
  EXPECT_EQ(round_trip(in), in);
}

TEST(RleDeflate, ShuffledHalfPlanesAndMatchesAcrossBlocks) {
  // Plane-shaped data like a shuffled map chunk: a low plane of noisy mantissas with zero
  // stretches, a high plane of a few exponents and long zero runs; runs cross the plane and
  // 64 KiB block boundaries. Several plane lengths, odd ones included.
  std::mt19937 rng(11);
  for (const std::size_t count : {std::size_t{1}, std::size_t{77}, std::size_t{65536}, std::size_t{100003}}) {
    std::vector<std::uint8_t> in(2 * count);
    for (std::size_t i = 0; i < count; ++i) {
      const bool zero = (i / 300) % 3 == 0;
      in[i] = zero ? 0 : static_cast<std::uint8_t>(rng());
      in[count + i] = zero ? 0 : static_cast<std::uint8_t>(0x10 + rng() % 6);
    }
    EXPECT_EQ(round_trip(in, count), in) << count;
  }
  std::vector<std::uint8_t> zeros(3 * 65536 + 5, 0);
  EXPECT_EQ(round_trip(zeros, 65536), zeros);
}

TEST(RleDeflate, LargeBlocksCodeLiteralsTheSampleMissed) {
  // Blocks of 16 KiB and more build their code from every fourth literal. Byte values that occur
  // only between the sampled positions (here: only at odd positions, once or a few times, at the
  // ends of the range and inside it, after runs that shift the sampling phase) must still get a
  // code. Block sizes just below, at and above the threshold, in one plane and in two.
  std::mt19937 rng(23);
  for (const std::size_t n : {std::size_t{16383}, std::size_t{16384}, std::size_t{65536}, std::size_t{200001}}) {
    std::vector<std::uint8_t> in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint8_t>(40 + rng() % 8);
    for (std::size_t i = 1000; i < n; i += 4099) in[i] = static_cast<std::uint8_t>(i % 2 ? 3 : 250);  // rare, at the range's ends
    in[n / 2 + 1] = 44;                                                                             // common value, moved
    in[n / 3 | 1] = 100;                                                                            // once, inside the range
    for (std::size_t i = 5000; i + 20 < n; i += 7919) std::fill_n(in.begin() + static_cast<std::ptrdiff_t>(i), 9 + i % 5, std::uint8_t{0});
    EXPECT_EQ(round_trip(in), in) << n;
    EXPECT_EQ(round_trip(in, n / 2), in) << n << ", two planes";
    const std::vector<std::uint8_t> z = compress(in);
    EXPECT_LT(z.size() * 10, in.size() * 6) << "about 3 bits per byte expected, " << z.size() << " bytes from " << n;
  }
}

TEST(RleDeflate, ManyRandomInputs) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = rng() % 5000;
    const int alphabet = 1 + static_cast<int>(rng() % 40);
    const int run_bias = static_cast<int>(rng() % 4);
    std::vector<std::uint8_t> in(n);
    for (std::size_t i = 0; i < n; ++i)
      in[i] = i > 0 && static_cast<int>(rng() % 4) < run_bias ? in[i - 1] : static_cast<std::uint8_t>(rng() % static_cast<unsigned>(alphabet));
    const std::size_t plane = n ? 1 + rng() % n : 0;
    ASSERT_EQ(round_trip(in, plane), in) << "trial " << trial;
  }
}

TEST(RleDeflate, AvxLiteralWriterEmitsThePortableBytes) {
  if (!rle_avx512_available()) GTEST_SKIP() << "this CPU has no AVX-512 VBMI: only the portable literal writer runs here";
  // Literal stretches of every length 0..200 between runs long enough to be matches (the vector
  // writer takes 64 at a time and a masked tail), over small and full alphabets. The other tests compare the two writers
  // too, through round_trip (skewed codes up to the 14-bit limit, shuffled planes, random inputs).
  std::mt19937 rng(17);
  for (const int alphabet : {2, 7, 60, 256}) {
    std::vector<std::uint8_t> in;
    for (int len = 0; len <= 200; ++len) {
      for (int k = 0; k < len; ++k) {
        std::uint8_t b = static_cast<std::uint8_t>(rng() % static_cast<unsigned>(alphabet));
        if (!in.empty() && b == in.back()) b = static_cast<std::uint8_t>(b ^ 1);  // no accidental runs
        in.push_back(b);
      }
      in.insert(in.end(), 9 + static_cast<std::size_t>(len % 7), std::uint8_t{0});  // a literal, then a match of 8+
    }
    EXPECT_EQ(round_trip(in), in) << "alphabet " << alphabet;  // round_trip compares the writers' bytes
  }
}

}  // namespace
}  // namespace luka::capture
