#include "captures/chunk_codec.h"

#include <cstring>
#include <memory>
#include <string>

#include <libdeflate.h>

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

// HDF5's shuffle filter: byte b of element i goes to b * count + i.
void shuffle(const std::uint8_t* in, std::uint8_t* out, std::size_t count, std::size_t size) {
  if (size == 2) {
    std::uint8_t* lo = out;
    std::uint8_t* hi = out + count;
    for (std::size_t i = 0; i < count; ++i) {
      lo[i] = in[2 * i];
      hi[i] = in[2 * i + 1];
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t b = 0; b < size; ++b) out[b * count + i] = in[i * size + b];
}

void unshuffle(const std::uint8_t* in, std::uint8_t* out, std::size_t count, std::size_t size) {
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t b = 0; b < size; ++b) out[i * size + b] = in[b * count + i];
}

}  // namespace

void serial_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n > 0) body(0, n);
}

std::vector<std::uint8_t> encode_chunk(const void* data, std::size_t count, std::size_t element_size, int level) {
  const std::size_t nbytes = count * element_size;
  const auto* in = static_cast<const std::uint8_t*>(data);
  if (level < 0) return std::vector<std::uint8_t>(in, in + nbytes);
  if (level > 9) fail("capture", "deflate level " + std::to_string(level) + " is not in 0..9");
  thread_local std::vector<std::uint8_t> shuffled;
  shuffled.resize(nbytes);
  shuffle(in, shuffled.data(), count, element_size);
  if (level == 1) {
    std::vector<std::uint8_t> out;
    out.reserve(nbytes / 2);
    rle_zlib_compress(shuffled.data(), nbytes, count, out);
    return out;
  }
  libdeflate_compressor* c = compressor(level);
  std::vector<std::uint8_t> out(libdeflate_zlib_compress_bound(c, nbytes));
  const std::size_t n = libdeflate_zlib_compress(c, shuffled.data(), nbytes, out.data(), out.size());
  if (n == 0) fail("capture", "deflate failed");  // cannot happen with the bound above
  out.resize(n);
  return out;
}

std::vector<std::uint8_t> decode_chunk(const std::uint8_t* bytes, std::size_t size, std::size_t count,
                                       std::size_t element_size, int level) {
  const std::size_t nbytes = count * element_size;
  if (level < 0) {
    if (size != nbytes) fail("capture", "raw chunk of the wrong size");
    return std::vector<std::uint8_t>(bytes, bytes + size);
  }
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  std::unique_ptr<libdeflate_decompressor, Free> d(libdeflate_alloc_decompressor());
  if (!d) fail("capture", "cannot allocate a deflate decompressor");
  std::vector<std::uint8_t> shuffled(nbytes), out(nbytes);
  std::size_t got = 0;
  if (libdeflate_zlib_decompress(d.get(), bytes, size, shuffled.data(), nbytes, &got) != LIBDEFLATE_SUCCESS || got != nbytes)
    fail("capture", "corrupt deflate chunk");
  unshuffle(shuffled.data(), out.data(), count, element_size);
  return out;
}

}  // namespace luka::capture
