// One layer's LuKA state on the GPU and the dispatch of a decode step to the dense, lined or
// clustered kernels (luka_decode.h). It mirrors the CPU LukaAttention (core/luka): the same
// accumulators, the same rules (kernels/common/luka_rules.h: the lined window and budget, the page
// schedule), and a mode that may change before any step.
//
// The raw K/V stay the caller's (the model's KV cache); this class owns the accumulators,
// summaries, page boundaries and workspace, all device memory grown stream-ordered
// (cudaMallocAsync), so a step issues no host synchronization. Page boundaries are known on the
// host from the schedule alone, so the host never reads device state to plan a step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/luka_params.h"
#include "kernels/common/luka_rules.h"
#include "kernels/cuda/luka_decode.h"

namespace luka::cuda {

// The per-layer parameters: the same structs as core's LayerConfig (kernels/common/luka_params.h).
// The GPU runs the dense, lined and clustered modes; core/luka/cuda_attention refuses, before a
// step, what only the CPU path offers (gpu_unsupported).
struct LayerParams {
  AttentionMode mode = AttentionMode::kDense;
  LinedConfig lined;
  ClusteredConfig clustered;
  int splits = 0;  // split-K splits of the attention kernels (0: chosen from the length)
};

// Optional per-step outputs (device memory the caller owns), for captures and tests.
struct StepOutputs {
  float* effective = nullptr;      // [H, tokens]
  float* summary_mass = nullptr;   // clustered: [H, pages]
  int* refined = nullptr;          // clustered: [H, max_refined()]
  int* refined_count = nullptr;    // clustered: [H]
  int* heavy = nullptr;            // lined: [H, heavy_count()]
};

class LayerState {
 public:
  // summary_type: kF32, or the cache's type to halve the bytes a clustered step reads.
  LayerState(int layer, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, ElemType summary_type);
  ~LayerState();
  LayerState(const LayerState&) = delete;
  LayerState& operator=(const LayerState&) = delete;

  void set_params(const LayerParams& p) { params_ = p; }  // takes effect at the next step
  const LayerParams& params() const { return params_; }

  // Allocates for `tokens` positions ahead (state and the workspace of any mode's step with the
  // current parameters), so later steps up to it allocate nothing and can be captured into a
  // CUDA graph.
  std::string reserve(std::int64_t tokens, void* stream);

  // After a prefill computed elsewhere: its accumulators (device [KV, ld] and [H, ld] with
  // `tokens` valid columns) become the state, and the post-prefill pages are made from `kv`.
  std::string load_prefill(const float* importance, const float* h2o, std::int64_t ld, const KvView& kv, void* stream);

  // One decode step over kv (tokens() + 1 positions, the new one last): out [H, D] in kv.type.
  std::string decode(const void* q, void* out, const KvView& kv, float scale, void* stream, const StepOutputs& outputs = {});

  // Planning, for callers sizing StepOutputs before decode(kv with `tokens` positions).
  std::int64_t max_refined(std::int64_t tokens) const;
  std::int64_t heavy_count(std::int64_t tokens) const;
  std::int64_t window(std::int64_t tokens) const;

  std::int64_t tokens() const { return tokens_; }
  std::int64_t steps() const { return step_; }
  const std::vector<std::pair<std::int64_t, std::int64_t>>& pages() const { return pages_; }
  std::int64_t paged_end() const { return pages_.empty() ? 0 : pages_.back().second; }
  // Device views: importance [KV, ld()], h2o [H, ld()], spread [KV, ld()], summaries
  // [KV, summary_capacity(), D] in summary_type, bias [KV, summary_capacity()].
  const float* importance() const { return importance_; }
  const float* h2o() const { return h2o_; }
  const float* spread() const { return spread_; }
  std::int64_t ld() const { return cap_; }
  const void* summary_keys() const { return sum_k_; }
  const void* summary_values() const { return sum_v_; }
  const float* summary_bias() const { return sum_bias_; }
  std::int64_t summary_capacity() const { return pcap_; }

 private:
  std::string grow_tokens(std::int64_t tokens, void* stream);
  std::string grow_pages(std::int64_t pages, void* stream);
  std::string grow_workspace(std::size_t bytes, void* stream);
  std::string create_pages(const KvView& kv, std::int64_t decode_step, void* stream);
  rules::LinedRule lined_rule() const;
  rules::PageRule page_rule() const;
  DecodeCommon sizes(std::int64_t tokens) const;  // the layer's shapes and splits, no pointers
  ClusteredDecodeArgs clustered_args(const DecodeCommon& c) const;

  int layer_;
  std::int64_t H_, KV_, D_;
  ElemType summary_type_;
  LayerParams params_;
  std::int64_t step_ = 0, tokens_ = 0;
  rules::PageClock clock_;
  std::vector<std::pair<std::int64_t, std::int64_t>> pages_;
  std::int64_t cap_ = 0, pcap_ = 0;
  float *importance_ = nullptr, *h2o_ = nullptr, *spread_ = nullptr, *sum_bias_ = nullptr;
  void *sum_k_ = nullptr, *sum_v_ = nullptr;
  int* page_start_ = nullptr;  // [pcap_ + 1]
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace luka::cuda
