// Device helpers shared by the attention kernels: element conversion, warp reductions and a
// bump allocator over one caller-provided workspace.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <string>

namespace luka::cuda::detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Online-softmax state of one query head: running max m, sum l and weighted values acc.
// Partials live in workspaces as (m, l, acc[D]) records of D + 2 floats.
constexpr float kEmptyMax = -FLT_MAX;

// Split-K splits for `entries` keys (or cover entries) when each split is `rows` blocks (one per
// KV head or head): at least one per `per_split` entries, and more while each keeps
// kMinPerSplit entries until about kTargetBlocks blocks run (two waves of a 132-SM GPU), at most
// max_splits. A requested count (> 0) is used as given, capped at the entries and at
// kMaxRequestedSplits. The automatic count never decreases as entries grow: workspace bounds
// for a whole run rely on that.
constexpr int kTargetBlocks = 264;
constexpr int kMinPerSplit = 32;
constexpr int kMaxRequestedSplits = 4096;
inline int split_count(std::int64_t entries, int requested, std::int64_t rows, int per_split, int max_splits) {
  const std::int64_t n = entries > 1 ? entries : 1;
  if (requested > 0) return static_cast<int>(std::min<std::int64_t>({requested, n, kMaxRequestedSplits}));
  const std::int64_t by_size = (n + per_split - 1) / per_split;
  const std::int64_t by_blocks = std::min<std::int64_t>((kTargetBlocks + rows - 1) / std::max<std::int64_t>(rows, 1),
                                                        (n + kMinPerSplit - 1) / kMinPerSplit);
  return static_cast<int>(std::clamp<std::int64_t>(std::max(by_size, by_blocks), 1, max_splits));
}

// Shared memory combine_splits needs, in bytes (splits + 2 floats, rounded up to 16 bytes).
inline std::size_t combine_shared_bytes(int splits) { return static_cast<std::size_t>((splits + 2 + 3) / 4) * 4 * sizeof(float); }

// Block-wide: merges `splits` partials (m, l, acc[D]) at `base` (records of D + 2 floats) into
// out[0, D) and, when `norm` is given, norm[0] = max, norm[1] = 1 / sum. `sh` is
// combine_shared_bytes(splits) of shared memory: warp 0 puts the max and sum in sh[0..1] and
// each split's weight exp(m_s − M) in sh[2 + s] (0 for an empty split, l_s = 0); then every
// thread sums its dims.
template <class T>
__device__ void combine_splits(const float* __restrict__ base, int splits, int D, T* __restrict__ out, float* __restrict__ norm,
                               float* sh) {
  const int tid = threadIdx.x, lane = tid % 32;
  float* f = sh + 2;
  if (tid < 32) {
    float M = kEmptyMax;
    for (int s = lane; s < splits; s += 32) M = fmaxf(M, base[static_cast<long long>(s) * (D + 2)]);
    M = warp_max(M);
    float L = 0.f;
    for (int s = lane; s < splits; s += 32) {
      const float* part = base + static_cast<long long>(s) * (D + 2);
      const float w = part[1] != 0.f ? __expf(part[0] - M) : 0.f;
      f[s] = w;
      L += part[1] * w;
    }
    L = warp_sum(L);
    if (lane == 0) {
      sh[0] = M;
      sh[1] = L;
    }
  }
  __syncthreads();
  const float L = sh[1];
  const volatile float* weight = f;  // one load per split: no paired loads past the last one
  for (int d = tid; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float w = weight[s];
      if (w != 0.f) acc += base[static_cast<long long>(s) * (D + 2) + 2 + d] * w;
    }
    out[d] = from_float<T>(acc / L);
  }
  if (norm && tid == 0) {
    norm[0] = sh[0];
    norm[1] = 1.f / L;
  }
}

// Carves aligned sub-buffers out of one workspace; `bytes()` is what a dry run needs.
class Bump {
 public:
  explicit Bump(void* base) : base_(static_cast<char*>(base)) {}
  template <class T>
  T* take(std::int64_t count) {
    offset_ = (offset_ + 255) & ~std::size_t{255};
    T* p = base_ ? reinterpret_cast<T*>(base_ + offset_) : nullptr;
    offset_ += static_cast<std::size_t>(count > 0 ? count : 0) * sizeof(T);
    return p;
  }
  std::size_t bytes() const { return offset_ + 256; }

 private:
  char* base_;
  std::size_t offset_ = 0;
};

inline std::string launch_error() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

}  // namespace luka::cuda::detail
