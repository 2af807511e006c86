// Quest's query-aware page selection (Tang et al., "Quest: Query-Aware Sparsity for Efficient
// Long-Context LLM Inference", ICML 2024, §3): the cache is cut into pages of page_size positions,
// each page keeps the per-channel minimum and maximum of its keys, and at a decode step the query
// bounds q·k over a page from above by
//     U = Σ_c max(q_c · min_c, q_c · max_c);
// the `pages` pages with the highest bound are attended exactly, together with the recent window.
// Unselected pages are left out, not summarized (the difference from LuKA's clustered mode).
// kvpress has no Quest press; tests/fixtures/quest_reference.py is the NumPy reference.
//
// ATen on the CPU, float32. The layer mode `quest` (core/luka/cpu/quest.cpp) runs it at every decode step.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace luka::press {

struct QuestPages {
  std::int64_t page_size = 16;
  std::int64_t tokens = 0;  // T positions paged: ceil(T / page_size) pages, the last may be partial
  at::Tensor min, max;      // [kv_heads, pages, head_dim] float32
};

// Pages over keys [kv_heads, T, head_dim]. Throws luka::Error for page_size < 1 or a bad shape.
QuestPages quest_pages(const at::Tensor& keys, std::int64_t page_size);

// [heads, pages] float32: each query head's bound per page of its KV head (query head h reads
// KV head h / (heads / kv_heads)). query: [heads, head_dim].
at::Tensor quest_bounds(const QuestPages& pages, const at::Tensor& query);

// Each query head's attended positions, ascending: the last `recent` positions, and every position
// of the `pages` pages with the highest bound among the pages that begin before the recent window
// (higher bound first, the lower page on ties). The page that holds the decoding query is the
// window's, so Quest's "current page is always kept" holds with recent >= page_size.
std::vector<std::vector<std::int64_t>> quest_select(const QuestPages& pages, const at::Tensor& query,
                                                    std::int64_t pages_kept, std::int64_t recent);

}  // namespace luka::press
