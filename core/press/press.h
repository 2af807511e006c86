// The field's KV-cache compression methods, scored as NVIDIA kvpress 0.5.5 scores them (its
// "presses"): what a layer keeps of the prompt's cache after prefill, per KV head.
//
// A scorer gives every prompt position of every KV head a score (higher is kept); a budget says
// how many positions each head keeps; the allocation says how that budget is spread: the same
// count for every head (kvpress's ScorerPress), a count per layer in a pyramid (PyramidKV), or
// unequal counts per head inside the layer's total (AdaKV). Every default is kvpress's, and so is
// every rounding; docs/methods.md says where kvpress departs from the papers.
//
// ATen, on the CPU, in float32 whatever the inputs' dtype (kvpress scores in the model's dtype;
// the sets agree wherever the fp32 scores do not tie). The layer mode `press`
// (core/luka/cpu/press.cpp) calls it after the prompt's prefill and, with press_interval, during
// decoding (docs/methods.md).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace luka::press {

enum class Scorer {
  kStreamingLlm,       // StreamingLLMPress: n_sink first positions and the most recent ones
  kSnapKv,             // SnapKVPress: the last window_size queries' attention, pooled with kernel_size
  kTova,               // TOVAPress: the last query's attention, averaged over all query heads
  kKnorm,              // KnormPress: the smallest key norms
  kExpectedAttention,  // ExpectedAttentionPress: attention expected from future queries
  kRandom,             // RandomPress
};

enum class Allocation {
  kUniform,  // every KV head of every layer keeps the budget (ScorerPress)
  kPyramid,  // PyramidKVPress's layer budgets: more in lower layers, the same total
  kAdaKv,    // AdaKVPress: the layer's total spread over its heads by score, a safeguard per head
};

// The method names of docs/methods.md ("streaming_llm", "snapkv", ...), and back; an unknown name
// is luka::Error naming it and the known ones.
const char* scorer_name(Scorer s);
Scorer scorer_from_name(const std::string& name);

// How many of a layer's T prompt positions each KV head keeps.
struct Budget {
  double compression_ratio = 0.0;  // the fraction removed, in [0, 1)
  std::int64_t tokens = 0;         // > 0: keep this many instead (at most T)
  // kvpress's compute_n_kept: max(1, floor(T · (1 − ratio))); min(tokens, T) for a token budget.
  std::int64_t kept(std::int64_t T) const;
  // T · (1 − ratio) before kvpress floors it, or tokens: PyramidKV's formula takes it unrounded.
  double kept_exact(std::int64_t T) const;
  // Throws luka::Error("<where>: ...") for a ratio outside [0, 1) or negative tokens.
  void validate(const std::string& where) const;
};

// Every parameter with kvpress's default; each scorer reads its own.
struct ScorerParams {
  int n_sink = 4;                // streaming_llm, expected_attention
  int window_size = 64;          // snapkv (and pyramidkv's budgets)
  int kernel_size = 5;           // snapkv: average pooling over positions, odd
  int n_future_positions = 512;  // expected_attention: RoPE averaged over the next positions
  bool use_covariance = true;    // expected_attention
  bool use_vnorm = true;         // expected_attention: scores times the value norm
  double epsilon = 0.0;          // expected_attention: added before the value norm
  std::uint64_t seed = 0;        // random (kvpress's default is unseeded)
};

struct AllocationParams {
  Allocation allocation = Allocation::kUniform;
  int beta = 20;                 // pyramid: its steepness
  double alpha_safeguard = 0.2;  // adakv: each head keeps at least this share of the budget
};

// One layer's prompt, as the scorers need it. T prompt positions, head_dim d.
struct LayerInputs {
  at::Tensor keys;    // [kv_heads, T, d], post-RoPE: the layer's cache
  at::Tensor values;  // [kv_heads, T, d]
  // [heads, Tq, d], post-RoPE: the prompt's last Tq queries (Tq <= T). snapkv reads the last
  // window_size of them (and needs T > window_size), tova the last one.
  at::Tensor queries;
  // [heads, Tq, d], before RoPE (after Qwen3's q_norm): every prompt query (expected_attention);
  // during decoding the buffered decode queries, whose count also sets the future positions
  // (kvpress's DecodingPress hands its buffer of hidden states).
  at::Tensor queries_pre_rope;
  // RoPE's inverse frequencies [d / 2] and its attention scaling (expected_attention's future positions).
  at::Tensor inv_freq;
  double attention_scaling = 1.0;
};

// [kv_heads, T] float32 scores; higher is kept. `kept` is the layer's per-head count (only
// streaming_llm's scores depend on it). Throws luka::Error for inputs a scorer cannot use (too
// few queries for the window, T <= n_sink, mismatched shapes).
at::Tensor score(Scorer s, const ScorerParams& p, const LayerInputs& in, std::int64_t kept);

// Each KV head's kept positions, ascending.
using KeptSets = std::vector<std::vector<std::int64_t>>;

// The `n` highest scores of each row of scores [kv_heads, T]; on equal scores the lower position
// is kept (kvpress leaves ties to torch.topk).
KeptSets top_per_head(const at::Tensor& scores, std::int64_t n);

// AdaKV over scores [kv_heads, T] with `n` kept per head on average: each head's
// max(1, floor(n · alpha)) best are kept first (0 when n is 0, none with alpha 0), then the
// kv_heads · (T − n) lowest scores of the layer are pruned. On equal scores the lower
// (head, position) is kept.
KeptSets adakv_select(const at::Tensor& scores, std::int64_t n, double alpha_safeguard);

// PyramidKV's count for `layer` of `layers` (KVCache-Factory's formula as kvpress writes it):
// with B = the budget's kept_exact(T), min = B / beta and max = 2·B − min, max capped at
// T − window (min then 2·B − max); unless T >= max >= min >= window, kvpress falls back to
// round(B), at least 1; else round(max − layer · (max − min) / (layers − 1)). round is Python's:
// half to even. B goes through window + B − window as in kvpress, so the floats are its own.
std::int64_t pyramid_layer_budget(std::int64_t T, const Budget& b, int layer, int layers, int window_size, int beta);

struct PressResult {
  at::Tensor scores;  // [kv_heads, T] the scorer's, before any allocation changes them
  KeptSets kept;
};

// One layer: score, then keep per the allocation. A budget that keeps all T positions keeps every
// position without scoring (scores left undefined), as kvpress does at ratio 0.
PressResult press_layer(Scorer s, const ScorerParams& sp, const AllocationParams& ap, const Budget& b,
                        const LayerInputs& in, int layer, int layers);

}  // namespace luka::press
