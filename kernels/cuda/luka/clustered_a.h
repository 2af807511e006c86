// Clustered decode, kernel A of two (docs/kernels-v2.md): the split pass over every page summary
// and the raw tail, a KV head's GQA group per block, rows by 16-byte cp.async through a
// multi-stage pipeline; each split writes its online-softmax state per head and the logits of its
// entries; the last block to finish selects each head's top_k pages by logit (ties to the lower
// page), so kernel B (children, merge, finalize) starts with the picks in place. Plain CUDA C++ API.
#pragma once

#include <cstdint>
#include <string>

namespace luka::cuda::v2 {

struct ClusteredAArgs {
  bool bf16 = true;             // q, summaries, K/V: bf16, else fp16
  const void* q = nullptr;      // [H, D]
  const void* sum_k = nullptr;  // [KV, page_cap, D] summary keys
  const void* sum_v = nullptr;  // [KV, page_cap, D] summary values
  const float* bias = nullptr;  // [KV, page_cap] or null (bias none)
  std::int64_t page_cap = 0, pages = 0;
  const void* k = nullptr;  // the cache [KV, T, D] (head_stride, token_stride elements)
  const void* v = nullptr;
  std::int64_t head_stride = 0, token_stride = 0;
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0, tokens = 0, paged_end = 0;  // raw tail [paged_end, tokens)
  float scale = 1.0f;
  int splits = 0;                   // 0: automatic
  int top_k = 3;                    // pages picked per head, at most 8 (0: none)
  float* states = nullptr;          // [H, splits, D + 2] (m, l, acc) scratch
  float* logits = nullptr;          // [H, pages + tail] scratch
  std::int32_t* picks = nullptr;    // [H, top_k]: the picked pages, −1 past the pages there are
  unsigned int* counter = nullptr;  // one zeroed counter; the last block resets it
};

std::int64_t clustered_a_splits(std::int64_t kv_heads, std::int64_t entries, int requested);

// Launches kernel A on `stream`; "" on success, else what is wrong. Never synchronizes.
std::string clustered_a(const ClusteredAArgs& args, void* stream);

}  // namespace luka::cuda::v2
