// Dense decode attention on the GPU (issue 7's baseline and dense shadow): one query token per
// head against a KV cache, split over the sequence (split-K) with an online softmax per split and
// a combine step. GQA-aware: a block reads a KV head's keys and values once for all the query
// heads that share them. Plain CUDA C++ API: device pointers, sizes, strides, a stream.
#pragma once

#include <cstdint>
#include <string>

namespace luka::cuda {

enum class ElemType { kF32, kF16, kBF16 };

struct DecodeAttentionArgs {
  ElemType type = ElemType::kBF16;  // of q, k, v and out; accumulation is fp32
  const void* q = nullptr;          // [H, D] contiguous
  const void* k = nullptr;          // [KV, T, D], element (h, t, d) at h * head_stride + t * token_stride + d
  const void* v = nullptr;          // same layout as k
  void* out = nullptr;              // [H, D] contiguous
  std::int64_t heads = 0, kv_heads = 0, tokens = 0, head_dim = 0;
  std::int64_t head_stride = 0, token_stride = 0;  // in elements
  float scale = 1.0f;
  int splits = 0;                   // 0: chosen from the length and KV heads (common.cuh split_count)
  float* workspace = nullptr;       // decode_attention_workspace_floats(...) floats of device memory
  // Optional outputs for LuKA's dense mode: the logits s·q·k [H, tokens] and, per head, the
  // softmax's (max, 1 / sum) [H, 2], from which luka_decode.h's accumulation rebuilds the row.
  float* logits = nullptr;
  float* norm = nullptr;
};

// Floats of workspace the call needs for these sizes and splits (0 = automatic).
std::int64_t decode_attention_workspace_floats(std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, std::int64_t tokens,
                                               int splits);

// Launches the two kernels on `stream` (a cudaStream_t; nullptr = default). Supports head_dim
// up to 256 (a multiple of 32) and up to 8 query heads per KV head. Returns "" on success, else
// what is wrong (bad sizes, or the CUDA error text); never synchronizes.
std::string dense_decode_attention(const DecodeAttentionArgs& args, void* stream);

}  // namespace luka::cuda
