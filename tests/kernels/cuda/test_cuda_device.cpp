// CUDA device discovery: runs everywhere; without a driver or a GPU it checks the zero-device answers.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device.h"

namespace {

// The count agrees with the runtime (0 where it reports no driver or no device), and a name exists
// for exactly the counted devices: indices below the count are named with their compute capability,
// the count itself and negative indices are not.
TEST(CudaDevice, NamesExistExactlyForTheCountedDevices) {
  int runtime = 0;
  if (cudaGetDeviceCount(&runtime) != cudaSuccess) {
    cudaGetLastError();
    runtime = 0;
  }
  const int count = luka::cuda::device_count();
  EXPECT_EQ(count, runtime);
  for (int i = 0; i < count; ++i) {
    const std::string name = luka::cuda::device_name(i);
    EXPECT_NE(name.find(" (sm_"), std::string::npos) << i << ": " << name;
    EXPECT_NE(name.find(" GiB)"), std::string::npos) << i << ": " << name;
  }
  EXPECT_EQ(luka::cuda::device_name(count), "");
  EXPECT_EQ(luka::cuda::device_name(-1), "");
  // Asking again after a failed query (no driver: a sticky error) gives the same answer.
  EXPECT_EQ(luka::cuda::device_count(), count);
}

}  // namespace
