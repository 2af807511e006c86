#include "kernels/cuda/luka/heavy_set.h"

#include <cuda_runtime.h>

namespace luka::cuda::v2 {
namespace {

// A unit's score: its heads' rows summed from zero in order (the host's and the CPU lined step's).
struct UnitScore {
  const float* h2o;
  long long stride;
  const std::int32_t* heads;
  int n;
  __device__ float operator()(std::int64_t t) const {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += h2o[heads[i] * stride + t];
    return s;
  }
};

// One thread per unit: the heap walks are sequential by nature and short (a few per step).
__global__ void heavy_set_update_kernel(luka::heavy::HeavySet* sets, const float* h2o, long long stride,
                                        const std::int32_t* unit_heads, int units, int unit_size, long long select_end,
                                        long long heavy, long long window_start) {
  const int u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= units) return;
  const UnitScore score{h2o, stride, unit_heads + u * unit_size, unit_size};
  luka::heavy::update(sets[u], score, select_end, heavy, window_start);
}

}  // namespace

std::string heavy_set_update(const HeavySetArgs& a, void* stream) {
  if (!a.sets || !a.h2o || !a.unit_heads || a.units <= 0 || a.unit_size <= 0)
    return "heavy_set_update: null arrays or no units";
  if (a.select_end < 0 || a.select_end > a.h2o_stride) return "heavy_set_update: select_end outside the h2o rows";
  constexpr int kThreads = 32;
  const int blocks = static_cast<int>((a.units + kThreads - 1) / kThreads);
  heavy_set_update_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      a.sets, a.h2o, a.h2o_stride, a.unit_heads, static_cast<int>(a.units), static_cast<int>(a.unit_size), a.select_end,
      a.heavy, a.window_start);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("heavy_set_update: ") + cudaGetErrorString(e);
}

}  // namespace luka::cuda::v2
