// CUDA device discovery and small building-block kernels, with a plain C++ API (no LibTorch):
// raw pointers, sizes and a stream. The attention kernels join this folder with the CUDA issue.
#pragma once

#include <cstdint>
#include <string>

namespace luka::cuda {

// Number of usable CUDA devices. A missing driver or no GPU means 0, not an error.
int device_count();

// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)" for device `index`; empty when there is none.
std::string device_name(int index);

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * weight, fp32, rows independent.
// Pointers are device memory; `stream` is a cudaStream_t (nullptr = default stream).
// Returns an empty string on success, else the CUDA error text.
std::string rms_norm_f32(const float* x, const float* weight, float* y, std::int64_t rows, std::int64_t cols,
                         float eps, void* stream);

}  // namespace luka::cuda
