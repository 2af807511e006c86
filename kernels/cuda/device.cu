#include "kernels/cuda/device.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace luka::cuda {
namespace {

// One block per row; a block-wide sum of squares in fp32, then the scaled write.
__global__ void rms_norm_f32_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                    float* __restrict__ y, std::int64_t cols, float eps) {
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.0f;
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) sum += row[i] * row[i];
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    sum = lane < warps ? warp_sums[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) warp_sums[0] = sum;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / static_cast<float>(cols) + eps);
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[i] = row[i] * inv * weight[i];
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  if (index < 0 || index >= device_count() || cudaGetDeviceProperties(&prop, index) != cudaSuccess) return {};
  char text[320];
  std::snprintf(text, sizeof text, "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string rms_norm_f32(const float* x, const float* weight, float* y, std::int64_t rows, std::int64_t cols,
                         float eps, void* stream) {
  if (rows <= 0 || cols <= 0) return {};
  rms_norm_f32_kernel<<<static_cast<unsigned>(rows), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, weight, y,
                                                                                                   cols, eps);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

}  // namespace luka::cuda
