// Device helpers shared by the attention kernels: element conversion, warp reductions and a
// bump allocator over one caller-provided workspace.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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
