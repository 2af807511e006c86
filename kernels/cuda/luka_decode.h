// The LuKA decode step on the GPU (docs/design.md §5): clustered and lined decode attention, the
// effective attention over raw tokens and the accumulator updates every mode feeds, and page
// compression. Plain CUDA C++: device pointers, sizes, a stream; nothing here synchronizes with
// the host, so a whole step can be captured in a CUDA graph. The CPU LukaAttention is the
// reference these kernels are tested against (tests/kernels/cuda/test_luka_decode_cuda.cpp).
//
// Every entry point returns "" on success, else what is wrong (bad sizes, or the CUDA error).
//
// Defined in kernels/cuda/luka/, one file per mode, paired with the CPU core's core/luka/cpu/:
// dense.cu, lined.cu, clustered.cu, pages.cu (page compression) and prefill.cu, with the
// accumulator update they share in accumulate.cu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/luka_params.h"
#include "kernels/cuda/decode_attention.h"

namespace luka::cuda {

// A layer's raw KV cache: element (g, t, d) at g * head_stride + t * token_stride + d.
struct KvView {
  ElemType type = ElemType::kBF16;
  const void* k = nullptr;
  const void* v = nullptr;
  std::int64_t kv_heads = 0, tokens = 0, head_dim = 0, head_stride = 0, token_stride = 0;
};

// The per-layer accumulators every mode updates from the effective attention (§5.1):
// importance [KV, ld] (the mean over a KV group's query heads) and h2o_score [H, ld].
// h2o ← decay·h2o + effective when decay ≠ 1, else h2o + effective.
struct Accumulators {
  float* importance = nullptr;
  float* h2o = nullptr;
  std::int64_t ld = 0;
  float decay = 1.0f;
};

struct DecodeCommon {
  KvView kv;
  const void* q = nullptr;        // [H, D], kv.type
  void* out = nullptr;            // [H, D], kv.type
  std::int64_t heads = 0;
  float scale = 1.0f;
  Accumulators acc;
  float* effective = nullptr;     // optional [H, tokens]: the effective attention row per head
  int splits = 0;                 // 0: automatic
};

// ---- dense ------------------------------------------------------------------------------------
// Dense attention plus the effective row and accumulators (LuKA's dense mode).
std::size_t luka_dense_workspace_bytes(const DecodeCommon& a);
std::string luka_dense_decode(const DecodeCommon& a, void* workspace, std::size_t workspace_bytes, void* stream);

// ---- lined (H2O) ------------------------------------------------------------------------------
// Cover = recent window [tokens - window, tokens) ∪ the `heavy` largest h2o_score positions
// outside it (summed over the heads of a selection unit; ties to the lower position), selected
// on the GPU from acc.h2o before this step's update.
struct LinedDecodeArgs {
  DecodeCommon c;
  std::int64_t window = 0;        // W, already resolved from window_frac and clamped to tokens
  std::int64_t heavy = 0;         // min(tokens - W, ⌈rho·tokens⌉)
  Selection share = Selection::kPerHead;
  int* heavy_out = nullptr;       // optional [H, heavy]: each head's heavy hitters, ascending
};
std::size_t lined_workspace_bytes(const LinedDecodeArgs& a);
// At least lined_workspace_bytes of any step of these settings over at most `tokens` positions.
std::size_t lined_workspace_bound(const LinedDecodeArgs& a, std::int64_t tokens);
std::string lined_decode(const LinedDecodeArgs& a, void* workspace, std::size_t workspace_bytes, void* stream);

// ---- clustered --------------------------------------------------------------------------------
// Page summaries: one key/value per KV head and page, fp32 or the cache's type.
struct Summaries {
  ElemType type = ElemType::kF32;
  const void* k = nullptr;        // [KV, capacity, D]
  const void* v = nullptr;        // [KV, capacity, D]
  const float* bias = nullptr;    // [KV, capacity]
  std::int64_t capacity = 0;
  std::int64_t pages = 0;         // P
  const int* page_start = nullptr;  // [P + 1] device: page p is [page_start[p], page_start[p + 1])
  std::int64_t paged_end = 0;     // host copy of page_start[P]: raw tail is [paged_end, tokens)
  const float* spread = nullptr;  // [KV, spread_ld]: an unrefined page's mass over its tokens
  std::int64_t spread_ld = 0;
};

struct ClusteredDecodeArgs {
  DecodeCommon c;
  Summaries s;
  RefineRule rule = RefineRule::kTopK;
  RefineMath math = RefineMath::kMassPreserving;
  Selection share = Selection::kPerHead;
  double epsilon = 0.01;          // compared with α in fp32, as on the CPU
  int top_k = 3;
  double top_frac = 0.125;
  double top_p = 0.5;
  int always_refine_first = 0;
  float* summary_mass = nullptr;  // optional [H, P]: α of each page before refinement
  int* refined = nullptr;         // optional [H, clustered_max_refined(a)]: refined pages, ascending
  int* refined_count = nullptr;   // optional [H]
};
// Slots per head for refined pages: a bound the host knows without reading the device.
std::int64_t clustered_max_refined(const ClusteredDecodeArgs& a);
std::size_t clustered_workspace_bytes(const ClusteredDecodeArgs& a);
// At least clustered_workspace_bytes of any step of these settings over at most `tokens`
// positions and `pages` pages.
std::size_t clustered_workspace_bound(const ClusteredDecodeArgs& a, std::int64_t tokens, std::int64_t pages);
std::string clustered_decode(const ClusteredDecodeArgs& a, void* workspace, std::size_t workspace_bytes, void* stream);

// ---- page compression -------------------------------------------------------------------------
// The compressors and biases are kernels/common/luka_params.h's; Compressor::kGsc (SemantiCache's
// clusters) runs on the CPU only, and the GPU layer refuses it before a step.
// Summarizes pages [first_page, first_page + count) (boundaries in page_start) into one
// key/value per KV head, writes each page's bias and its spread over its tokens.
struct CompressArgs {
  KvView kv;
  const float* importance = nullptr;  // [KV, importance_ld]
  std::int64_t importance_ld = 0;
  const int* page_start = nullptr;    // device, at least first_page + count + 1 entries
  std::int64_t first_page = 0, count = 0;
  std::int64_t max_page_tokens = 0;   // the longest of the pages (host knows the boundaries)
  Compressor compressor = Compressor::kMean;
  float tau = 1.0f;
  std::uint64_t seed = 0;
  int layer = 0;
  bool zero_v = false;
  SummaryBias bias = SummaryBias::kNone;
  ElemType summary_type = ElemType::kF32;
  void* sum_k = nullptr;              // [KV, capacity, D]
  void* sum_v = nullptr;
  float* sum_bias = nullptr;          // [KV, capacity]
  std::int64_t capacity = 0;
  float* spread = nullptr;            // [KV, spread_ld]
  std::int64_t spread_ld = 0;
};
std::string compress_pages(const CompressArgs& a, void* stream);

// ---- prefill ----------------------------------------------------------------------------------
// Exact causal attention of `queries` new tokens (positions q_pos0 ...) over the cache, in two
// passes that never hold the [queries, tokens] matrix in global memory: per query the softmax's
// max and sum and the output; then per tile of 32 keys the probabilities again, summed over the
// queries into importance / h2o_score (decay 1 only) and max-pooled into `pooled` cells of
// pool × pool (query rows × key columns) — the capture pyramid's finest level.
struct PrefillArgs {
  KvView kv;
  const void* q = nullptr;        // [H, queries, D], kv.type
  void* out = nullptr;            // [queries, H * D], kv.type (the o_proj input)
  std::int64_t heads = 0, queries = 0, q_pos0 = 0;
  float scale = 1.0f;
  Accumulators acc;               // decay must be 1
  float* pooled = nullptr;        // optional [H, ⌈queries/pool⌉, ⌈tokens/pool⌉], fp32
  std::int64_t pool = 1;          // a power of two
};
std::size_t prefill_workspace_bytes(const PrefillArgs& a);
std::string prefill_attention(const PrefillArgs& a, void* workspace, std::size_t workspace_bytes, void* stream);

// Largest page the compressor handles, and the most pages the sorting selection rules
// (top_frac, top_p, top_k above 8) handle on one layer.
constexpr std::int64_t kMaxPageTokens = 1024;
constexpr std::int64_t kMaxSortedPages = 16384;

}  // namespace luka::cuda
