// Chunk bytes exactly as HDF5's filter pipeline stores them for the capture datasets
// (docs/capture-format.md): the shuffle filter (byte planes: all low bytes, then all high bytes)
// followed by the deflate filter (a zlib stream), or the raw bytes when a dataset has no filters.
// The writer hands these bytes to H5Dwrite_chunk, so compression can run wherever there are cores
// (the model's thread pool) and the I/O thread only writes; any HDF5 reader (h5py included)
// decodes them with its own filters. Level 1 uses rle_deflate (runs + Huffman, made for shuffled
// maps); levels 0 and 2-9 use libdeflate. Both emit standard zlib streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace luka::capture {

// Runs body(begin, end) over [0, n) in parallel ranges (e.g. at::parallel_for on the model's
// threads); the serial default runs body(0, n).
using ParallelFor = std::function<void(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body)>;
void serial_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body);

// `count` elements of `element_size` bytes at `data`, encoded for a dataset whose filters are
// shuffle + deflate(`level`) (level 0-9), or copied unchanged for level < 0 (no filters).
std::vector<std::uint8_t> encode_chunk(const void* data, std::size_t count, std::size_t element_size, int level);

// The same for a chunk of [chunk_rows][chunk_cols] elements whose top-left [rows][cols] block is
// read from `src` with a row stride of `stride` elements and the rest is zero padding: gathered
// and byte-shuffled in one pass, without a copy of the block.
std::vector<std::uint8_t> encode_tile(const void* src, std::size_t element_size, std::int64_t rows, std::int64_t cols,
                                      std::int64_t stride, std::int64_t chunk_rows, std::int64_t chunk_cols, int level);

// The inverse: undoes deflate and shuffle (level >= 0) or copies.
std::vector<std::uint8_t> decode_chunk(const std::uint8_t* bytes, std::size_t size, std::size_t count,
                                       std::size_t element_size, int level);
// The same into `out` (count * element_size bytes), for readers that decode many chunks (the
// live capture's map windows) without allocating each time.
void decode_chunk_to(const std::uint8_t* bytes, std::size_t size, std::size_t count, std::size_t element_size, int level,
                     void* out);

}  // namespace luka::capture
