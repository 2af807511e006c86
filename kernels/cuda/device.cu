#include "kernels/cuda/device.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace luka::cuda {

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

}  // namespace luka::cuda
