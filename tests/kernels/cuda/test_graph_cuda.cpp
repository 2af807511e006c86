// The CUDA graph wrapper (kernels/cuda/graph): without a GPU it refuses with one line; on a GPU a
// recorded piece of stream work replays with the same effect as issuing it, its nodes are counted
// by type through cudaGraphGetNodes, and a capture-unsafe call inside the work fails the capture
// and leaves the stream usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/graph.h"

namespace luka::cuda {
namespace {

TEST(StepGraph, RefusesWithOneLineWhereThereIsNoGpu) {
  if (device_count() > 0) GTEST_SKIP() << "a GPU is present: the refusal is for machines without one";
  StepGraph g;
  bool ran = false;
  const std::string error = g.capture(reinterpret_cast<void*>(0x1), [&] {
    ran = true;
    return std::string();
  });
  EXPECT_NE(error.find("no"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(ran);
  EXPECT_FALSE(g.recorded());
  EXPECT_NE(g.replay(nullptr), "");
}

// Four memsets and three device-to-device copies, recorded, then replayed over fresh data: the
// buffers equal what issuing the same calls gives, computed here on the host.
TEST(StepGraph, ReplaysRecordedWorkAndCountsItsNodesByType) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  constexpr int kN = 1024;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::uint8_t *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 4 * kN), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 4 * kN), cudaSuccess);
  StepGraph g;
  double seconds = -1;
  const std::string error = g.capture(
      stream,
      [&] {
        for (int i = 0; i < 4; ++i)
          if (cudaMemsetAsync(a + i * kN, 10 + i, kN, stream) != cudaSuccess) return std::string("memset");
        for (int i = 0; i < 3; ++i)
          if (cudaMemcpyAsync(b + i * kN, a + (i + 1) * kN, kN, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
            return std::string("memcpy");
        return std::string();
      },
      &seconds);
  ASSERT_EQ(error, "");
  EXPECT_GE(seconds, 0);
  EXPECT_EQ(g.nodes().total, 7);
  EXPECT_EQ(g.nodes().memset, 4);
  EXPECT_EQ(g.nodes().memcpy, 3);
  EXPECT_EQ(g.nodes().kernels, 0);
  // Capture records without running: b is still what it was.
  ASSERT_EQ(cudaMemset(b, 0, 4 * kN), cudaSuccess);
  ASSERT_EQ(g.replay(stream), "");
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<std::uint8_t> host(4 * kN);
  ASSERT_EQ(cudaMemcpy(host.data(), b, 4 * kN, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(host[i * kN + 7], 11 + i) << i;
  EXPECT_EQ(host[3 * kN + 7], 0);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(stream);
}

TEST(StepGraph, ACaptureUnsafeCallFailsTheCaptureAndLeavesTheStreamUsable) {
  if (device_count() == 0) GTEST_SKIP() << "no GPU";
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  StepGraph g;
  const std::string error = g.capture(stream, [&] {
    cudaStreamSynchronize(stream);  // a host synchronisation inside the step
    return std::string();
  });
  EXPECT_NE(error, "");
  EXPECT_FALSE(g.recorded());
  cudaGetLastError();
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 256, stream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace luka::cuda
