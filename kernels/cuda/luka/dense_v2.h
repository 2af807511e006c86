// Dense decode attention v2 (docs/kernels-v2.md): one query token per head against a bf16/fp16
// KV cache, split over the sequence. A block holds a KV head's whole GQA group, so each K/V row is
// read once for all its query heads; rows arrive by 16-byte cp.async copies through a multi-stage
// shared-memory pipeline. The combine merges the splits and, given the logits, folds the
// accumulator update in (h2o_score per query head, importance per KV head, in the scaled
// per-token form of kernels/common/page_accumulators.h). Plain CUDA C++ API.
#pragma once

#include <cstdint>
#include <string>

namespace luka::cuda::v2 {

struct DenseArgs {
  bool bf16 = true;         // q, k, v, out: bf16, else fp16; accumulation is fp32
  const void* q = nullptr;  // [H, D] contiguous
  const void* k = nullptr;  // [KV, T, D]: element (h, t, d) at h·head_stride + t·token_stride + d
  const void* v = nullptr;  // same layout as k
  void* out = nullptr;      // [H, D] contiguous
  std::int64_t heads = 0, kv_heads = 0, tokens = 0, head_dim = 0;
  std::int64_t head_stride = 0, token_stride = 0;  // in elements; multiples of 8 (16-byte rows)
  float scale = 1.0f;
  int splits = 0;              // 0: chosen from the length and the KV heads
  float* workspace = nullptr;  // dense_v2_workspace_floats(...) floats of device memory
  // Accumulators (all null: none). logits: [H, tokens] scratch the split pass fills; h2o
  // [H, acc_stride] gets p·add_scale added (add_scale = γ^(base − step), page_accumulators.h);
  // importance [KV, acc_stride] the group mean of p.
  float* logits = nullptr;
  float* h2o = nullptr;
  float* importance = nullptr;
  std::int64_t acc_stride = 0;
  float add_scale = 1.0f;
};

std::int64_t dense_v2_splits(std::int64_t kv_heads, std::int64_t tokens, int requested);
std::int64_t dense_v2_workspace_floats(std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim,
                                       std::int64_t tokens, int splits);

// Launches the split and combine kernels on `stream` (a cudaStream_t; nullptr = default). Head
// dims 64 and 128, 1, 2, 4 or 8 query heads per KV head, 16-byte aligned rows. Returns "" on
// success, else what is wrong; never synchronizes.
std::string dense_v2(const DenseArgs& args, void* stream);

}  // namespace luka::cuda::v2
