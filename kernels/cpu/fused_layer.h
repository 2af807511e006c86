// The CPU twins of the fused per-layer CUDA kernels (kernels/cuda/fused/fused_layer.h): the same
// arguments (kernels/common/fused_layer.h, host pointers here) and the same element math
// (kernels/common/fused_ops.h). Each reduction is summed in the order the kernel sums it (a
// strided per-thread sum, then a butterfly within each warp of 32, then one across the warps), so
// a kernel compiled without FMA contraction gives the twin's values bit for bit, up to the device's
// cosf/sinf/expf (RoPE tables and SwiGLU), which may differ from the host's by an fp32 ulp or two.
// The GPU tests (tests/kernels/cuda/test_fused_layer_cuda.cpp) compare the two.
#pragma once

#include <cstdint>

#include "kernels/common/fused_layer.h"

namespace luka::cpu {

// The threads the norm kernel runs per row (a block), which fixes its summation order.
constexpr std::int64_t kNormThreads = 256;

// Each throws std::invalid_argument with fused::check's message for arguments the kernel refuses.
void residual_rms_norm(const fused::NormArgs& args);
void rope_tables(const fused::RopeTableArgs& args);
void qkv_norm_rope(const fused::QkvArgs& args);
void swiglu(const fused::SwigluArgs& args);

// The kernels' block sum: `threads` threads each sum their values (index t, t + threads, ...)
// from 0 in order, then the warps' butterflies and the butterfly over the warps' sums.
// `value(i)` gives element i.
template <class F>
float block_sum(std::int64_t n, std::int64_t threads, F value) {
  float per_thread[1024] = {};
  for (std::int64_t t = 0; t < threads; ++t)
    for (std::int64_t i = t; i < n; i += threads) per_thread[t] += value(i);
  const auto butterfly = [](float* v) {  // 32 lanes, as __shfl_xor_sync from 16 down to 1
    for (int o = 16; o > 0; o >>= 1) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ o];
      for (int l = 0; l < 32; ++l) v[l] = next[l];
    }
    return v[0];
  };
  const std::int64_t warps = (threads + 31) / 32;
  float sums[32] = {};
  for (std::int64_t w = 0; w < warps; ++w) sums[w] = butterfly(per_thread + 32 * w);
  return butterfly(sums);
}

}  // namespace luka::cpu
