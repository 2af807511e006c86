// A fast deflate encoder for byte-shuffled attention maps: run-length matches (distance 1) plus
// one dynamic Huffman code per block, in a zlib stream (RFC 1950/1951) that any inflate decodes.
// It is the encoder behind deflate level 1, the capture default.
//
// Why not a general LZ77 encoder: after the shuffle filter a half-precision map is two byte
// planes. The high plane (sign, exponent, top mantissa bits) has a few bits of entropy and long
// runs of zeros right of the diagonal; the low plane is close to random where values are
// non-zero. Neither has the long repeated strings that a match finder is built for, so entropy
// coding plus runs gets a better ratio than zlib or libdeflate at level 1 in a fraction of the
// time. Blocks end at plane boundaries so each plane gets its own code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luka::capture {

// Writes the zlib stream of `in[0, n)` to `out`, which must hold rle_zlib_bound(n, plane) bytes,
// and returns its length. `plane`: the byte-plane length (element count of a shuffled chunk; n
// or 0 for unshuffled data) — no block spans two planes. A block whose code would not beat
// storing it is stored.
// Literals are written 64 at a time with AVX-512 (VBMI) where the CPU has it and
// `allow_avx512` is set; the portable writer emits the same bytes (tests compare the two).
std::size_t rle_zlib_compress(const std::uint8_t* in, std::size_t n, std::size_t plane, std::uint8_t* out,
                              bool allow_avx512 = true);
std::size_t rle_zlib_bound(std::size_t n, std::size_t plane);

// Whether this CPU runs the AVX-512 literal writer.
bool rle_avx512_available();

}  // namespace luka::capture
