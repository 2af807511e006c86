// Clustered decode, kernel B of two (docs/kernels-v2.md): per head, the children of the pages
// kernel A picked, the merge of A's split states, the finalize under mass-preserving or exact
// refinement, and the accumulators in the page-level form of kernels/common/page_accumulators.h
// (one value per page and head, per-token values for the raw tail and the children only). Pages
// are the fixed segmenter's: page p holds tokens [p·page_size, (p+1)·page_size). Plain CUDA C++ API.
// B is launched to overlap A's tail (programmatic dependent launch, ClusteredBArgs::overlap).
#pragma once

#include <cstdint>
#include <string>

namespace luka::cuda::v2 {

struct ClusteredBArgs {
  bool bf16 = true;
  bool exact = true;            // RefineMath::kExact, else mass-preserving
  const void* q = nullptr;      // [H, D]
  const void* sum_v = nullptr;  // [KV, page_cap, D]
  std::int64_t page_cap = 0, pages = 0, page_size = 16;
  const void* k = nullptr;  // the cache, as for kernel A
  const void* v = nullptr;
  std::int64_t head_stride = 0, token_stride = 0;
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0, tokens = 0, paged_end = 0;
  float scale = 1.0f;
  int splits = 0;  // kernel A's
  int top_k = 0;
  const float* states = nullptr;  // kernel A's outputs
  const float* logits = nullptr;
  const std::int32_t* picks = nullptr;
  void* out = nullptr;  // [H, D]
  // Accumulators (null: none): page_h2o [H, page_cap] decays by page_decay (γ^(step − page
  // stamp)) and takes each page's weight; page_imp [KV, page_cap] its group mean; token_h2o and
  // token_imp [H | KV, acc_stride] the raw tail's and the children's, h2o times add_scale.
  float* page_h2o = nullptr;
  float* page_imp = nullptr;
  float* token_h2o = nullptr;
  float* token_imp = nullptr;
  std::int64_t acc_stride = 0;
  float page_decay = 1.0f, add_scale = 1.0f;
  // Launch as a programmatic dependent of the kernel before it on the stream (kernel A), so B's
  // blocks start while A's tail drains (sm_90; elsewhere the attribute changes nothing).
  bool overlap = true;
};

std::string clustered_b(const ClusteredBArgs& args, void* stream);

}  // namespace luka::cuda::v2
