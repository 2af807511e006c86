// Runs only where a CUDA device is present; elsewhere each test skips and says why.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/device.h"

namespace {

TEST(CudaDevice, CountIsNonNegativeWithoutError) {
  // Without a driver this must report 0 rather than fail.
  EXPECT_GE(luka::cuda::device_count(), 0);
}

TEST(CudaDevice, RmsNormMatchesDirectFormula) {
  if (luka::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  const std::int64_t rows = 7, cols = 1000;
  const float eps = 1e-6f;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(rows * cols), w(cols), y(rows * cols);
  for (float& v : x) v = normal(rng);
  for (float& v : w) v = 1.0f + 0.1f * normal(rng);
  float *dx = nullptr, *dw = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dw, w.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, y.size() * sizeof(float)), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice);
  ASSERT_EQ(luka::cuda::rms_norm_f32(dx, dw, dy, rows, cols, eps, nullptr), "");
  ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += static_cast<double>(x[r * cols + c]) * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + eps);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double want = x[r * cols + c] * inv * w[c];
      // fp32 accumulation over 1000 terms in a different order: a few ulps of relative error.
      EXPECT_NEAR(y[r * cols + c], want, 1e-5 * (1.0 + std::fabs(want))) << r << "," << c;
    }
  }
}

}  // namespace
