// NumPy .npy files (format 1.0), float32 only: what `luka forward` writes and tests read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace luka {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // C order
};

// Writes a little-endian float32 array. Throws luka::Error naming the path on failure.
void write_npy_f32(const std::filesystem::path& path, const float* data,
                   const std::vector<std::int64_t>& shape);

// Reads a little-endian float32 ('<f4'), C-order array; anything else is an error naming the path.
NpyArray read_npy_f32(const std::filesystem::path& path);

}  // namespace luka
