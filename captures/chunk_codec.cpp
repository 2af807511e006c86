#include "captures/chunk_codec.h"

#include <cstring>
#include <memory>
#include <string>

#include <libdeflate.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "captures/rle_deflate.h"
#include "core/util/error.h"

namespace luka::capture {
namespace {

// One compressor per thread and level (a libdeflate compressor is not shared across threads).
libdeflate_compressor* compressor(int level) {
  struct Free {
    void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
  };
  thread_local std::unique_ptr<libdeflate_compressor, Free> cache[10];
  auto& c = cache[level];
  if (!c) c.reset(libdeflate_alloc_compressor(level));
  if (!c) fail("capture", "cannot allocate a deflate compressor");
  return c.get();
}

// The [rows][cols] block at `src` (row stride `stride` elements) as HDF5's shuffle filter lays
// out a [chunk_rows][chunk_cols] chunk of it, zero-padded: byte b of element e at b * count + e.
void gather_shuffled(const std::uint8_t* src, std::size_t size, std::int64_t rows, std::int64_t cols, std::int64_t stride,
                     std::int64_t chunk_rows, std::int64_t chunk_cols, std::uint8_t* out) {
  const std::size_t count = static_cast<std::size_t>(chunk_rows * chunk_cols);
  for (std::int64_t i = 0; i < chunk_rows; ++i) {
    const std::size_t e0 = static_cast<std::size_t>(i * chunk_cols);
    const std::int64_t w = i < rows ? cols : 0;
    const std::uint8_t* row = src + static_cast<std::size_t>(i * stride) * size;
    std::int64_t j = 0;
    if (size == 2) {
      std::uint8_t* lo = out + e0;
      std::uint8_t* hi = out + count + e0;
#if defined(__SSE2__)
      const __m128i low_byte = _mm_set1_epi16(0xff);
      for (; j + 16 <= w; j += 16) {  // 16 halves -> 16 low bytes and 16 high bytes
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * j));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * j + 16));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + j),
                         _mm_packus_epi16(_mm_and_si128(a, low_byte), _mm_and_si128(b, low_byte)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + j), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
      }
#endif
      for (; j < w; ++j) {
        lo[j] = row[2 * j];
        hi[j] = row[2 * j + 1];
      }
    } else {
      for (; j < w; ++j)
        for (std::size_t b = 0; b < size; ++b) out[b * count + e0 + static_cast<std::size_t>(j)] = row[static_cast<std::size_t>(j) * size + b];
    }
    for (std::size_t b = 0; b < size; ++b)
      std::memset(out + b * count + e0 + static_cast<std::size_t>(w), 0, static_cast<std::size_t>(chunk_cols - w));
  }
}

void unshuffle(const std::uint8_t* in, std::uint8_t* out, std::size_t count, std::size_t size) {
  if (size == 2) {  // halves: a loop the compiler vectorizes
    const std::uint8_t* lo = in;
    const std::uint8_t* hi = in + count;
    for (std::size_t i = 0; i < count; ++i) {
      out[2 * i] = lo[i];
      out[2 * i + 1] = hi[i];
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t b = 0; b < size; ++b) out[i * size + b] = in[b * count + i];
}

}  // namespace

void serial_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n > 0) body(0, n);
}

std::vector<std::uint8_t> encode_tile(const void* src, std::size_t element_size, std::int64_t rows, std::int64_t cols,
                                      std::int64_t stride, std::int64_t chunk_rows, std::int64_t chunk_cols, int level) {
  if (rows < 0 || cols < 0 || rows > chunk_rows || cols > chunk_cols || (rows > 1 && stride < cols))
    fail("capture", "a chunk's block does not fit the chunk");
  if (level > 9) fail("capture", "deflate level " + std::to_string(level) + " is not in 0..9");
  const auto* in = static_cast<const std::uint8_t*>(src);
  const std::size_t count = static_cast<std::size_t>(chunk_rows * chunk_cols), nbytes = count * element_size;
  if (level < 0) {  // no filters: the chunk as it is
    std::vector<std::uint8_t> out(nbytes, 0);
    for (std::int64_t i = 0; i < rows; ++i)
      std::memcpy(out.data() + static_cast<std::size_t>(i * chunk_cols) * element_size,
                  in + static_cast<std::size_t>(i * stride) * element_size, static_cast<std::size_t>(cols) * element_size);
    return out;
  }
  thread_local std::vector<std::uint8_t> planes, packed;
  if (planes.size() < nbytes) planes.resize(nbytes);
  gather_shuffled(in, element_size, rows, cols, stride, chunk_rows, chunk_cols, planes.data());
  if (level == 1) {
    const std::size_t bound = rle_zlib_bound(nbytes, count);
    if (packed.size() < bound) packed.resize(bound);
    const std::size_t n = rle_zlib_compress(planes.data(), nbytes, count, packed.data());
    return std::vector<std::uint8_t>(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(n));
  }
  libdeflate_compressor* c = compressor(level);
  const std::size_t bound = libdeflate_zlib_compress_bound(c, nbytes);
  if (packed.size() < bound) packed.resize(bound);
  const std::size_t n = libdeflate_zlib_compress(c, planes.data(), nbytes, packed.data(), bound);
  if (n == 0) fail("capture", "deflate failed");  // cannot happen with the bound above
  return std::vector<std::uint8_t>(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(n));
}

std::vector<std::uint8_t> encode_chunk(const void* data, std::size_t count, std::size_t element_size, int level) {
  const auto n = static_cast<std::int64_t>(count);
  return encode_tile(data, element_size, 1, n, n, 1, n, level);
}

std::vector<std::uint8_t> decode_chunk(const std::uint8_t* bytes, std::size_t size, std::size_t count,
                                       std::size_t element_size, int level) {
  std::vector<std::uint8_t> out(count * element_size);
  decode_chunk_to(bytes, size, count, element_size, level, out.data());
  return out;
}

void decode_chunk_to(const std::uint8_t* bytes, std::size_t size, std::size_t count, std::size_t element_size, int level,
                     void* out) {
  const std::size_t nbytes = count * element_size;
  if (level < 0) {
    if (size != nbytes) fail("capture", "raw chunk of the wrong size");
    std::memcpy(out, bytes, size);
    return;
  }
  // One decompressor and one scratch buffer per thread (a decompressor is not shared across threads).
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  thread_local std::unique_ptr<libdeflate_decompressor, Free> d;
  if (!d) d.reset(libdeflate_alloc_decompressor());
  if (!d) fail("capture", "cannot allocate a deflate decompressor");
  thread_local std::vector<std::uint8_t> shuffled;
  if (shuffled.size() < nbytes) shuffled.resize(nbytes);
  std::size_t got = 0;
  if (libdeflate_zlib_decompress(d.get(), bytes, size, shuffled.data(), nbytes, &got) != LIBDEFLATE_SUCCESS || got != nbytes)
    fail("capture", "corrupt deflate chunk");
  unshuffle(shuffled.data(), static_cast<std::uint8_t*>(out), count, element_size);
}

}  // namespace luka::capture
